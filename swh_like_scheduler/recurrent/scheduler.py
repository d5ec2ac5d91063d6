"""``schedule-recurrent``: keep the Celery queue of each visit type filled
with visits chosen by the type's mix of policies (:mod:`.policy`).

One step (:func:`schedule_step`) per visit type: read how many messages
wait in the queue of task type ``load-<visit type>``, and if the queue has
room (``max_queue_length`` less what waits, at most :data:`STEP_LIMIT`;
:data:`UNBOUNDED_ROOM` per step for a type without a limit), split that room between the policies by
weight, grab that many origins from each (a policy that finds fewer leaves
its share to the others), send one message per origin (the task's keyword
arguments: ``url`` and the origin's ``extra_loader_arguments``), and mark
them scheduled.

The grab and the send share one transaction, committed after the broker
took the messages: a visit marked scheduled was sent. If the broker
refuses or the process dies before the commit, nothing is marked, and the
next step chooses those origins again: a message that did reach the
broker before the failure is then sent twice (a second, uneventful visit);
none is ever lost for the cooldown. No run row is written per visit.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ..broker.message import Message, time_limits
from ..broker.port import QueuePort
from ..domain.exceptions import SchedulerError
from ..domain.model import TaskType
from ..visits.model import SCHEDULER_KEYS, ListedOrigin, visit_task_type
from ..visits.policy import VisitPolicy, VisitSettings, shares

if TYPE_CHECKING:  # the store is a room above: a type only
    from ..store import SchedulerStore

logger = logging.getLogger(__name__)

#: visits sent per step to a visit type whose task type has no queue limit
UNBOUNDED_ROOM = 1000
#: most visits one step sends to one visit type (a larger room is filled by
#: the steps that follow at once: the daemon does not wait after a full step)
STEP_LIMIT = 10_000


@dataclass(frozen=True)
class VisitTypePass:
    """What one step did for one visit type."""

    visit_type: str
    queue: str = ""
    waiting: int = 0
    room: int = 0
    grabbed: dict[str, int] = field(default_factory=dict)
    sent: int = 0
    skipped: str | None = None

    @property
    def full(self) -> bool:
        """The step sent all it may: more room may be left for the next."""
        return self.room == STEP_LIMIT and self.sent == STEP_LIMIT

    @property
    def failed(self) -> bool:
        """The step failed for this type (its database work or its broker)."""
        return self.skipped is not None and self.skipped.startswith("failed")

    def to_dict(self) -> dict[str, object]:
        return dict(vars(self))


def visit_message(task_type: TaskType, origin: ListedOrigin, *, queue: str = "") -> Message:
    """The Celery message of one visit, to ``queue`` (none: the task type's
    queue): the loader gets ``url`` and the
    origin's extra arguments; its id is new (there is no run row). The url
    the loader visits is the url the origin shows: an extra argument of
    the scheduler's own keys (refused when recorded since issue 60, but
    perhaps stored before) is dropped, never merged over it."""
    extra = origin.extra_loader_arguments
    return Message(
        task_id=str(uuid.uuid4()),
        task_name=task_type.backend_name,
        queue=queue or task_type.effective_queue,
        kwargs={"url": origin.url, **{k: v for k, v in extra.items() if k not in SCHEDULER_KEYS}},
        time_limits=time_limits(task_type),
    )


def room_of(task_type: TaskType, waiting: int) -> int:
    if task_type.max_queue_length is None:
        return UNBOUNDED_ROOM
    return min(STEP_LIMIT, max(0, task_type.max_queue_length - waiting))


def _grab(
    store: SchedulerStore,
    visit_type: str,
    room: int,
    settings: VisitSettings,
    now: datetime,
) -> tuple[list[ListedOrigin], dict[str, int]]:
    """Up to ``room`` origins from the mix, a policy's unused share going
    to the others (in rounds, while some policy still fills its share)."""
    mix = dict(settings.mix(visit_type))
    taken: list[ListedOrigin] = []
    counts: dict[str, int] = {}
    seen: set[str] = set()
    while room > len(taken) and mix:
        wanted = shares(room - len(taken), mix)
        exhausted: list[VisitPolicy] = []
        for policy, count in wanted.items():
            if count <= 0:
                continue
            found = store.grab_next_visits(
                visit_type, count, policy, now=now, cooldowns=settings.cooldowns
            )
            fresh = [o for o in found if o.url not in seen]
            seen.update(o.url for o in fresh)
            taken.extend(fresh)
            counts[policy.value] = counts.get(policy.value, 0) + len(fresh)
            if len(found) < count:
                exhausted.append(policy)
        if not exhausted:
            break
        for policy in exhausted:
            mix.pop(policy)
    return taken, counts


def schedule_type(
    store: SchedulerStore,
    broker: QueuePort,
    visit_type: str,
    settings: VisitSettings,
    now: datetime,
) -> VisitTypePass:
    """One step for ``visit_type`` (see the module)."""
    task_type = store.get_task_type(visit_task_type(visit_type))
    if task_type is None:
        reason = f"no task type {visit_task_type(visit_type)!r} is registered"
        return VisitTypePass(visit_type, skipped=reason)
    if task_type.paused_at is not None:
        return VisitTypePass(visit_type, task_type.effective_queue, skipped="paused")
    queue = task_type.effective_queue
    waiting = broker.depths([queue]).get(queue, 0)
    room = room_of(task_type, waiting)
    if room <= 0:
        return VisitTypePass(visit_type, queue, waiting, 0)
    with store.transaction() as tx:
        origins, counts = _grab(tx, visit_type, room, settings, now)
        sent = broker.publish([visit_message(task_type, o) for o in origins]) if origins else 0
    return VisitTypePass(visit_type, queue, waiting, room, counts, sent)


def schedule_step(
    store: SchedulerStore,
    broker: QueuePort,
    visit_types: Sequence[str],
    settings: VisitSettings,
    now: datetime,
) -> list[VisitTypePass]:
    """One step for each visit type; a type whose step fails (its broker
    queue, its database work) is reported and the others go on."""
    done = []
    for visit_type in visit_types:
        try:
            done.append(schedule_type(store, broker, visit_type, settings, now))
        except SchedulerError as error:
            logger.warning("visits of %s: %s", visit_type, error)
            done.append(VisitTypePass(visit_type, skipped=f"failed: {error}"))
    return done


def visit_types_of(store: SchedulerStore) -> list[str]:
    """The visit types with a task type (``load-<visit type>``) registered."""
    prefix = visit_task_type("")
    return sorted(
        t.type.removeprefix(prefix) for t in store.get_task_types() if t.type.startswith(prefix)
    )
