"""Workers seen taking tasks without sending task events, from their
heartbeats (:class:`swh_like_scheduler.listener.blind.BlindWatch`)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.records import BlindWindow, WorkerSighting
from swh_like_scheduler.listener.blind import BlindWatch
from swh_like_scheduler.listener.events import EventKind, RunEvent

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
W = "plain@box"
PID = 4242


class FakeSwitch:
    """What :class:`BlindWatch` reads of an
    :class:`~swh_like_scheduler.listener.switch.EventSwitch`: the rounds
    done, who answered; and what it is told (``want``, ``forget``)."""

    def __init__(self) -> None:
        self.done = 0
        self.answering: set[str] = set()
        self.wanted: list[tuple[str, int | None]] = []
        self.forgotten: list[str] = []

    def answered(self, hostname: str, pid: int | None = None) -> bool:
        return hostname in self.answering

    def want(self, hostname: str, pid: int | None = None) -> None:
        self.wanted.append((hostname, pid))

    def forget(self, hostname: str) -> None:
        self.forgotten.append(hostname)


def beat(seconds: float, processed: int | None, *, name: str = W, pid: int = PID) -> WorkerSighting:
    return WorkerSighting(name, T0 + seconds * S, True, 2.0, pid, processed)


def offline(seconds: float, *, name: str = W) -> WorkerSighting:
    return WorkerSighting(name, T0 + seconds * S, False, 2.0, PID)


def task_event(seconds: float, *, worker: str | None = W) -> RunEvent:
    return RunEvent(EventKind.START, f"run-{seconds}", T0 + seconds * S, "task-started", worker)


def watch_beats(watch: BlindWatch, *beats: WorkerSighting) -> list[list[BlindWindow]]:
    return [watch.observe([], [b]) for b in beats]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# -- without a switch (--no-enable-events) ----------------------------------------


def test_confirmed_at_the_next_heartbeat_then_closed_by_a_task_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = BlindWatch()
    with caplog.at_level(logging.INFO, logger="swh_like_scheduler.listener.blind"):
        # the count grows with no task event: a sign, not yet a window
        assert watch_beats(watch, beat(0, 0), beat(2, 3)) == [[], []]
        assert warnings(caplog) == []
        [window] = watch.observe([], [beat(4, 3)])
        assert window == BlindWindow(W, since=T0, until=None, tasks=None)
        [line] = warnings(caplog)
        assert line.startswith(f"worker {W} takes tasks without sending task events")
        assert "--no-enable-events" in line
        # once: later heartbeats say nothing more
        assert watch_beats(watch, beat(6, 4), beat(8, 9), beat(10, 9)) == [[], [], []]
        assert len(warnings(caplog)) == 1
        # its first task event closes the window, once
        assert watch.observe([task_event(11)], []) == [
            BlindWindow(W, since=None, until=T0 + 11 * S)
        ]
        assert watch.observe([task_event(12)], [beat(13, 10)]) == []
    assert f"worker {W} sends task events again" in caplog.text


def test_a_worker_that_sends_task_events_gets_no_window() -> None:
    watch = BlindWatch()
    assert watch.observe([], [beat(0, 0)]) == []
    for second in range(2, 30, 2):
        # a task began between two heartbeats, and its event came
        assert watch.observe([task_event(second - 1)], [beat(second, second)]) == []


def test_a_task_event_after_the_sign_settles_it() -> None:
    watch = BlindWatch()
    assert watch_beats(watch, beat(0, 0), beat(2, 3)) == [[], []]
    # the event of a task begun before the sign's heartbeat, late in its batch
    assert watch.observe([task_event(1)], [beat(4, 3)]) == []
    assert watch_beats(watch, beat(6, 3), beat(8, 3)) == [[], []]


def test_an_idle_worker_or_one_without_counts_gets_no_window() -> None:
    watch = BlindWatch()
    assert watch_beats(watch, *(beat(s, 5) for s in range(0, 20, 2))) == [[]] * 10
    assert watch_beats(watch, *(beat(s, None, name="old@box") for s in range(10))) == [[]] * 10


def test_late_and_repeated_heartbeats_are_not_compared() -> None:
    watch = BlindWatch()
    assert watch_beats(watch, beat(10, 5)) == [[]]
    # older than the one seen: neither a sign nor a new process
    assert watch_beats(watch, beat(4, 0), beat(10, 9), beat(6, 9)) == [[], [], []]
    assert watch_beats(watch, beat(12, 5)) == [[]]


def test_a_batch_of_heartbeats_is_read_in_time_order() -> None:
    watch = BlindWatch()
    [window] = watch.observe([], [beat(4, 3), beat(0, 0), beat(2, 3)])
    assert window == BlindWindow(W, since=T0, until=None, tasks=None)


def test_task_events_without_a_worker_are_left_out() -> None:
    watch = BlindWatch()
    watch_beats(watch, beat(0, 0))
    assert watch.observe([task_event(1, worker=None)], [beat(2, 3)]) == []
    assert watch.observe([], [beat(4, 3)]) == [BlindWindow(W, since=T0)]


def test_a_count_going_down_is_a_new_process_and_resets_the_sign() -> None:
    watch = BlindWatch()
    assert watch_beats(watch, beat(0, 0), beat(2, 3)) == [[], []]  # a sign
    assert watch_beats(watch, beat(4, 0, pid=5151)) == [[]]  # restarted
    assert watch_beats(watch, beat(6, 0, pid=5151), beat(8, 0, pid=5151)) == [[], []]


def test_a_new_process_that_takes_tasks_blind_is_named_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The worker restarted (killed, then started again without -E): its
    count starts again; its new process is seen and named like the first."""
    watch = BlindWatch()
    with caplog.at_level(logging.WARNING, logger="swh_like_scheduler.listener.blind"):
        assert watch_beats(watch, beat(0, 0), beat(2, 3), beat(4, 3))[-1] == [
            BlindWindow(W, since=T0)
        ]
        restarted = [beat(10, 0, pid=5151), beat(12, 2, pid=5151), beat(14, 2, pid=5151)]
        assert watch_beats(watch, *restarted)[-1] == [BlindWindow(W, since=T0 + 10 * S)]
    assert len(warnings(caplog)) == 2


