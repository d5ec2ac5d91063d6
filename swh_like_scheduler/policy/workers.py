"""Main processes seen under one worker name: a restart, or two live workers.

Celery names a worker ``name@node``; its events (heartbeats every ``freq``
seconds, online, offline) carry the ``pid`` of its main process. A new pid
under a known name is either a **restart** (the old process is gone: its
runs are lost) or a **duplicate** (a second live worker started under the
same name, by mistake or because two installations share a broker): ending
the runs of a live process would let a second copy of each run start while
the first one still runs. Only time tells them apart: after a restart the
old pid never sends again; with a duplicate both keep sending.

:func:`see_worker` folds one event into the name's :class:`WorkerState` and
says what it shows:

* the old process is taken for gone (:attr:`WorkerChangeKind.RESTART`) once
  it has been silent for :func:`restart_silence` while another process sent
  under its name — at once when the new process's first event comes that
  long after the old one's last, else at a later event of the new one;
* a process seen again after another one appeared under its name is a
  second live worker (:attr:`WorkerChangeKind.DUPLICATE`), whatever the
  order its events arrive in; nothing of either is ended;
* an event older than the first one of the current process, from a process
  other than the two remembered, is the late word of a process already
  replaced: it changes nothing.

Pure: the events' own timestamps are the only clock.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from ..domain.records import (
    HEARTBEAT_MISSES,
    WorkerChange,
    WorkerChangeKind,
    WorkerSighting,
    WorkerState,
)

#: Celery's heartbeat period when an event does not say (``worker_heartbeat``'s default)
DEFAULT_FREQ = 2.0
#: A main process silent this long at least, while another sends under its
#: name, is gone (a busy worker's heartbeat may come a few seconds late).
MIN_RESTART_SILENCE = timedelta(seconds=10)


def restart_silence(freq: float | None) -> timedelta:
    """How long a main process must have sent nothing, while another one
    sends under its name, to be taken for gone: :data:`HEARTBEAT_MISSES`
    heartbeats, and at least :data:`MIN_RESTART_SILENCE`."""
    period = freq if freq is not None and freq > 0 else DEFAULT_FREQ
    return max(MIN_RESTART_SILENCE, HEARTBEAT_MISSES * timedelta(seconds=period))


def _change(
    kind: WorkerChangeKind, state: WorkerState, at: datetime, pid: int, other: int
) -> WorkerChange:
    return WorkerChange(kind, state.hostname, at, pid, other)


def _forget_gone_other(
    state: WorkerState, now: datetime, changes: list[WorkerChange]
) -> WorkerState:
    """Drop the other process if it has been silent long enough at ``now``
    (the current one's latest event): a restart."""
    if state.other_pid is None or state.other_seen_at is None or state.pid is None:
        return state
    if now - state.other_seen_at <= restart_silence(state.freq):
        return state
    since = state.pid_since or now
    changes.append(_change(WorkerChangeKind.RESTART, state, since, state.pid, state.other_pid))
    return replace(state, other_pid=None, other_seen_at=None)


def see_worker(
    state: WorkerState | None, sighting: WorkerSighting
) -> tuple[WorkerState, list[WorkerChange]]:
    """The name's state after ``sighting`` and the restarts and duplicates
    it shows (see the module doc). ``state`` ``None``: a name never seen."""
    at, pid = sighting.at, sighting.pid
    if state is None:
        first = WorkerState(
            sighting.hostname,
            at,
            sighting.online,
            sighting.freq,
            pid,
            pid_since=at if pid is not None else None,
        )
        return first, []
    changes: list[WorkerChange] = []
    newer = at >= state.last_heartbeat_at
    after = state
    if newer:  # the name's latest event says whether it is online (as before)
        after = replace(
            state,
            last_heartbeat_at=at,
            online=sighting.online,
            freq=sighting.freq if sighting.freq is not None else state.freq,
        )
    if pid is None:
        return after, changes
    if state.pid is None:  # the first event that names a process
        return replace(after, pid=pid, pid_since=at) if newer else after, changes
    since = state.pid_since
    if pid == state.pid:
        if not newer:
            return after, changes
        return _forget_gone_other(after, at, changes), changes
    if pid == state.other_pid:
        seen = max(state.other_seen_at or at, at)
        after = replace(after, other_seen_at=seen)
        if since is None or at >= since:  # sent after the current one appeared
            changes.append(_change(WorkerChangeKind.DUPLICATE, state, at, state.pid, pid))
        if not newer:
            return after, changes
        # the other is the latest to send: it becomes the current one
        after = replace(
            after,
            pid=pid,
            pid_since=at,
            other_pid=state.pid,
            other_seen_at=state.last_heartbeat_at,
        )
        return _forget_gone_other(after, at, changes), changes
    # a process not seen under this name yet
    if not newer:
        if since is not None and at < since:
            return state, changes  # the late word of a process replaced before
        # it sent while the current one was alive: a second live worker
        changes.append(_change(WorkerChangeKind.DUPLICATE, state, at, state.pid, pid))
        if state.other_seen_at is None or at >= state.other_seen_at:
            after = replace(after, other_pid=pid, other_seen_at=at)
        return after, changes
    if state.other_pid is not None:  # a third process: the older of the two others goes
        _forget_gone_other(state, at, changes)
    after = replace(
        after,
        pid=pid,
        pid_since=at,
        other_pid=state.pid,
        other_seen_at=state.last_heartbeat_at,
    )
    return _forget_gone_other(after, at, changes), changes


def see_workers(
    state: WorkerState | None, sightings: list[WorkerSighting]
) -> tuple[WorkerState | None, list[WorkerChange]]:
    """:func:`see_worker` over the events of one name, in time order."""
    changes: list[WorkerChange] = []
    for sighting in sorted(sightings, key=lambda s: s.at):
        state, found = see_worker(state, sighting)
        changes.extend(found)
    return state, changes


__all__ = ["DEFAULT_FREQ", "MIN_RESTART_SILENCE", "restart_silence", "see_worker", "see_workers"]
