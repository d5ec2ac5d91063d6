"""Contract: workers that take tasks without sending task events
(``mark_blind_workers``, the ``blind_*`` fields of ``get_workers``), and the
runs they may hold left out of ``unstarted_run_counts`` and
``reclaim_unstarted_runs`` (``held=``), on every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.model import Claimed, ScheduleKind, Task, TaskType
from swh_like_scheduler.domain.records import BlindWindow, WorkerSighting, WorkerState
from swh_like_scheduler.policy.blind import blind_workers, holds, is_blind

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
MIN = timedelta(minutes=1)
H = timedelta(hours=1)
#: an instant with microseconds: stored and read back exactly
ODD = T0 + 7 * MIN + timedelta(microseconds=123457)


def rows(store: Any) -> dict[str, WorkerState]:
    return {w.hostname: w for w in store.get_workers()}


def window_of(state: WorkerState) -> tuple[Any, Any, Any]:
    return (state.blind_since, state.blind_until, state.blind_tasks)


@pytest.fixture
def workers(store: Any) -> None:
    store.record_worker_sightings(
        [
            WorkerSighting("a@box", T0, True, 2.0, 100),
            WorkerSighting("b@box", T0, True, 2.0, 200),
            WorkerSighting("c@box", T0, True, 2.0, 300),
        ]
    )


# -- mark_blind_workers, get_workers ---------------------------------------------------


def test_rows_start_without_a_window(store: Any, workers: None) -> None:
    for row in store.get_workers():
        assert window_of(row) == (None, None, None)
    assert store.mark_blind_workers([]) == []


def test_an_open_window_is_recorded_and_closed(store: Any, workers: None) -> None:
    [changed] = store.mark_blind_workers([BlindWindow("a@box", since=T0 + MIN)])
    assert changed.hostname == "a@box" and window_of(changed) == (T0 + MIN, None, None)
    found = rows(store)
    assert found["a@box"] == changed
    assert window_of(found["b@box"]) == (None, None, None)
    assert [w.hostname for w in blind_workers(found.values())] == ["a@box"]
    # its first task event closes it
    [closed] = store.mark_blind_workers([BlindWindow("a@box", since=None, until=ODD)])
    assert window_of(closed) == (T0 + MIN, ODD, None)
    assert rows(store)["a@box"] == closed
    assert blind_workers(store.get_workers()) == []
    # a second close changes nothing, and says so
    assert store.mark_blind_workers([BlindWindow("a@box", since=None, until=ODD + H)]) == []
    assert rows(store)["a@box"].blind_until == ODD


def test_a_closed_window_keeps_its_task_names(store: Any, workers: None) -> None:
    window = BlindWindow("b@box", since=ODD, until=ODD, tasks=("proj.mul", "proj.add"))
    [changed] = store.mark_blind_workers([window])
    assert window_of(changed) == (ODD, ODD, ("proj.mul", "proj.add"))
    later = BlindWindow("b@box", since=ODD + H, until=ODD + H, tasks=("proj.sub",))
    store.mark_blind_workers([later])
    row = rows(store)["b@box"]
    assert window_of(row) == (ODD, ODD + H, ("proj.add", "proj.mul", "proj.sub"))
    assert holds([row], {"add": "proj.add", "div": "proj.div"}) == {"add": ODD + H}


def test_windows_of_one_call_are_folded_in_order(store: Any, workers: None) -> None:
    changed = store.mark_blind_workers(
        [
            BlindWindow("c@box", since=T0 + MIN),
            BlindWindow("a@box", since=T0 + 2 * MIN, until=T0 + 2 * MIN, tasks=()),
            BlindWindow("c@box", since=None, until=T0 + 3 * MIN),
            BlindWindow("ghost@box", since=T0 + MIN),  # no row: left out
        ]
    )
    assert sorted((w.hostname, window_of(w)) for w in changed) == [
        ("a@box", (T0 + 2 * MIN, T0 + 2 * MIN, ())),
        ("c@box", (T0 + MIN, T0 + 3 * MIN, None)),
    ]
    assert "ghost@box" not in rows(store)
    assert rows(store)["a@box"].blind_tasks == ()


def test_heartbeats_keep_the_window_and_a_new_process_ends_its_hold(
    store: Any, workers: None
) -> None:
    store.mark_blind_workers([BlindWindow("a@box", since=T0 + MIN)])
    store.record_worker_sightings([WorkerSighting("a@box", T0 + 2 * MIN, True, 2.0, 100)])
    row = rows(store)["a@box"]
    assert window_of(row) == (T0 + MIN, None, None) and is_blind(row)
    # restarted: the window is the former process's, and holds nothing
    store.record_worker_sightings([WorkerSighting("a@box", T0 + 5 * MIN, True, 2.0, 101)])
    row = rows(store)["a@box"]
    assert row.pid == 101 and row.pid_since == T0 + 5 * MIN
    assert window_of(row) == (T0 + MIN, None, None) and not is_blind(row)
    # a close is of the former window: nothing to do; a new window replaces it
    assert store.mark_blind_workers([BlindWindow("a@box", None, T0 + 6 * MIN)]) == []
    [changed] = store.mark_blind_workers([BlindWindow("a@box", T0 + 7 * MIN, T0 + 7 * MIN, ())])
    assert window_of(changed) == (T0 + 7 * MIN, T0 + 7 * MIN, ())
    # offline: a worker gone holds nothing
    store.mark_blind_workers([BlindWindow("b@box", since=T0 + MIN)])
    store.record_worker_sightings([WorkerSighting("b@box", T0 + 8 * MIN, False, 2.0, 200)])
    row = rows(store)["b@box"]
    assert row.blind_since == T0 + MIN and not is_blind(row)


# -- held runs -------------------------------------------------------------------------------


@pytest.fixture
def other_type(store: Any) -> TaskType:
    made: TaskType = store.create_task_type(TaskType(type="other", backend_name="proj.other"))
    return made


def ready(store: Any, kind: str, count: int) -> None:
    store.create_tasks(
        [
            Task(
                type=kind,
                args=(kind, n),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=T0 - H,
                deadline=T0,
            )
            for n in range(count)
        ],
        now=T0 - H,
    )


def claim(store: Any, kind: str, at: datetime, limit: int, *, publish: bool = True) -> list[Any]:
    claimed = store.claim_ready_tasks(kind, now=at, limit=limit)
    assert len(claimed) == limit
    if publish:
        store.mark_published([claimed[0].batch], at=at + S)
    return claimed


@pytest.fixture
def dispatched(store: Any, sleep_type: TaskType, other_type: TaskType) -> dict[str, list[Any]]:
    """sleep: 2 runs dispatched at T0, 2 at T0 + 10 min, 1 orphan (never
    published) claimed at T0 + 20 min; other: 2 runs dispatched at T0."""
    ready(store, "sleep", 5)
    ready(store, "other", 2)
    return {
        "early": claim(store, "sleep", T0, 2),
        "late": claim(store, "sleep", T0 + 10 * MIN, 2),
        "orphan": claim(store, "sleep", T0 + 20 * MIN, 1, publish=False),
        "other": claim(store, "other", T0, 2),
    }


def ids(taken: list[tuple[str, Claimed]]) -> list[int]:
    return sorted(c.task_id for _, c in taken)


def task_ids(claimed: list[Any]) -> list[int]:
    return sorted(c.task_id for c in claimed)


def test_held_runs_are_not_counted(store: Any, dispatched: dict[str, list[Any]]) -> None:
    assert store.unstarted_run_counts() == {"sleep": 4, "other": 2}  # orphans never
    assert store.unstarted_run_counts(held={}) == {"sleep": 4, "other": 2}
    assert store.unstarted_run_counts(held={"unknown": None}) == {"sleep": 4, "other": 2}
    assert store.unstarted_run_counts(held={"sleep": None}) == {"other": 2}
    assert store.unstarted_run_counts(held={"sleep": None, "other": None}) == {}
    # an instant holds the runs dispatched before it: the early two only
    assert store.unstarted_run_counts(held={"sleep": T0 + 5 * MIN}) == {"sleep": 2, "other": 2}
    assert store.unstarted_run_counts(held={"sleep": T0 + 10 * MIN}) == {"sleep": 2, "other": 2}
    assert store.unstarted_run_counts(held={"sleep": T0 + 10 * MIN + S}) == {"other": 2}
    assert store.unstarted_run_counts(held={"sleep": T0}) == {"sleep": 4, "other": 2}
    assert store.unstarted_run_counts(held={"other": T0 + S, "sleep": T0 + 5 * MIN}) == {"sleep": 2}
    assert store.unstarted_run_counts(task_types=["sleep"], held={"other": None}) == {"sleep": 4}


def test_held_runs_are_not_taken_back(store: Any, dispatched: dict[str, list[Any]]) -> None:
    later = T0 + H
    assert (
        store.reclaim_unstarted_runs(
            now=later, published_before=later, held={"sleep": None, "other": None}
        )
        == []
    )
    taken = store.reclaim_unstarted_runs(
        now=later, published_before=later, held={"sleep": T0 + 5 * MIN, "other": None}
    )
    assert ids(taken) == task_ids(dispatched["late"])
    assert {kind for kind, _ in taken} == {"sleep"}
    # what was taken is dispatched again now (once its new batch is sent):
    # no longer held by that instant
    held = {"sleep": T0 + 5 * MIN, "other": None}
    assert store.unstarted_run_counts(held=held) == {}
    store.mark_published([taken[0][1].batch], at=later)
    assert store.unstarted_run_counts(held=held) == {"sleep": 2}
    rest = store.reclaim_unstarted_runs(
        now=later + S, published_before=later, held={"sleep": T0 + MIN}
    )
    assert ids(rest) == task_ids(dispatched["other"])


def test_held_runs_of_one_type_leave_the_others_to_take(
    store: Any, dispatched: dict[str, list[Any]]
) -> None:
    later = T0 + H
    taken = store.reclaim_unstarted_runs(
        now=later, published_before=later, held={"sleep": None}, limit=10
    )
    assert ids(taken) == task_ids(dispatched["other"])


def test_orphans_are_never_held(store: Any, dispatched: dict[str, list[Any]]) -> None:
    later = T0 + H
    taken = store.reclaim_unstarted_runs(
        now=later, claimed_before=later, held={"sleep": None, "other": None}
    )
    assert ids(taken) == task_ids(dispatched["orphan"])
    # both kinds at once: the orphans (none left) and the published runs not held
    taken = store.reclaim_unstarted_runs(
        now=later + S,
        claimed_before=later,
        published_before=later,
        held={"sleep": T0 + 5 * MIN, "other": None},
    )
    assert ids(taken) == task_ids(dispatched["late"])


def test_held_with_orphans_and_published_runs_in_one_call(
    store: Any, dispatched: dict[str, list[Any]]
) -> None:
    later = T0 + H
    taken = store.reclaim_unstarted_runs(
        now=later,
        claimed_before=later,
        published_before=later,
        held={"sleep": None},
    )
    assert ids(taken) == sorted(task_ids(dispatched["orphan"]) + task_ids(dispatched["other"]))


def test_the_holds_of_blind_workers_read_by_the_store(
    store: Any, workers: None, dispatched: dict[str, list[Any]]
) -> None:
    """The monitor's reading: the live workers' windows, as holds per type."""
    store.mark_blind_workers(
        [BlindWindow("a@box", T0 + 5 * MIN, T0 + 5 * MIN, ("swh_like_workers.sleep.sleep",))]
    )
    backends = {t.type: t.backend_name for t in store.get_task_types()}
    held = holds(store.get_workers(), backends)
    assert held == {"sleep": T0 + 5 * MIN}
    assert store.unstarted_run_counts(held=held) == {"sleep": 2, "other": 2}
    later = T0 + H
    taken = store.reclaim_unstarted_runs(now=later, published_before=later, held=held)
    assert ids(taken) == sorted(task_ids(dispatched["late"]) + task_ids(dispatched["other"]))
