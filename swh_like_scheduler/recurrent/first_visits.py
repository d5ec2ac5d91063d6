"""First visits of a listing, in queues of their own (``swh scheduler origin
schedule-first-visits``, and a step of ``schedule-recurrent``): the
reference's ``start-runner-first-visits``.

A lister registered with a ``first_visits_queue_prefix`` (a new forge, whose
origins should be visited soon rather than wait their turn among all the
others) has the origins of its listing sent to queues of their own. One
step (:func:`schedule_first_visits`), for each lister that
``get_listers(with_first_visits_to_schedule=True)`` gives (a prefix, a
finished listing, first visits not marked scheduled yet):

* for each visit type of its origins, the room in the queue
  ``<prefix>:<backend name of task type load-<visit type>>`` (its
  ``max_queue_length`` less what waits there, at most ``STEP_LIMIT``;
  ``UNBOUNDED_ROOM`` for a type without a limit: as for the type's own queue)
  is filled with the lister's origins that policy
  ``first_visits_after_listing`` picks (enabled, never scheduled or not since
  the listing finished, out of every cooldown), one message each; grab and
  send share one transaction committed after the broker took the messages,
  as in :mod:`.scheduler`: a broker that refuses leaves nothing marked;
* then, once every enabled origin of the lister was scheduled at or after
  its ``last_listing_finished_at``, the store sets its
  ``first_visits_scheduled_at`` (:meth:`mark_first_visits_scheduled`, one
  transaction) and no later step considers it.

A listing finished after the step's clock (``now``) is left for a later
step: an origin marked scheduled before the listing's end would be picked
again, and sent twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ..broker.port import QueuePort
from ..domain.exceptions import SchedulerError
from ..domain.model import TaskType
from ..visits.model import Lister, visit_task_type
from ..visits.policy import VisitPolicy, VisitSettings
from .scheduler import STEP_LIMIT, room_of, visit_message

if TYPE_CHECKING:  # the store is a room above: a type only
    from ..store import SchedulerStore

logger = logging.getLogger(__name__)


def first_visits_queue(prefix: str, task_type: TaskType) -> str:
    """The queue of a lister's first visits of ``task_type``'s visit type:
    the reference's ``<prefix>:<backend name>``."""
    return f"{prefix}:{task_type.backend_name}"


@dataclass(frozen=True)
class FirstVisitsPass:
    """What one step did for one lister: per queue, the visits sent;
    whether its first visits are now all scheduled (``marked``)."""

    lister_id: str
    lister: str
    sent: dict[str, int] = field(default_factory=dict)
    marked: bool = False
    skipped: str | None = None
    #: per queue, the room the step had
    rooms: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.sent.values())

    @property
    def full(self) -> bool:
        """Some queue took all a step may send (as :class:`VisitTypePass`:
        the most one step sends): more room may be left for the next."""
        return any(n == STEP_LIMIT == self.rooms.get(q) for q, n in self.sent.items())

    @property
    def failed(self) -> bool:
        """The step failed for this lister (its database work or its broker)."""
        return self.skipped is not None and self.skipped.startswith("failed")

    def to_dict(self) -> dict[str, object]:
        return {**vars(self), "total": self.total, "full": self.full}


def _name(lister: Lister) -> str:
    return f"{lister.name}/{lister.instance_name}" if lister.instance_name else lister.name


def _task_types(store: SchedulerStore, lister: Lister) -> tuple[dict[str, TaskType], str | None]:
    """The task type of each visit type the lister's origins have, or why
    the lister cannot be served (a visit type without its task type)."""
    assert lister.id is not None
    found: dict[str, TaskType] = {}
    for visit_type in store.get_visit_types_for_listed_origins(lister.id):
        task_type = store.get_task_type(visit_task_type(visit_type))
        if task_type is None:
            return found, f"no task type {visit_task_type(visit_type)!r} is registered"
        found[visit_type] = task_type
    return found, None


def schedule_lister(
    store: SchedulerStore,
    broker: QueuePort,
    lister: Lister,
    settings: VisitSettings,
    now: datetime,
) -> FirstVisitsPass:
    """One step for ``lister`` (see the module); a broker or database
    failure propagates, after what was sent before it was committed."""
    assert lister.id is not None and lister.first_visits_queue_prefix is not None
    name = _name(lister)
    finished = lister.last_listing_finished_at
    if finished is not None and finished > now:
        reason = f"its listing finished at {finished.isoformat()}, after this step's clock"
        return FirstVisitsPass(lister.id, name, skipped=reason)
    task_types, problem = _task_types(store, lister)
    if problem is not None:
        return FirstVisitsPass(lister.id, name, skipped=problem)
    sent: dict[str, int] = {}
    rooms: dict[str, int] = {}
    for visit_type, task_type in task_types.items():
        queue = first_visits_queue(lister.first_visits_queue_prefix, task_type)
        sent[queue] = rooms[queue] = 0
        if task_type.paused_at is not None:
            continue
        room = rooms[queue] = room_of(task_type, broker.depths([queue]).get(queue, 0))
        if room <= 0:
            continue
        with store.transaction() as tx:
            origins = tx.grab_next_visits(
                visit_type,
                room,
                VisitPolicy.FIRST_VISITS_AFTER_LISTING,
                now=now,
                lister_id=lister.id,
                cooldowns=settings.cooldowns,
            )
            if origins:
                messages = [visit_message(task_type, o, queue=queue) for o in origins]
                sent[queue] = broker.publish(messages)
    marked = store.mark_first_visits_scheduled(lister.id, now=now) is not None
    if marked:
        logger.info("first visits of lister %s (%s): all scheduled", name, lister.id)
    return FirstVisitsPass(lister.id, name, sent, marked, rooms=rooms)


def schedule_first_visits(
    store: SchedulerStore,
    broker: QueuePort,
    settings: VisitSettings,
    now: datetime,
) -> list[FirstVisitsPass]:
    """One step for each lister awaiting its first visits; a lister whose
    step fails (its broker queue, its database work) is reported and the
    others go on."""
    done = []
    for lister in store.get_listers(with_first_visits_to_schedule=True):
        try:
            done.append(schedule_lister(store, broker, lister, settings, now))
        except SchedulerError as error:
            logger.warning("first visits of lister %s: %s", _name(lister), error)
            assert lister.id is not None
            done.append(FirstVisitsPass(lister.id, _name(lister), skipped=f"failed: {error}"))
    return done
