"""Turning the workers' task events on (:mod:`swh_like_scheduler.listener.switch`):
the broadcast's replies read, and who answered. The windows a round
records in the store: ``tests/integration/listener/test_event_switch_store.py``."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from swh_like_scheduler.listener import switch as switch_module
from swh_like_scheduler.listener.switch import Answer, EventSwitch, answers, tasks_begun
from swh_like_scheduler.plumbing.quietlog import QuietLog


class Control:
    """``app.control``'s ``enable_events`` with canned replies, counted."""

    def __init__(self, replies: Any = None) -> None:
        self.replies = replies if replies is not None else []
        self.broadcasts = 0

    def enable_events(self, *, reply: bool, timeout: float) -> Any:
        assert reply and timeout > 0
        self.broadcasts += 1
        return self.replies


class App:
    def __init__(self, control: Control) -> None:
        self.control = control


# -- answers ---------------------------------------------------------------------------


def test_answers_read_celerys_broadcast_replies() -> None:
    replies = [
        {"a@box": {"ok": "task events enabled"}},
        {"b@box": {"ok": "task events already enabled"}},
        {"c@box": {"ok": "task events enabled"}, "d@box": {"ok": "task events enabled"}},
    ]
    assert answers(replies) == [
        Answer("a@box", True),
        Answer("b@box", False),
        Answer("c@box", True),
        Answer("d@box", True),
    ]


@pytest.mark.parametrize(
    "junk",
    [
        None,
        [],
        [None, "a@box", 3, ["a@box"]],
        [{"a@box": "task events enabled"}],  # no {"ok": ...}
        [{"a@box": {"error": "No such command"}}],  # an old worker
        [{"a@box": {"ok": 1}}],
        [{7: {"ok": "task events enabled"}}],
    ],
)
def test_anything_else_is_no_answer(junk: Any) -> None:
    assert answers(junk) == []


def test_junk_beside_answers_is_left_out() -> None:
    replies = [None, {"a@box": {"error": "x"}}, {"b@box": {"ok": "task events enabled"}}]
    assert answers(replies) == [Answer("b@box", True)]


# -- tasks_begun -------------------------------------------------------------------------


def test_tasks_begun_are_the_names_counted_in_stats() -> None:
    stats = {
        "pid": 4242,
        "total": {"proj.tasks.b": 3, "proj.tasks.a": 1, "proj.tasks.never": 0},
    }
    assert tasks_begun(stats) == ("proj.tasks.a", "proj.tasks.b")


@pytest.mark.parametrize(
    "stats",
    [None, "stats", {}, {"total": {}}, {"total": "x"}, {"total": {"t": "3"}}, {"total": {"t": -1}}],
)
def test_stats_without_tasks_begun(stats: Any) -> None:
    assert tasks_begun(stats) == ()


# -- answered / want / forget ----------------------------------------------------------------


def test_answered_after_a_round_forgotten_when_offline() -> None:
    control = Control([{"a@box": {"ok": "task events already enabled"}}])
    switch = EventSwitch(App(control), store=None)  # type: ignore[arg-type]
    assert not switch.answered("a@box")
    assert switch.round() == [Answer("a@box", False)]
    assert (switch.rounds, switch.done, control.broadcasts) == (1, 1, 1)
    assert switch.answered("a@box") and switch.answered("a@box", 4242)
    # the process that answered is the first one seen since; another is asked again
    assert switch.answered("a@box", 4242) and not switch.answered("a@box", 4343)
    assert not switch.answered("b@box")
    switch.forget("a@box")
    assert not switch.answered("a@box")
    switch.forget("never@box")  # unknown: nothing to forget


def test_a_failing_broadcast_is_not_a_round_done() -> None:
    class Down(Control):
        def enable_events(self, *, reply: bool, timeout: float) -> Any:
            raise ConnectionError("broker away")

    switch = EventSwitch(App(Down()), store=None)  # type: ignore[arg-type]
    with pytest.raises(ConnectionError):
        switch.round()
    assert (switch.rounds, switch.done) == (1, 0)


def wait_for(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_want_wakes_the_switch_for_a_worker_that_has_not_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(switch_module, "MIN_GAP", 0.05)
    control = Control([{"a@box": {"ok": "task events already enabled"}}])
    stop = threading.Event()
    switch = EventSwitch(App(control), store=None, every=3600, stop=stop)  # type: ignore[arg-type]
    switch.start()
    try:
        assert wait_for(lambda: switch.done == 1)  # a round at start
        switch.want("a@box", 4242)  # it answered: no round for it
        time.sleep(0.3)
        assert switch.done == 1
        switch.want("new@box", 5151)  # not answered: a round soon
        assert wait_for(lambda: switch.done == 2)
        switch.want("new@box", 5151)  # still silent: once per MIN_WANT
        time.sleep(0.3)
        assert switch.done == 2
        switch.want("other@box")
        assert wait_for(lambda: switch.done == 3)
    finally:
        stop.set()
        switch.join(timeout=10)
    assert switch._thread is not None and not switch._thread.is_alive()
    assert control.broadcasts == 3


def test_a_round_that_fails_is_logged_and_the_thread_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(switch_module, "MIN_GAP", 0.05)
    monkeypatch.setattr(switch_module, "_failed", QuietLog(switch_module.logger, every=600))
    calls: list[int] = []

    class Flaky(Control):
        def enable_events(self, *, reply: bool, timeout: float) -> Any:
            calls.append(1)
            if len(calls) == 1:
                raise ConnectionError("broker away")
            return [{"a@box": {"ok": "task events already enabled"}}]

    stop = threading.Event()
    switch = EventSwitch(App(Flaky()), store=None, every=0.1, stop=stop)  # type: ignore[arg-type]
    switch.start()
    try:
        assert wait_for(lambda: switch.done >= 1)
    finally:
        stop.set()
        switch.join(timeout=10)
    assert "cannot turn the workers' task events on: broker away" in caplog.text
    assert switch.answered("a@box")
