"""A round of the listener's :class:`~swh_like_scheduler.listener.switch.EventSwitch`
against a real store (SQLite): a worker whose task events it turned on, and
that had begun tasks meanwhile, gets a closed window in its row; one that
had begun none, or whose events were on, gets none. ``app.control`` is a
stub with Celery's reply shapes (the logic here is ours)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.records import WorkerSighting
from swh_like_scheduler.listener import switch as switch_module
from swh_like_scheduler.listener.switch import Answer, EventSwitch
from swh_like_scheduler.plumbing.quietlog import QuietLog
from swh_like_scheduler.policy.blind import blind_workers, holds, is_blind
from swh_like_scheduler.store import SQLAlchemyStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TURNED_AT = T0 + timedelta(minutes=5)


class Inspect:
    def __init__(self, control: Control, destination: list[str]) -> None:
        self.control, self.destination = control, destination

    def stats(self) -> Any:
        self.control.inspected.append(self.destination)
        if isinstance(self.control.stats, Exception):
            raise self.control.stats
        return self.control.stats


class Control:
    """``app.control`` as the switch uses it: ``enable_events`` (a
    broadcast's replies) and ``inspect(...).stats()``."""

    def __init__(self, replies: list[Any], stats: Any) -> None:
        self.replies, self.stats = replies, stats
        self.inspected: list[list[str]] = []

    def enable_events(self, *, reply: bool, timeout: float) -> list[Any]:
        return self.replies

    def inspect(self, *, destination: list[str], timeout: float) -> Inspect:
        return Inspect(self, destination)


class App:
    def __init__(self, control: Control) -> None:
        self.control = control


@pytest.fixture
def store(sqlite_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.from_url(sqlite_url)
    yield store
    store.close()


@pytest.fixture(autouse=True)
def _fresh_quiet_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(switch_module, "_failed", QuietLog(switch_module.logger, every=600))


def seen(store: SQLAlchemyStore, *names: str) -> None:
    store.record_worker_sightings(
        [WorkerSighting(n, T0, True, 2.0, 100 + i, 0) for i, n in enumerate(names)]
    )


def rows(store: SQLAlchemyStore) -> dict[str, Any]:
    return {w.hostname: w for w in store.get_workers()}


def test_events_turned_on_after_tasks_began_leave_a_closed_window(
    store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen(store, "blind@box", "idle@box", "good@box")
    control = Control(
        replies=[
            {"blind@box": {"ok": "task events enabled"}},
            {"idle@box": {"ok": "task events enabled"}},
            {"good@box": {"ok": "task events already enabled"}},
        ],
        stats={
            "blind@box": {"total": {"proj.add": 2, "proj.mul": 1}},
            "idle@box": {"total": {}},
        },
    )
    switch = EventSwitch(App(control), store, clock=lambda: TURNED_AT)
    with caplog.at_level(logging.INFO, logger="swh_like_scheduler.listener.switch"):
        found = switch.round()
    assert found == [
        Answer("blind@box", True),
        Answer("idle@box", True),
        Answer("good@box", False),
    ]
    # only the workers whose events were off are asked for their stats
    assert control.inspected == [["blind@box", "idle@box"]]
    workers = rows(store)
    blind = workers["blind@box"]
    assert (blind.blind_since, blind.blind_until, blind.blind_tasks) == (
        TURNED_AT,
        TURNED_AT,
        ("proj.add", "proj.mul"),
    )
    assert is_blind(blind) and blind_workers(workers.values()) == []  # events on now
    # its runs of those tasks dispatched before then are held
    assert holds(workers.values(), {"add": "proj.add", "sub": "proj.sub"}) == {"add": TURNED_AT}
    for name in ("idle@box", "good@box"):
        row = workers[name]
        assert (row.blind_since, row.blind_until, row.blind_tasks) == (None, None, None), name
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert warned[0].startswith(
        "worker blind@box sent no task events (started without -E) and began proj.add, "
        "proj.mul before they were turned on"
    )
    assert "worker idle@box sent no task events (started without -E): turned them on " in (
        caplog.text
    )
    # every answer counts as answered, whatever its events were
    assert all(switch.answered(n) for n in ("blind@box", "idle@box", "good@box"))


def test_stats_that_cannot_be_read_leave_a_window_of_any_task(
    store: SQLAlchemyStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen(store, "blind@box")
    control = Control(
        replies=[{"blind@box": {"ok": "task events enabled"}}],
        stats=ConnectionError("broker away"),
    )
    switch = EventSwitch(App(control), store, clock=lambda: TURNED_AT)
    switch.round()
    blind = rows(store)["blind@box"]
    assert (blind.blind_since, blind.blind_until, blind.blind_tasks) == (
        TURNED_AT,
        TURNED_AT,
        None,
    )
    assert holds([blind], {"add": "proj.add", "sub": "proj.sub"}) == {
        "add": TURNED_AT,
        "sub": TURNED_AT,
    }
    assert "cannot read the stats of blind@box: broker away" in caplog.text
    assert "began tasks it did not say before they were turned on" in caplog.text


def test_a_worker_missing_from_the_stats_is_held_for_any_task(store: SQLAlchemyStore) -> None:
    seen(store, "blind@box")
    control = Control(replies=[{"blind@box": {"ok": "task events enabled"}}], stats=None)
    EventSwitch(App(control), store, clock=lambda: TURNED_AT).round()
    assert rows(store)["blind@box"].blind_tasks is None
    assert rows(store)["blind@box"].blind_until == TURNED_AT


def test_a_later_round_extends_the_window_and_adds_the_tasks(store: SQLAlchemyStore) -> None:
    seen(store, "blind@box")
    instants = iter([TURNED_AT, TURNED_AT + timedelta(minutes=10)])
    control = Control(
        replies=[{"blind@box": {"ok": "task events enabled"}}],
        stats={"blind@box": {"total": {"proj.add": 1}}},
    )
    switch = EventSwitch(App(control), store, clock=lambda: next(instants))
    switch.round()
    # its events went off again (it reconnected to its broker) and it ran another task
    control.stats = {"blind@box": {"total": {"proj.add": 1, "proj.sub": 4}}}
    switch.round()
    blind = rows(store)["blind@box"]
    assert (blind.blind_since, blind.blind_until, blind.blind_tasks) == (
        TURNED_AT,
        TURNED_AT + timedelta(minutes=10),
        ("proj.add", "proj.sub"),
    )


def test_an_answer_from_a_worker_never_seen_writes_nothing(store: SQLAlchemyStore) -> None:
    control = Control(
        replies=[{"ghost@box": {"ok": "task events enabled"}}],
        stats={"ghost@box": {"total": {"proj.add": 1}}},
    )
    EventSwitch(App(control), store, clock=lambda: TURNED_AT).round()
    assert store.get_workers() == []
