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
them from long runs. What is long is decided each pass by what the shorter
tasks stand to lose, not by a fixed length:

- the **slack** is how long the task waiting on the queue with the
  earliest deadline (``should_start_by``), due now or later, that a kept
  slot can still help may yet wait for a slot: the time left to its
  deadline (:meth:`~..store.SchedulerStore.short_slack`). A kept slot
  helps a task whose expected run (its average good run, else its
  ``expected_duration``, else its or its type's ``max_expected_duration``)
  is shorter than its slack, or than the floor below once it is overdue;
- a run is **long** this pass when it is expected to last the slack or more
  (never less than :data:`~..domain.enums.LONG_RUN_FLOOR`), or its last run
  failed after lasting that long: it would hold its slot past what that
  task can wait. Without such a task, long is
  :data:`~..domain.enums.LONG_RUN`;
- while a shorter task waits on the queue, or runs, ``reserved = max(1,
  ceil(slots x RESERVED_SHARE))`` slots are kept (none for a queue with a
  single slot: long tasks get it): a pass dispatches at most ``slots -
  reserved - in_flight`` more long runs, ``in_flight`` counting the long
  runs open (dispatched or running) of every type routed to the queue.

A wave of 27-minute jobs beside hourly pings whose deadlines are minutes
away is a wave of long runs; the same jobs beside daily reports with hours
of slack are not, and take every slot. Beside an overdue ping, runs of 5
minutes or more are long (the floor): with a floor of a minute, pages of a
minute counted as long, shared the long runs' slots with a wave of dumps
and waited behind it (the ping's own window would not do as the floor: a
dump's window of hours made the dumps short again).

Long runs are never queued in the broker beyond the slots they may take:
a pass between two runs of a sparse short task (when it is in flight, or
its next deadline is an hour away) still counts it, so it cannot hand the
kept slots to a wave for hours.

The slots are the queue's, not a type's: a worker consuming a queue takes
its messages whatever their type (two-hour dumps and pings of a
tenth of a second on one queue of 8 slots, counted per type, kept nothing
and the pings went stale for about 1,600 ERROR-hours). A paused type's
tasks are not counted: none of them will be dispatched.

Long tasks therefore always have ``slots - reserved`` slots: they are
delayed, never starved. When the slots are unknown (no live worker answered,
or a runner without the broadcast) nothing is kept, as before.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..domain.enums import LONG_RUN, LONG_RUN_FLOOR, RESERVED_SHARE
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


@dataclass(frozen=True)
class Room:
    """What a pass may dispatch of a queue's long runs."""

    #: how many more long runs (``None``: no limit)
    long_room: int | None
    #: what is long this pass: a run expected to last this long or more
    long_run: timedelta = LONG_RUN


#: no limit: slots unknown or not shared, or nothing shorter to keep them for
NO_LIMIT = Room(None)


def room_for_long(
    store: SchedulerStore,
    task_type: TaskType,
    slots: Slots | None,
    now: datetime,
    sharing: Sequence[TaskType] = (),
) -> Room:
    """:func:`long_room` for ``task_type`` at ``now``, and what is long:
    two reads per type on its queue (``task_type`` and the types named in
    ``sharing``, the others routed to the same queue and not paused), when
    the queue's slots are known. A failed read keeps nothing back (the
    pass dispatches as it would without slots)."""
    known = slots(task_type.effective_queue) if slots is not None else None
    if known is None:
        return NO_LIMIT
    metrics.WORKER_SLOTS.labels(task_type=task_type.type).set(known)
    if reserved_slots(known) == 0:
        return NO_LIMIT
    others = [t for t in sharing if t.type != task_type.type]
    names = [task_type.type, *(t.type for t in others)]
    # (a paused type's waiting tasks will not be dispatched: no slot is
    # kept for them; its runs in flight still hold their slots)
    waiting = [task_type.type, *(t.type for t in others if t.paused_at is None)]
    try:
        long_run, runs = _queue_long_runs(store, names, waiting, now)
    except SchedulerError as error:
        _quiet.log(
            "cannot count the long runs of %s; no slot kept this pass: %s",
            task_type.type,
            error,
            key=task_type.type,
        )
        return NO_LIMIT
    _quiet.ok(task_type.type)
    room = long_room(known, runs.in_flight, runs.short_due or runs.short_in_flight)
    if room is not None:
        logger.debug(
            "type=%s (queue %s): %d slot(s), %d run(s) of %s or more in flight, room for %d more",
            task_type.type,
            task_type.effective_queue,
            known,
            runs.in_flight,
            long_run,
            room,
        )
    return Room(room, long_run)


def long_run_at(slack: timedelta | None) -> timedelta:
    """What is long when the shorter tasks waiting may yet wait ``slack``
    for a slot (``None``: none is waiting that a kept slot can help)."""
    if slack is None:
        return LONG_RUN
    return max(slack, LONG_RUN_FLOOR)


def _queue_long_runs(
    store: SchedulerStore, names: Sequence[str], waiting: Sequence[str], now: datetime
) -> tuple[timedelta, LongRuns]:
    """What is long at ``now`` on the queue of the types ``names``, their
    long runs in flight, summed, and whether a shorter task of the types
    ``waiting`` (those not paused) is due soon or in flight."""
    slacks = [store.short_slack(name, now=now, floor=LONG_RUN_FLOOR) for name in waiting]
    least = min((s for s in slacks if s is not None), default=None)
    long_run = long_run_at(least)
    in_flight, short_due, short_in_flight = 0, least is not None, False
    for name in names:
        runs = store.long_runs(name, now=now, within=long_run, long_run=long_run)
        in_flight += runs.in_flight
        short_due = short_due or (runs.short_due and name in waiting)
        short_in_flight = short_in_flight or (runs.short_in_flight and name in waiting)
    return long_run, LongRuns(in_flight, short_due, short_in_flight)
