"""The condition of a listed origin, OK, WARNING or ERROR, as tasks have
one: its freshness promise (the ``deadline`` policy's) kept or broken.

An enabled origin is **due** at its last visit plus its interval (``2**offset``
hours, :func:`~.feedback.interval`), at its first sighting if it was never
visited, or as soon as its forge reports a change after its last success
(whichever comes first). Then:

* ``fresh`` (OK) — not due yet;
* ``not_found`` (WARNING) — due, and its last visit found nothing at the url
  (the forge dropped it: nothing a visit can fix);
* late by less than its interval (WARNING), by more (ERROR), with the
  reason: ``never_visited``, ``changed_on_forge`` (a forge date after the
  last success), ``failing`` (its last visit failed), else ``overdue``.

Disabled origins have no condition. The store counts the three levels
per lister and visit type with the same rules in SQL (``update_metrics``);
a test holds the two to agreement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from ..policy.condition import Condition
from .feedback import interval
from .model import DEFAULT_OFFSET, LastVisitStatus, ListedOrigin, OriginVisitStats


class VisitReason(StrEnum):
    FRESH = "fresh"
    NOT_FOUND = "not_found"
    NEVER_VISITED = "never_visited"
    CHANGED_ON_FORGE = "changed_on_forge"
    FAILING = "failing"
    OVERDUE = "overdue"


@dataclass(frozen=True)
class VisitCondition:
    level: Condition
    reason: VisitReason
    due: datetime
    late: timedelta


def due_at(origin: ListedOrigin, stats: OriginVisitStats | None) -> datetime:
    """When the origin's freshness promise falls due (module doc)."""
    promised = stats.next_visit_due if stats is not None else None
    due = promised or origin.first_seen
    if due is None:
        raise ValueError(f"{origin.url}: a listed origin as stored has its first_seen")
    success = stats.last_successful if stats is not None else None
    changed = origin.last_update
    if changed is not None and success is not None and success < changed < due:
        return changed
    return due


def visit_condition(
    origin: ListedOrigin, stats: OriginVisitStats | None, now: datetime
) -> VisitCondition | None:
    """The condition of ``origin`` at ``now`` (``None``: disabled)."""
    if not origin.enabled:
        return None
    due = due_at(origin, stats)
    late = now - due
    if late < timedelta(0):
        return VisitCondition(Condition.OK, VisitReason.FRESH, due, late)
    status = stats.last_visit_status if stats is not None else None
    if status is LastVisitStatus.NOT_FOUND:
        return VisitCondition(Condition.WARNING, VisitReason.NOT_FOUND, due, late)
    if stats is None or stats.last_visit is None:
        reason = VisitReason.NEVER_VISITED
    elif (
        origin.last_update is not None
        and stats.last_successful is not None
        and origin.last_update > stats.last_successful
    ):
        reason = VisitReason.CHANGED_ON_FORGE
    elif status is LastVisitStatus.FAILED:
        reason = VisitReason.FAILING
    else:
        reason = VisitReason.OVERDUE
    offset = stats.next_position_offset if stats is not None else DEFAULT_OFFSET
    level = Condition.WARNING if late < interval(offset) else Condition.ERROR
    return VisitCondition(level, reason, due, late)