def test_a_worker_that_went_offline_and_came_back_blind_is_named_again() -> None:
    watch = BlindWatch()
    assert watch_beats(watch, beat(0, 0), beat(2, 3), beat(4, 3))[-1] == [BlindWindow(W, T0)]
    assert watch.observe([], [offline(5)]) == []
    back = [beat(10, 0, pid=5151), beat(12, 1, pid=5151), beat(14, 1, pid=5151)]
    assert watch_beats(watch, *back)[-1] == [BlindWindow(W, since=T0 + 10 * S)]


def test_workers_are_watched_each_on_its_own() -> None:
    watch = BlindWatch()
    batch = [beat(0, 0), beat(0, 0, name="good@box")]
    assert watch.observe([], batch) == []
    batch = [beat(2, 3), beat(2, 3, name="good@box")]
    assert watch.observe([task_event(1, worker="good@box")], batch) == []
    batch = [beat(4, 3), beat(4, 3, name="good@box")]
    assert watch.observe([], batch) == [BlindWindow(W, since=T0)]


# -- with the switch that turns task events on -------------------------------------


def test_confirmed_once_the_switch_asked_and_the_worker_did_not_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    switch = FakeSwitch()
    watch = BlindWatch(switch)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="swh_like_scheduler.listener.blind"):
        assert watch_beats(watch, beat(0, 0), beat(2, 3)) == [[], []]  # a sign
        # no round of enable_events done since: not asked yet
        assert watch_beats(watch, beat(4, 3), beat(6, 4)) == [[], []]
        assert warnings(caplog) == []
        switch.done += 1  # a round done; the worker did not answer it
        [window] = watch.observe([], [beat(8, 4)])
        assert window == BlindWindow(W, since=T0, until=None, tasks=None)
        [line] = warnings(caplog)
        assert W in line and "does not answer the listener's request" in line
        switch.done += 1
        assert watch_beats(watch, beat(10, 5), beat(12, 5)) == [[], []]  # once
    assert watch.observe([task_event(13)], []) == [BlindWindow(W, since=None, until=T0 + 13 * S)]
    # every live sighting asks the switch to turn the worker's events on
    assert switch.wanted == [(W, PID)] * 7
    assert switch.forgotten == []


def test_a_worker_that_answers_the_switch_is_left_to_it() -> None:
    switch = FakeSwitch()
    watch = BlindWatch(switch)  # type: ignore[arg-type]
    assert watch_beats(watch, beat(0, 0), beat(2, 3)) == [[], []]  # a sign
    switch.answering.add(W)  # its events were turned on (the switch keeps its window)
    switch.done += 1
    assert watch_beats(watch, beat(4, 3), beat(6, 3), beat(8, 3)) == [[], [], []]


def test_a_sign_seen_after_a_round_waits_for_the_next_round() -> None:
    switch = FakeSwitch()
    switch.done = 3
    watch = BlindWatch(switch)  # type: ignore[arg-type]
    assert watch_beats(watch, beat(0, 0), beat(2, 3), beat(4, 3)) == [[], [], []]
    switch.done = 4
    assert watch_beats(watch, beat(6, 3)) == [[BlindWindow(W, since=T0)]]


def test_an_offline_worker_is_forgotten_by_the_switch() -> None:
    switch = FakeSwitch()
    watch = BlindWatch(switch)  # type: ignore[arg-type]
    assert watch_beats(watch, beat(0, 0), beat(2, 3)) == [[], []]  # a sign
    assert watch.observe([], [offline(3)]) == []
    assert switch.forgotten == [W]
    switch.done += 1
    # back with a new process: no sign left from the one before
    assert watch_beats(watch, beat(10, 0, pid=5151), beat(12, 0, pid=5151)) == [[], []]
    assert switch.wanted[-1] == (W, 5151)
