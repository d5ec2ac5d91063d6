"""When a one-shot task with a ``max_delay`` may expire instead of running late.

Only after the platform had a real chance to serve it: a runner pass of its
type and priority class that had room to spare (it took every task it could
see and was free to take) *began* after the task could be claimed and
still did not take it. A pass that began earlier may never have seen the
task (created, enabled or respawned after the pass read the ready tasks),
and a pass that skipped rows another transaction held records no room at
all (:func:`swh_like_scheduler.dispatch.room.record_room`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..domain.model import Task
from .times import to_utc


def claimable_from(task: Task, should_start_by: datetime, grace: timedelta) -> datetime:
    """The instant from which a pass with room that did not take ``task``
    counts against it: the latest of its last write (``created_at``,
    ``updated_at``: created, enabled again, respawned or edited), the
    instant it became ready (``next_run``, its can_start_by) and its
    ``should_start_by`` plus ``grace``."""
    instants = [to_utc(should_start_by) + grace, to_utc(task.next_run)]
    instants += [to_utc(t) for t in (task.created_at, task.updated_at) if t is not None]
    return max(instants)


def may_expire(
    task: Task,
    should_start_by: datetime,
    grace: timedelta,
    room_began: datetime | None,
    now: datetime,
) -> bool:
    """Whether a waiting, never-dispatched one-shot ``task`` (``max_delay``
    set) may expire at ``now``: its ``should_start_by`` plus ``grace`` is
    past, and the latest pass with room of its type and class, which began
    at ``room_began`` (``None``: none recorded), began after the task could
    be claimed (:func:`claimable_from`)."""
    if room_began is None or not to_utc(should_start_by) + grace < to_utc(now):
        return False
    return claimable_from(task, should_start_by, grace) < to_utc(room_began)
