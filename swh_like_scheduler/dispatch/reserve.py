"""Worker slots kept from long runs, so that no long task starves short ones.

A worker slot that starts a long run cannot serve anything else until it
ends. When a wave of long tasks falls due together (thirty nightly dumps of
two hours at 02:00, say), every free slot takes one, in any dispatch order:
the deadline order, FIFO and triage all dispatch a ready task to a free
slot when no shorter one is ready at that instant, and the short tasks that
fall due a minute later find no slot for hours. No order can undo that: a
Celery worker does not preempt the run it has started.

So a runner that knows how many slots a queue's workers have (``slots``: the
live workers' pool sizes, :meth:`~.routing.LiveWorkers.slots`) keeps some of
them from long runs (:data:`~swh_like_scheduler.domain.enums.LONG_RUN` or more,
from the task's average good run, else its ``expected_duration``, else its
``max_expected_duration`` or its type's; or a last run that failed after
that long: :mod:`~..store.sql_long`):

- ``reserved = max(1, ceil(slots x RESERVED_SHARE))``, and none for a queue
  with a single slot (a lone slot cannot be shared: long tasks get it);
- a pass dispatches at most ``slots - reserved - in_flight`` more long runs,
  where ``in_flight`` counts the long runs open (dispatched or running) of
  every type routed to the queue;
- only while a task that is not a long run, of any type routed to the
  queue, is ready or falls ready within ``LONG_RUN``: a queue with only
  long tasks (or none due soon) uses every slot for them.

The slots are the queue's, not a type's: a worker consuming a queue takes
its messages whatever their type (two-hour dumps and pings of a
tenth of a second on one queue of 8 slots, counted per type, kept nothing
and the pings went stale for about 1,600 ERROR-hours).

Long tasks therefore always have ``slots - reserved`` slots: they are
delayed, never starved. When the slots are unknown (no live worker answered,
or a runner without the broadcast) nothing is kept, as before.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ..domain.enums import LONG_RUN, RESERVED_SHARE
from ..domain.exceptions import SchedulerError
from ..domain.model import TaskType
from ..plumbing.quietlog import QuietLog
from ..store import SchedulerStore
from ..store.values import LongRuns
from . import metrics

logger = logging.getLogger(__name__)
_quiet = QuietLog(logger, logging.WARNING)

#: how soon a runner that held long tasks back passes again (a slot may
#: have freed meanwhile: the long run that ended wakes no one)
RECHECK = timedelta(seconds=10)

#: the worker slots of a queue, or None when unknown
Slots = Callable[[str], int | None]


def reserved_slots(slots: int, share: float = RESERVED_SHARE) -> int:
    """The slots of ``slots`` that long runs may not take."""
    if slots < 2:
        return 0
    return min(slots - 1, max(1, math.ceil(slots * share)))


def long_room(
    slots: int | None, in_flight: int, short_due: bool, share: float = RESERVED_SHARE
) -> int | None:
    """How many more long runs a pass may dispatch: ``None`` for no limit
    (slots unknown, a single slot, or no shorter task due soon)."""
    if slots is None or not short_due:
        return None
    reserved = reserved_slots(slots, share)
    if reserved == 0:
        return None
    return max(0, slots - reserved - in_flight)


def room_for_long(
    store: SchedulerStore,
    task_type: TaskType,
    slots: Slots | None,
    now: datetime,
    sharing: Sequence[str] = (),
) -> int | None:
    """:func:`long_room` for ``task_type`` at ``now``: one read of the long
    runs in flight per type on its queue (``task_type`` and the types named
    in ``sharing``, the others routed to the same queue), when the queue's
    slots are known. A failed read keeps nothing back (the pass dispatches
    as it would without slots)."""
    known = slots(task_type.effective_queue) if slots is not None else None
    if known is None:
        return None
    metrics.WORKER_SLOTS.labels(task_type=task_type.type).set(known)
    if reserved_slots(known) == 0:
        return None
    names = [task_type.type, *(name for name in sharing if name != task_type.type)]
    try:
        runs = _queue_long_runs(store, names, now)
    except SchedulerError as error:
        _quiet.log(
            "cannot count the long runs of %s; no slot kept this pass: %s",
            task_type.type,
            error,
            key=task_type.type,
        )
        return None
    _quiet.ok(task_type.type)
    room = long_room(known, runs.in_flight, runs.short_due)
    if room is not None:
        logger.debug(
            "type=%s (queue %s): %d slot(s), %d long run(s) in flight, room for %d more",
            task_type.type,
            task_type.effective_queue,
            known,
            runs.in_flight,
            room,
        )
    return room


def _queue_long_runs(store: SchedulerStore, names: Sequence[str], now: datetime) -> LongRuns:
    """The long runs in flight and the shorter tasks due soon of the types
    ``names`` (those of one queue), summed."""
    in_flight, short_due = 0, False
    for name in names:
        runs = store.long_runs(name, now=now, within=LONG_RUN)
        in_flight += runs.in_flight
        short_due = short_due or runs.short_due
    return LongRuns(in_flight=in_flight, short_due=short_due)
