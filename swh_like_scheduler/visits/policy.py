"""Which origins to visit next: the policies, their cooldowns, and how a
visit type's share of visits is split between the policies of its mix.

Every policy picks among the **enabled** listed origins of one visit type
that are out of every cooldown (:class:`Cooldowns`), and orders them its own
way (the store's claim statement does the ordering, :mod:`..store.sql_grab`):

``oldest_scheduled_first``
    never scheduled first, then by the last time a visit was sent.
``never_visited_oldest_update_first``
    origins with no successful visit yet and a forge date, oldest date first.
``already_visited_order_by_lag``
    origins visited successfully whose forge date is after that success
    (pending changes), the largest lag first.
``origins_without_last_update``
    origins whose forge gives no date, in the visit type's virtual queue:
    by their queue position (:mod:`.feedback` pushes an origin further each
    time a visit finds nothing new); taking them moves the queue forward.
``stop_after_success``
    origins never visited successfully (one good visit is all they need:
    a tarball, a release), never scheduled first.
``first_visits_after_listing``
    origins of one lister not scheduled since that lister's last listing
    ended (the first visits of what a listing found), oldest forge date
    first as that lister gives it (undated last), then by its first sighting
    by that lister: the order of its index on ``listed_origin``.
``deadline``
    ours: each origin has a freshness promise, its interval (2**offset hours,
    shortened as visits find changes, lengthened as they do not); it is due
    at its last visit plus that interval, at its first sighting if never
    visited, or as soon as its forge reports a change after the last
    success. Only due origins, the most overdue first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from ..domain import validation
from ..domain.exceptions import InvalidInput
from .model import (
    DISABLE_AFTER_FAILURES,
    ORIGIN_SCHEMES,
    LastVisitStatus,
    OriginVisitStats,
    origin_schemes,
)


class VisitPolicy(StrEnum):
    OLDEST_SCHEDULED_FIRST = "oldest_scheduled_first"
    NEVER_VISITED_OLDEST_UPDATE_FIRST = "never_visited_oldest_update_first"
    ALREADY_VISITED_ORDER_BY_LAG = "already_visited_order_by_lag"
    ORIGINS_WITHOUT_LAST_UPDATE = "origins_without_last_update"
    STOP_AFTER_SUCCESS = "stop_after_success"
    FIRST_VISITS_AFTER_LISTING = "first_visits_after_listing"
    DEADLINE = "deadline"


def visit_policy(where: str, value: object) -> VisitPolicy:
    for policy in VisitPolicy:
        if value == policy.value:
            return policy
    choices = ", ".join(p.value for p in VisitPolicy)
    raise InvalidInput(where, f"{value!r} is not a policy (one of {choices})")


@dataclass(frozen=True)
class Cooldowns:
    """How long an origin is left alone: after a visit was sent
    (``scheduled``), after it was sent and no status came back
    (``no_result``: the visit may still be queued or running), after a
    failed visit (``failed``) and after one that found nothing at the url
    (``not_found``)."""

    scheduled: timedelta = timedelta(hours=12)
    no_result: timedelta = timedelta(days=7)
    failed: timedelta = timedelta(days=14)
    not_found: timedelta = timedelta(days=31)

    def __post_init__(self) -> None:
        for name in ("scheduled", "no_result", "failed", "not_found"):
            object.__setattr__(
                self, name, validation.parse_duration(f"cooldown_{name}", getattr(self, name))
            )


class Hold(StrEnum):
    """A long cooldown an origin is in (:func:`hold_of`)."""

    SENT = "sent"  # a visit was sent and no status came since
    FAILED = "failed"
    NOT_FOUND = "not_found"

    def length(self, cooldowns: Cooldowns) -> timedelta:
        return {
            Hold.SENT: cooldowns.no_result,
            Hold.FAILED: cooldowns.failed,
            Hold.NOT_FOUND: cooldowns.not_found,
        }[self]


def hold_of(stats: OriginVisitStats) -> tuple[Hold, datetime] | None:
    """Which long cooldown the origin is in and since when, whatever its
    length (the claim's cooldowns say when it ends): a visit sent with no
    status since (since the send), else a last visit that failed or found
    nothing (since that visit). The store keeps held origins out of the
    policies' indexes until their cooldown has passed, so that a claim never
    walks past them (the short cooldown after any send is not a hold: a
    visit's status moves the origin in every policy's order)."""
    sent = stats.last_scheduled
    if sent is not None and (stats.last_visit is None or sent > stats.last_visit):
        return Hold.SENT, sent
    if stats.last_visit is not None and stats.last_visit_status is LastVisitStatus.FAILED:
        return Hold.FAILED, stats.last_visit
    if stats.last_visit is not None and stats.last_visit_status is LastVisitStatus.NOT_FOUND:
        return Hold.NOT_FOUND, stats.last_visit
    return None


#: a visit type with no mix of its own in the configuration
DEFAULT_MIX: Mapping[VisitPolicy, int] = {
    VisitPolicy.ALREADY_VISITED_ORDER_BY_LAG: 40,
    VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST: 30,
    VisitPolicy.ORIGINS_WITHOUT_LAST_UPDATE: 20,
    VisitPolicy.OLDEST_SCHEDULED_FIRST: 10,
}


@dataclass(frozen=True)
class VisitSettings:
    """The ``[visits]`` table of the configuration file: cooldowns, a
    weighted mix of policies per visit type (``default`` for the others),
    the url schemes a listed origin may have (``origin_schemes``) and the
    failures in a row that disable an origin (``disable_after_failures``)."""

    cooldowns: Cooldowns = field(default_factory=Cooldowns)
    mixes: Mapping[str, Mapping[VisitPolicy, int]] = field(default_factory=dict)
    origin_schemes: frozenset[str] = ORIGIN_SCHEMES
    #: an origin whose last visits were this many ``failed`` (or
    #: ``not_found``) in a row is disabled until a lister lists it again
    #: (0: never; visits/feedback.py, ``disables``)
    disable_after_failures: int = DISABLE_AFTER_FAILURES

    def mix(self, visit_type: str) -> Mapping[VisitPolicy, int]:
        return self.mixes.get(visit_type) or self.mixes.get("default") or DEFAULT_MIX


def _weights(where: str, raw: object) -> dict[VisitPolicy, int]:
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidInput(where, "must be a table of policy = weight")
    mix: dict[VisitPolicy, int] = {}
    for name, weight in raw.items():
        policy = visit_policy(f"{where}.{name}", name)
        if policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING:
            raise InvalidInput(f"{where}.{name}", "needs a lister: it runs on its own")
        if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0:
            raise InvalidInput(
                f"{where}.{name}", f"{weight!r} is not a weight (a whole number > 0)"
            )
        mix[policy] = weight
    return mix


def visit_settings(raw: Mapping[str, Any] | None) -> VisitSettings:
    """The ``[visits]`` table read and checked, each refusal naming its key."""
    if not raw:
        return VisitSettings()
    known = {"cooldown_scheduled", "cooldown_no_result", "cooldown_failed", "cooldown_not_found"}
    others = {"policies", "origin_schemes", "disable_after_failures"}
    unknown = sorted(set(raw) - known - others)
    if unknown:
        everything = sorted({*known, *others})
        raise InvalidInput(f"visits.{unknown[0]}", f"is not a setting (known: {everything})")
    cooldowns = Cooldowns(**{k.removeprefix("cooldown_"): raw[k] for k in known if k in raw})
    policies = raw.get("policies", {})
    if not isinstance(policies, Mapping):
        raise InvalidInput("visits.policies", "must be a table of visit types")
    mixes = {
        str(kind): _weights(f"visits.policies.{kind}", table) for kind, table in policies.items()
    }
    schemes = raw.get("origin_schemes")
    failures = raw.get("disable_after_failures", DISABLE_AFTER_FAILURES)
    return VisitSettings(
        cooldowns,
        mixes,
        ORIGIN_SCHEMES if schemes is None else origin_schemes("visits.origin_schemes", schemes),
        failures_in_a_row("visits.disable_after_failures", failures),
    )


def failures_in_a_row(where: str, value: object) -> int:
    """The setting ``disable_after_failures``: a whole number from 0 (never)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
        raise InvalidInput(
            where, f"{value!r} is not a number of failures in a row (0: never disable)"
        )
    return value


def shares(count: int, mix: Mapping[VisitPolicy, int]) -> dict[VisitPolicy, int]:
    """``count`` visits split by weight (largest remainders; ties in the
    mix's order): ``{policy: how many}``, summing to ``count``."""
    total = sum(mix.values())
    if count <= 0 or total <= 0:
        return {policy: 0 for policy in mix}
    exact = {policy: count * weight / total for policy, weight in mix.items()}
    given = {policy: int(share) for policy, share in exact.items()}
    left = count - sum(given.values())
    order = sorted(mix, key=lambda p: (-(exact[p] - given[p]), list(mix).index(p)))
    for policy in order[:left]:
        given[policy] += 1
    return given
