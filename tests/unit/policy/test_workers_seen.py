"""Main processes seen under one worker name: a restart, or two live workers
(:mod:`swh_like_scheduler.policy.workers`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from swh_like_scheduler.domain.records import (
    WorkerChange,
    WorkerChangeKind,
    WorkerSighting,
    WorkerState,
)
from swh_like_scheduler.policy.workers import restart_silence, see_worker, see_workers

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
NAME = "sleep@host"
RESTART, DUPLICATE = WorkerChangeKind.RESTART, WorkerChangeKind.DUPLICATE


def seen(pid: int | None, at: datetime, online: bool = True) -> WorkerSighting:
    return WorkerSighting(NAME, at, online, 2.0, pid)


def fold_from(
    state: WorkerState | None, *sightings: WorkerSighting
) -> tuple[WorkerState | None, list[WorkerChange]]:
    """One event at a time, in the order given (as batches of one)."""
    changes: list[WorkerChange] = []
    for sighting in sightings:
        state, found = see_worker(state, sighting)
        changes.extend(found)
    return state, changes


def fold(*sightings: WorkerSighting) -> tuple[WorkerState | None, list[WorkerChange]]:
    return fold_from(None, *sightings)


def test_the_silence_that_proves_a_process_gone() -> None:
    assert restart_silence(2.0) == 10 * S  # the floor
    assert restart_silence(None) == 10 * S
    assert restart_silence(5.0) == 15 * S  # three heartbeats


def test_one_process_keeps_its_name() -> None:
    state, changes = fold(*(seen(100, T0 + 2 * n * S) for n in range(10)))
    assert changes == []
    assert state == WorkerState(NAME, T0 + 18 * S, True, 2.0, 100, pid_since=T0)


def test_a_restart_is_told_once_the_old_process_stayed_silent() -> None:
    # the old process's last heartbeat at T0, the new one sends from T0 + 3 s
    state, changes = fold(seen(100, T0), seen(200, T0 + 3 * S))
    assert changes == []  # too early to tell a restart from a second worker
    assert state is not None and (state.pid, state.other_pid) == (200, 100)
    state, changes = see_worker(state, seen(200, T0 + 9 * S))
    assert changes == []
    state, changes = see_worker(state, seen(200, T0 + 11 * S))
    # the runs of 100 go; those 200 took from T0 + 3 s are its own
    assert changes == [WorkerChange(RESTART, NAME, T0 + 3 * S, 200, 100)]
    assert (state.pid, state.pid_since, state.other_pid) == (200, T0 + 3 * S, None)
    assert see_worker(state, seen(200, T0 + 13 * S))[1] == []  # told once


def test_a_new_process_long_after_the_old_one_is_a_restart_at_once() -> None:
    _, changes = fold(seen(100, T0), seen(200, T0 + 30 * S))
    assert changes == [WorkerChange(RESTART, NAME, T0 + 30 * S, 200, 100)]


def test_two_live_processes_under_one_name_are_a_duplicate_never_a_restart() -> None:
    # the heartbeats of two workers interleave for a minute
    events = [seen(100 if n % 2 else 200, T0 + n * S) for n in range(60)]
    state, changes = fold(*events)
    assert changes and {c.kind for c in changes} == {DUPLICATE}
    assert all({c.pid, c.other_pid} == {100, 200} for c in changes)
    assert state is not None and {state.pid, state.other_pid} == {100, 200}
    # in one batch, whatever the order of arrival
    shuffled = events[1::2] + events[::2]
    state, changes = see_workers(None, shuffled)
    assert changes and {c.kind for c in changes} == {DUPLICATE}


def test_when_one_of_two_live_processes_stops_its_runs_go() -> None:
    events = [seen(100 if n % 2 else 200, T0 + n * S) for n in range(10)]
    state, _ = fold(*events)  # 100 sent last at T0 + 9 s
    state, changes = fold_from(state, *(seen(200, T0 + n * S) for n in range(10, 30, 2)))
    restarts = [c for c in changes if c.kind is RESTART]
    assert [(c.pid, c.other_pid) for c in restarts] == [(200, 100)]


def test_late_events_of_a_replaced_process_change_nothing() -> None:
    state, _ = fold(seen(100, T0), seen(200, T0 + 30 * S))
    assert state is not None
    after, changes = see_worker(state, seen(100, T0 + S))  # older than 200's first event
    assert (after, changes) == (state, [])
    after, changes = see_worker(state, seen(200, T0 + 20 * S))  # 200's own, late
    assert (after, changes) == (state, [])


def test_a_late_event_from_another_process_while_the_current_one_ran_is_a_duplicate() -> None:
    state, _ = fold(seen(100, T0), seen(100, T0 + 10 * S))
    assert state is not None
    after, changes = see_worker(state, seen(300, T0 + 5 * S))
    assert changes == [WorkerChange(DUPLICATE, NAME, T0 + 5 * S, 100, 300)]
    assert (after.pid, after.other_pid, after.last_heartbeat_at) == (100, 300, T0 + 10 * S)


def test_offline_and_back_from_the_same_process_is_no_change() -> None:
    state, changes = fold(seen(100, T0), seen(100, T0 + S, online=False), seen(100, T0 + 2 * S))
    assert changes == []
    assert state is not None and state.online and state.other_pid is None


def test_an_event_without_pid_updates_the_name_only() -> None:
    state, changes = fold(seen(100, T0), seen(None, T0 + S, online=False))
    assert changes == []
    assert state is not None and (state.pid, state.online) == (100, False)
