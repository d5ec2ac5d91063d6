"""Workers that take tasks without sending task events, and the runs they
may hold (:mod:`swh_like_scheduler.policy.blind`)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import MIN, T0

from swh_like_scheduler.domain.records import BlindWindow, WorkerState
from swh_like_scheduler.policy.blind import (
    blind_workers,
    fold_window,
    heartbeat_blind,
    holders,
    holds,
    is_blind,
)

S = timedelta(seconds=1)
GIT, SVN = "swh.loader.git.tasks.Update", "swh.loader.svn.tasks.Update"
BACKENDS = {"load-git": GIT, "load-svn": SVN}


def a_worker(name: str = "w@box", *, online: bool = True, **changes: object) -> WorkerState:
    values: dict[str, object] = {
        "hostname": name,
        "last_heartbeat_at": T0 + 10 * MIN,
        "online": online,
        "freq": 2.0,
        "pid": 4242,
        "pid_since": T0,
    }
    values.update(changes)
    return WorkerState(**values)  # type: ignore[arg-type]


# -- heartbeat_blind -------------------------------------------------------------


def test_a_first_heartbeat_tells_nothing() -> None:
    assert not heartbeat_blind(None, (T0, 5), None)


def test_a_count_that_grew_with_no_task_event_is_blind() -> None:
    assert heartbeat_blind((T0, 1), (T0 + 2 * S, 2), None)
    # the latest task event came before the previous heartbeat
    assert heartbeat_blind((T0, 1), (T0 + 2 * S, 2), T0 - S)


def test_a_task_event_since_the_previous_heartbeat_is_not_blind() -> None:
    assert not heartbeat_blind((T0, 1), (T0 + 2 * S, 2), T0)
    assert not heartbeat_blind((T0, 1), (T0 + 2 * S, 2), T0 + S)
    assert not heartbeat_blind((T0, 1), (T0 + 2 * S, 2), T0 + 5 * S)


def test_a_count_that_did_not_grow_or_a_late_heartbeat_is_not_blind() -> None:
    assert not heartbeat_blind((T0, 3), (T0 + 2 * S, 3), None)
    assert not heartbeat_blind((T0, 3), (T0 + 2 * S, 0), None)  # a new process
    assert not heartbeat_blind((T0, 1), (T0, 2), None)  # the same instant
    assert not heartbeat_blind((T0, 1), (T0 - S, 2), None)  # out of order


# -- fold_window -------------------------------------------------------------------


def test_an_open_window_opens_a_row_without_one() -> None:
    row = fold_window(a_worker(), BlindWindow("w@box", since=T0 + MIN))
    assert (row.blind_since, row.blind_until, row.blind_tasks) == (T0 + MIN, None, None)
    assert is_blind(row) and blind_workers([row]) == [row]


def test_a_closed_window_opens_and_closes_at_once() -> None:
    window = BlindWindow("w@box", since=T0 + MIN, until=T0 + MIN, tasks=(GIT,))
    row = fold_window(a_worker(), window)
    assert (row.blind_since, row.blind_until, row.blind_tasks) == (T0 + MIN, T0 + MIN, (GIT,))
    assert is_blind(row)  # it may hold runs dispatched before
    assert blind_workers([row]) == []  # but it sends task events now


def test_a_close_ends_an_open_window_once() -> None:
    row = fold_window(a_worker(), BlindWindow("w@box", since=T0 + MIN))
    closed = fold_window(row, BlindWindow("w@box", since=None, until=T0 + 5 * MIN))
    assert (closed.blind_since, closed.blind_until) == (T0 + MIN, T0 + 5 * MIN)
    # a second close does not move the first
    again = fold_window(closed, BlindWindow("w@box", since=None, until=T0 + 9 * MIN))
    assert again == closed


def test_a_close_without_an_open_window_changes_nothing() -> None:
    row = a_worker()
    assert fold_window(row, BlindWindow("w@box", since=None, until=T0 + MIN)) == row
    opened = fold_window(row, BlindWindow("w@box", since=T0 + MIN))
    # a close that says no instant is no close
    assert fold_window(opened, BlindWindow("w@box", since=None, until=None)) == opened


def test_an_open_window_reopens_a_closed_one_and_keeps_its_start() -> None:
    closed = fold_window(a_worker(), BlindWindow("w@box", T0 + MIN, T0 + 2 * MIN, (GIT,)))
    row = fold_window(closed, BlindWindow("w@box", since=T0 + 3 * MIN, tasks=(SVN,)))
    assert (row.blind_since, row.blind_until, row.blind_tasks) == (T0 + MIN, None, (GIT, SVN))


def test_closed_windows_add_up() -> None:
    first = fold_window(a_worker(), BlindWindow("w@box", T0 + 2 * MIN, T0 + 3 * MIN, (SVN,)))
    row = fold_window(first, BlindWindow("w@box", T0 + MIN, T0 + 2 * MIN, (GIT, SVN)))
    # from the earliest start to the latest end, the task names merged
    assert (row.blind_since, row.blind_until, row.blind_tasks) == (
        T0 + MIN,
        T0 + 3 * MIN,
        (GIT, SVN),
    )


def test_the_listener_turning_events_on_ends_an_open_window() -> None:
    opened = fold_window(a_worker(), BlindWindow("w@box", since=T0 + MIN))
    row = fold_window(opened, BlindWindow("w@box", T0 + 4 * MIN, T0 + 4 * MIN, (GIT,)))
    assert (row.blind_since, row.blind_until) == (T0 + MIN, T0 + 4 * MIN)
    assert row.blind_tasks is None  # unknown tasks win


def test_unknown_tasks_win() -> None:
    known = fold_window(a_worker(), BlindWindow("w@box", T0 + MIN, T0 + MIN, (GIT,)))
    row = fold_window(known, BlindWindow("w@box", T0 + 2 * MIN, T0 + 2 * MIN, None))
    assert row.blind_tasks is None
    row = fold_window(row, BlindWindow("w@box", T0 + 3 * MIN, T0 + 3 * MIN, (SVN,)))
    assert row.blind_tasks is None


def test_a_window_of_a_former_process_is_replaced() -> None:
    former = a_worker(
        blind_since=T0 - 10 * MIN, blind_until=None, blind_tasks=None, pid_since=T0, pid=77
    )
    assert not is_blind(former)  # the process that took tasks blind is gone
    assert blind_workers([former]) == []
    assert holds([former], BACKENDS) == {}
    # a close is of the former process's window: nothing to close
    assert fold_window(former, BlindWindow("w@box", since=None, until=T0 + MIN)) == former
    row = fold_window(former, BlindWindow("w@box", T0 + MIN, T0 + 2 * MIN, (SVN,)))
    # replaced, not merged: neither the former start nor its unknown tasks
    assert (row.blind_since, row.blind_until, row.blind_tasks) == (
        T0 + MIN,
        T0 + 2 * MIN,
        (SVN,),
    )
    assert is_blind(row)


def test_a_row_without_a_known_process_start_keeps_its_window() -> None:
    row = a_worker(pid=None, pid_since=None, blind_since=T0 - MIN)
    assert is_blind(row)
    merged = fold_window(row, BlindWindow("w@box", T0 + MIN, T0 + 2 * MIN, (GIT,)))
    assert merged.blind_since == T0 - MIN and merged.blind_until == T0 + 2 * MIN


# -- is_blind, blind_workers --------------------------------------------------------


def test_an_offline_worker_is_not_blind() -> None:
    offline = a_worker(online=False, blind_since=T0 + MIN)
    assert not is_blind(offline)
    assert blind_workers([offline]) == []


def test_blind_workers_are_the_live_ones_with_an_open_window() -> None:
    open_ = a_worker("a@box", blind_since=T0 + MIN)
    closed = a_worker("b@box", blind_since=T0 + MIN, blind_until=T0 + 2 * MIN)
    offline = a_worker("c@box", online=False, blind_since=T0 + MIN)
    plain = a_worker("d@box")
    assert blind_workers([open_, closed, offline, plain]) == [open_]


# -- holds -------------------------------------------------------------------------------


def test_an_open_window_of_unknown_tasks_holds_every_run_of_every_type() -> None:
    worker = a_worker(blind_since=T0 + MIN)
    assert holds([worker], BACKENDS) == {"load-git": None, "load-svn": None}


def test_a_closed_window_holds_the_runs_dispatched_before_its_end() -> None:
    worker = a_worker(blind_since=T0 + MIN, blind_until=T0 + 2 * MIN)
    assert holds([worker], BACKENDS) == {"load-git": T0 + 2 * MIN, "load-svn": T0 + 2 * MIN}


def test_only_the_task_names_run_meanwhile_are_held() -> None:
    worker = a_worker(blind_since=T0 + MIN, blind_until=T0 + 2 * MIN, blind_tasks=(SVN,))
    assert holds([worker], BACKENDS) == {"load-svn": T0 + 2 * MIN}
    # a type no worker's window covers is absent; a window of no task holds nothing
    assert holds([worker], {"load-git": GIT}) == {}
    assert holds([a_worker(blind_since=T0, blind_until=T0, blind_tasks=())], BACKENDS) == {}


def test_offline_workers_and_plain_ones_hold_nothing() -> None:
    offline = a_worker("c@box", online=False, blind_since=T0 + MIN)
    assert holds([offline, a_worker("d@box")], BACKENDS) == {}


def test_the_latest_end_and_an_open_window_win_whatever_the_order() -> None:
    early = a_worker("a@box", blind_since=T0, blind_until=T0 + MIN)
    late = a_worker("b@box", blind_since=T0, blind_until=T0 + 3 * MIN)
    opened = a_worker("c@box", blind_since=T0, blind_tasks=(GIT,))
    for workers in ([early, late], [late, early]):
        assert holds(workers, BACKENDS) == {"load-git": T0 + 3 * MIN, "load-svn": T0 + 3 * MIN}
    for workers in ([early, opened, late], [opened, late, early], [late, early, opened]):
        assert holds(workers, BACKENDS) == {"load-git": None, "load-svn": T0 + 3 * MIN}


# -- holders -------------------------------------------------------------------------------


def test_holders_are_the_live_workers_that_may_have_taken_a_run() -> None:
    opened = a_worker("a@box", blind_since=T0 + MIN)
    closed = a_worker("b@box", blind_since=T0 + MIN, blind_until=T0 + 5 * MIN, blind_tasks=(GIT,))
    offline = a_worker("c@box", online=False, blind_since=T0 + MIN)
    plain = a_worker("d@box")
    workers = [opened, closed, offline, plain]
    assert holders(workers, GIT, T0 + 4 * MIN) == [opened, closed]
    assert holders(workers, GIT, T0 + 5 * MIN) == [opened]  # dispatched once it ended
    assert holders(workers, SVN, T0 + 4 * MIN) == [opened]  # a task it did not run
    assert holders([closed, offline, plain], SVN, T0) == []


# -- properties --------------------------------------------------------------------------------

_instants = st.integers(min_value=-5, max_value=30).map(lambda n: T0 + n * MIN)
_tasks = st.none() | st.lists(st.sampled_from([GIT, SVN, "other.task"]), unique=True).map(
    lambda names: tuple(sorted(names))
)
_workers = st.builds(
    a_worker,
    st.sampled_from(["a@box", "b@box", "c@box"]),
    online=st.booleans(),
    pid_since=st.none() | _instants,
    blind_since=st.none() | _instants,
    blind_until=st.none() | _instants,
    blind_tasks=_tasks,
)
_windows = st.builds(
    BlindWindow,
    st.just("w@box"),
    since=st.none() | _instants,
    until=st.none() | _instants,
    tasks=_tasks,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_workers, max_size=5), _instants, st.sampled_from([GIT, SVN, "other.task"]))
def test_holds_and_holders_agree_on_every_run(
    workers: list[WorkerState], dispatched: datetime, backend: str
) -> None:
    """A run of a type, dispatched at an instant, is left out of the
    re-publishing (the store's reading of :func:`holds`: every run for
    ``None``, those dispatched before an instant) exactly when
    :func:`holders` names a worker that may hold it."""
    held = holds(workers, {"the-type": backend})
    left_out = "the-type" in held and (held["the-type"] is None or dispatched < held["the-type"])
    assert left_out == bool(holders(workers, backend, dispatched))
    assert all(is_blind(w) for w in holders(workers, backend, dispatched))


@settings(max_examples=300, deadline=None)
@given(_workers, _windows)
def test_folding_a_window_twice_is_folding_it_once(row: WorkerState, window: BlindWindow) -> None:
    row = dataclasses.replace(row, hostname="w@box")
    once = fold_window(row, window)
    assert fold_window(once, window) == once
    # only the window's columns ever change
    assert (
        dataclasses.replace(
            once,
            blind_since=row.blind_since,
            blind_until=row.blind_until,
            blind_tasks=row.blind_tasks,
        )
        == row
    )


@settings(max_examples=300, deadline=None)
@given(_workers, st.lists(_windows, max_size=6))
def test_an_open_window_stays_open_until_a_close(
    row: WorkerState, windows: list[BlindWindow]
) -> None:
    """A current window opened is open until a window with an end comes:
    a close, or the listener turning the worker's events on."""
    row = dataclasses.replace(row, hostname="w@box", pid_since=None, online=True)
    row = fold_window(row, BlindWindow("w@box", since=T0))
    for window in windows:
        before = row
        row = fold_window(row, window)
        if window.until is None:
            assert row.blind_until is None or row.blind_until == before.blind_until
        if before.blind_until is None and window.until is not None:
            assert row.blind_until is not None and row.blind_until >= window.until
        assert is_blind(row)  # the same process: its window never goes away


@settings(max_examples=300, deadline=None)
@given(_workers, _windows)
def test_a_window_of_the_current_process_stays_its_own(
    row: WorkerState, window: BlindWindow
) -> None:
    """Whatever comes (a window whose start, on the listener's clock, is
    before the process's first event included), a live worker whose
    current process took tasks blind keeps holding its runs."""
    row = dataclasses.replace(
        row, hostname="w@box", online=True, pid_since=T0, blind_since=T0 + MIN
    )
    assert is_blind(row)
    after = fold_window(row, window)
    assert is_blind(after)
    assert after.blind_since is not None and after.blind_since >= T0


def test_a_window_started_on_another_clock_does_not_end_the_current_one() -> None:
    """The listener's clock a little behind the worker's: the switch's
    window starts before the process's first heartbeat; merged into the
    open window the heartbeats told, the worker still holds its runs."""
    opened = fold_window(a_worker(pid_since=T0), BlindWindow("w@box", since=T0 + MIN))
    row = fold_window(opened, BlindWindow("w@box", T0 - S, T0 - S, (GIT,)))
    assert is_blind(row) and row.blind_since == T0
    assert row.blind_tasks is None  # the heartbeats' window: any task
