"""Workers that take tasks without sending task events, and the runs they hold.

A Celery worker started without ``-E`` (and never told otherwise) sends
heartbeats, never ``task-started`` nor ``task-succeeded``: a run it takes
stays ``scheduled`` in the store while its body runs and ends. The
listener turns task events on where Celery lets it (``enable_events``),
and records a **window** where it could not, or not in time (a
:class:`~..domain.records.BlindWindow` folded into the worker's row by
:func:`fold_window`). Three things follow, here:

* :func:`heartbeat_blind`: a heartbeat that shows a worker began tasks
  since its previous one while no task event of it arrived meanwhile;
* :func:`holds`: the runs that must not be published again while the
  worker's process lives (dispatched before its window closed, never
  seen to start, of a task it ran meanwhile): they may have run there,
  and a second message would run the body twice;
* :func:`blind_workers`: the live workers to name in a warning.

Pure: the caller gives the workers' rows and ``now``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from ..domain.records import BlindWindow, WorkerState


def heartbeat_blind(
    previous: tuple[datetime, int] | None,
    current: tuple[datetime, int],
    last_task_event: datetime | None,
) -> bool:
    """Whether a heartbeat ``current`` (its instant and ``processed``
    count) shows its worker taking tasks blind: the count grew since the
    ``previous`` heartbeat, and the worker's latest task event (on the same
    clock, the worker's own) is older than that previous heartbeat.

    Celery counts a task as processed just before it sends its
    ``task-started`` event, both in the worker's main thread, and sends
    heartbeats from that thread too: a worker that sends task events has
    sent one after ``previous`` whenever the count grew."""
    if previous is None:
        return False
    before_at, before = previous
    at, count = current
    if at <= before_at or count <= before:
        return False
    return last_task_event is None or last_task_event < before_at


def _merge(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if a is None or b is None:
        return None
    return tuple(sorted({*a, *b}))


def _current(state: WorkerState) -> bool:
    """Whether the worker's window (if any) is its current process's."""
    if state.blind_since is None:
        return False
    return state.pid_since is None or state.blind_since >= state.pid_since


def fold_window(state: WorkerState, window: BlindWindow) -> WorkerState:
    """The worker's row once ``window`` is known.

    A window of a former process (before ``pid_since``) is replaced; an open
    one (``until`` ``None``) opens the row's window or keeps it open; a
    close (``until`` given) ends an open window; the task names add up
    (``None``, unknown, wins)."""
    current = _current(state)
    if window.since is None:  # a close of the open window, if any
        if not current or state.blind_until is not None or window.until is None:
            return state
        return dataclasses.replace(state, blind_until=window.until)
    if not current:
        # a window is told of the process sending now: an instant before it
        # was first seen is of another clock (the listener's), not of a
        # former process
        since = window.since
        if state.pid_since is not None and since < state.pid_since:
            since = state.pid_since
        until = window.until if window.until is None else max(window.until, since)
        return dataclasses.replace(
            state, blind_since=since, blind_until=until, blind_tasks=window.tasks
        )
    tasks = _merge(state.blind_tasks, window.tasks)
    if window.until is None:
        return dataclasses.replace(state, blind_until=None, blind_tasks=tasks)
    until = window.until
    if state.blind_until is not None:
        until = max(until, state.blind_until)
    since = min(state.blind_since, window.since) if state.blind_since else window.since
    if state.pid_since is not None and since < state.pid_since:
        # an instant of another clock (the listener's): the window stays the
        # current process's, whose it is
        since = state.pid_since
    return dataclasses.replace(state, blind_since=since, blind_until=until, blind_tasks=tasks)


def is_blind(state: WorkerState) -> bool:
    """Whether the worker, alive, holds runs: its current process has a
    window (open, or closed with runs dispatched before it may hold)."""
    return state.online and _current(state)


def blind_workers(workers: Iterable[WorkerState]) -> list[WorkerState]:
    """The live workers sending no task events now (an open window)."""
    return [w for w in workers if is_blind(w) and w.blind_until is None]


#: a run held: every run of the type (``None``), or those dispatched before
Hold = datetime | None


def holds(workers: Iterable[WorkerState], backends: Mapping[str, str]) -> dict[str, Hold]:
    """Per task type (``backends``: type name → Celery task name), the
    runs not to publish again: ``None`` for every unstarted run of the
    type, an instant for those dispatched before it. A type no live
    worker's window covers is absent."""
    found: dict[str, Hold] = {}
    for worker in workers:
        if not is_blind(worker):
            continue
        for type_name, backend in backends.items():
            if worker.blind_tasks is not None and backend not in worker.blind_tasks:
                continue
            if type_name in found and found[type_name] is None:
                continue
            until = worker.blind_until
            if until is None or type_name not in found:
                found[type_name] = until
            else:
                held = found[type_name]
                found[type_name] = until if held is None else max(held, until)
    return found


def holders(
    workers: Sequence[WorkerState], backend: str, dispatched: datetime
) -> list[WorkerState]:
    """The live workers that may hold a run of Celery task ``backend``
    dispatched at ``dispatched`` and never seen to start."""
    return [
        w
        for w in workers
        if is_blind(w)
        and (w.blind_tasks is None or backend in w.blind_tasks)
        and (w.blind_until is None or dispatched < w.blind_until)
    ]
