"""What a visit's status does to its origin's statistics: one pure function
shared by every way statuses arrive (the listener's Celery events, the
Kafka journal client, ``swh scheduler origin record-visit-status``).

The rules, for a status message ``(origin, visit_type, date, status, snapshot)``:

* ``created`` and ``ongoing`` change nothing: the visit has not ended.
* A message dated at or before the origin's ``last_visit`` changes
  nothing: a duplicate or a late message never moves the statistics back
  (a stream applied twice ends in the state it gave once; an older status
  arriving after a newer one is dropped, the newer one said more).
* ``full`` or ``partial`` with a snapshot is a **successful** visit:
  ``last_successful`` moves to its date, and it is **eventful** when the
  snapshot differs from ``last_snapshot`` (or there was none): the origin
  changed. A status from a visit worker may say so itself (``eventful``
  true or false, its loader's own verdict): it is then successful with or
  without a snapshot (none given keeps the last one). An eventful visit
  brings the origin nearer in its queue (the offset drops by 2, to 0 at
  least); an uneventful one pushes it further (the offset grows by 1, up
  to :data:`MAX_OFFSET`).
* ``full`` or ``partial`` without a snapshot (nor a verdict) loaded
  nothing: a failure.
* ``not_found`` and ``failed`` are those outcomes; the offset stays.
* An origin whose last ``N`` visits in a row were ``failed`` (or
  ``not_found``) is disabled (:func:`disables`; ``N`` the setting
  ``[visits] disable_after_failures``, 3 as the reference): no policy
  picks it until a lister lists it again (enabled), as the reference's
  journal client does.
* ``successive_visits`` counts the visits in a row with the same outcome
  (a failure after a failure: 2), and the origin's next queue position is
  the visit type's queue position (the visit's date before the queue ever
  moved) ``+ 2**offset hours`` (16 h at the default offset 4, about 43 days
  at the largest): a virtual time, moved forward as the scheduler takes
  origins from the queue, not the clock; its freshness promise falls due
  at ``date + 2**offset hours`` (``next_visit_due``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ..domain.exceptions import InvalidInput
from .model import (
    DEFAULT_OFFSET,
    LastVisitStatus,
    OriginVisitStats,
    VisitStatus,
    aware,
    origin_url,
    snapshot_id,
    visit_type_name,
)

#: the largest queue-position offset: an origin that never changes is still
#: visited every 2**10 hours (about 43 days)
MAX_OFFSET = 10
#: the statuses of a visit still under way
UNFINISHED = frozenset({VisitStatus.CREATED, VisitStatus.ONGOING})


@dataclass(frozen=True)
class VisitStatusMessage:
    """One visit status, as the archive's journal publishes it."""

    origin: str
    visit_type: str
    date: datetime
    status: VisitStatus
    snapshot: str | None = None
    #: the loader's own verdict, when the status comes from a visit worker
    eventful: bool | None = None

    def __post_init__(self) -> None:
        origin_url("origin", self.origin)
        visit_type_name("visit_type", self.visit_type)
        if self.date is None:  # aware() lets None through: a status needs a date
            raise InvalidInput("date", "a visit status needs its date")
        object.__setattr__(self, "date", aware("date", self.date))
        object.__setattr__(self, "status", _status(self.status))
        object.__setattr__(self, "snapshot", snapshot_id("snapshot", self.snapshot))
        if self.eventful is not None and not isinstance(self.eventful, bool):
            raise InvalidInput("eventful", f"{self.eventful!r} is not true, false or null")


def _status(value: object) -> VisitStatus:
    for status in VisitStatus:
        if value == status.value:
            return status
    choices = ", ".join(s.value for s in VisitStatus)
    raise InvalidInput("status", f"{value!r} is not one of {choices}")


def interval(offset: int) -> timedelta:
    """How far an origin moves in its queue after a visit, at ``offset``."""
    return timedelta(hours=2 ** min(max(offset, 0), MAX_OFFSET))


def outcome(message: VisitStatusMessage) -> LastVisitStatus | None:
    """The outcome a finished visit's status stands for; ``None`` if unfinished."""
    if message.status in UNFINISHED:
        return None
    if message.status is VisitStatus.NOT_FOUND:
        return LastVisitStatus.NOT_FOUND
    loaded = message.snapshot or message.eventful is not None
    if message.status in (VisitStatus.FULL, VisitStatus.PARTIAL) and loaded:
        return LastVisitStatus.SUCCESSFUL
    return LastVisitStatus.FAILED


def finished(message: VisitStatusMessage) -> bool:
    """Whether ``message`` tells a visit's end (anything but ``created`` and
    ``ongoing``): only such a status can change the statistics."""
    return message.status not in UNFINISHED


def apply_status(
    stats: OriginVisitStats | None,
    message: VisitStatusMessage,
    *,
    queue_position: datetime | None = None,
) -> OriginVisitStats | None:
    """The statistics after ``message`` (see the module's rules); ``None``
    when the message changes nothing. ``stats`` is the origin's current
    statistics (``None``: none yet); ``queue_position`` the visit type's
    current queue position (``None``: it never moved; the message's date)."""
    result = outcome(message)
    if result is None:
        return None
    if stats is None:
        stats = OriginVisitStats(url=message.origin, visit_type=message.visit_type)
    elif (stats.url, stats.visit_type) != (message.origin, message.visit_type):
        raise ValueError(f"statistics of {stats.key} given for {message.origin}")
    if stats.last_visit is not None and message.date <= stats.last_visit:
        return None
    offset = stats.next_position_offset
    changes: dict[str, object] = {}
    if result is LastVisitStatus.SUCCESSFUL:
        eventful = message.eventful
        if eventful is None:
            eventful = message.snapshot != stats.last_snapshot
        offset = max(offset - 2, 0) if eventful else min(offset + 1, MAX_OFFSET)
        changes["last_successful"] = message.date  # later than every visit before
        changes["last_snapshot"] = message.snapshot or stats.last_snapshot
    same = stats.last_visit_status is result
    position = (queue_position or message.date) + interval(offset)
    return replace(
        stats,
        last_visit=message.date,
        last_visit_status=result,
        next_position_offset=offset,
        next_visit_queue_position=position,
        next_visit_due=message.date + interval(offset),
        successive_visits=stats.successive_visits + 1 if same else 1,
        **changes,  # type: ignore[arg-type]
    )


def disables(stats: OriginVisitStats, threshold: int) -> bool:
    """Whether ``stats`` (after a visit) disable the origin: its last
    ``threshold`` visits or more in a row were ``failed``, or were
    ``not_found`` (``threshold`` 0: never)."""
    gone = (LastVisitStatus.FAILED, LastVisitStatus.NOT_FOUND)
    return (
        threshold > 0 and stats.last_visit_status in gone and stats.successive_visits >= threshold
    )


def fold(
    stats: OriginVisitStats | None,
    messages: list[VisitStatusMessage],
    *,
    queue_position: datetime | None = None,
) -> OriginVisitStats | None:
    """The statistics after every message of one origin and visit type, in
    date order (the order they arrive in does not matter); ``None`` if none
    changed anything."""
    changed = None
    for message in sorted(messages, key=lambda m: m.date):
        after = apply_status(changed or stats, message, queue_position=queue_position)
        changed = after or changed
    return changed


__all__ = [
    "DEFAULT_OFFSET",
    "MAX_OFFSET",
    "VisitStatusMessage",
    "apply_status",
    "finished",
    "fold",
    "interval",
    "outcome",
]
