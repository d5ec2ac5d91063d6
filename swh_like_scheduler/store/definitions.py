"""When a task asked for again is the task a store holds: the rules of
idempotent creation that every store applies (:meth:`~.role_tasks.TaskStore.create_tasks`)."""

from __future__ import annotations

from ..domain.model import ScheduleKind, Task
from ..policy import with_default_cooldown


def same_definition(known: Task, item: Task) -> bool:
    """Whether ``item`` asks for the task ``known`` already is. A periodic
    task asked for without a cooldown matches one stored with the default
    cooldown (created the same way, whatever value its run time has given
    it since), and one stored without any (created before there was a
    default: it keeps what it has)."""
    if known.definition() == item.definition():
        return True
    if item.schedule_kind is not ScheduleKind.PERIODIC or item.cooldown is not None:
        return False
    if known.cooldown_is_default:
        return known.definition() == {**item.definition(), "cooldown": known.cooldown}
    return known.definition() == with_default_cooldown(item).definition()


def moved_instant(known: Task, item: Task) -> bool:
    """A one-shot task asked for again with its key at another instant,
    while the stored one has not run yet (once it has run or been retried,
    its ``next_run`` no longer tells the instant it was created for). A task
    asked for "now" (``next_run`` is its creation time: no instant given)
    matches whatever instant the stored one has, so repeating a command or
    an import stays idempotent."""
    return (
        item.next_run != item.created_at
        and item.schedule_kind is ScheduleKind.ONESHOT
        and known.schedule_kind is ScheduleKind.ONESHOT
        and known.last_start_at is None
        and known.failure_count == 0
        and known.next_run != item.next_run
    )
