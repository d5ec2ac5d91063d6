"""Room: a runner pass that could take every task it was free to take.

The monitor expires a one-shot task with a ``max_delay`` only once a pass
of its type and priority class had room to spare and still did not take it
(:meth:`~swh_like_scheduler.store.SchedulerStore.expire_oneshot_tasks`),
so what a pass records as room must be true of every task it could have
claimed:

- the pass records the instant it **began** (its ``now``, before any claim
  read the ready tasks), not when it finished: a task created, enabled or
  respawned while the pass ran may never have been seen by its claims, and
  the monitor counts a pass only for tasks it began after;
- a claim skips rows another transaction holds (PostgreSQL's ``FOR UPDATE
  SKIP LOCKED``: a claim cancelled by its time limit, a runner that died
  before its commit), so "claimed fewer than it had room for" does not say
  that nothing was left. Only then (the hot path, a full pass, asks
  nothing more) the runner asks the store, in one read, which classes
  still hold a task that was ready when the pass began, was last written
  before it, and is runnable on the live nodes
  (:meth:`~swh_like_scheduler.store.SchedulerStore.ready_left_behind`);
  those classes get no room this pass. SQLite has one writer: nothing is
  ever skipped there, so a pass whose claims took every task they could
  (``may_leave`` false: no class kept from long runs, :mod:`.reserve`) records
  its room without that read.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from ..domain.exceptions import SchedulerError
from ..domain.model import PRIORITY_ORDER, Priority, TaskType
from ..plumbing.quietlog import QuietLog
from ..store import SchedulerStore

logger = logging.getLogger(__name__)
#: a failure to record repeats pass after pass during an outage
_quiet = QuietLog(logger, logging.ERROR)


def record_room(
    store: SchedulerStore,
    task_type: TaskType,
    *,
    began: datetime,
    priorities: Sequence[Priority] | None,
    nodes: Sequence[str] | None,
    may_leave: bool = True,
) -> list[Priority]:
    """Record the room of a pass of ``task_type`` that began at ``began``,
    served the ``priorities`` classes (none: all) and routed to
    ``nodes`` (the live workers' nodes of its queue; ``None``: unknown),
    and whose claims took fewer tasks than it had room for: for each class
    in which no task it could have claimed is left waiting. The classes
    recorded (none when the store could not be asked: the next pass says
    it again). ``may_leave`` false: the claims could have left no such task
    (no row was skipped as locked, none kept from long runs), so the store
    is not asked."""
    # (as the claims read them: none given, or an empty list, is every class)
    served = [p for p in PRIORITY_ORDER if not priorities or p in priorities]
    try:
        left = (
            store.ready_left_behind(task_type.type, at=began, priorities=served, nodes=nodes)
            if may_leave
            else []
        )
        roomy = [p for p in served if p not in left]
        if left:
            logger.debug(
                "type=%s: ready %s tasks were left behind (held by another transaction, "
                "or the pass stopped short): no room recorded for them",
                task_type.type,
                "/".join(p.value for p in left),
            )
        if roomy:  # (no classes given would mean every class)
            store.record_room(task_type.type, at=began, priorities=roomy)
    except SchedulerError as error:
        _quiet.log("could not record the room of %s: %s", task_type.type, error, key="room")
        return []
    _quiet.ok("room")
    return roomy
