"""Self-fencing: how long a copy may go on without a renewal, and stalls.

The monitor takes a run from its copy (ends it ``lost``, moves its task's
fencing token, lets the task run again) once the process running its body
has not renewed it for ``ping_timeout`` plus ``grace``, measured on the
database's clock from the last renewal (or from the start when it never
renewed). The monitor publishes those two settings in the database
(:class:`LeaseTerms`); each worker process reads them and stops counting a
body as the run's owner once its renewals have not succeeded for
:func:`self_fence_bound` seconds, measured on its own monotonic clock from
the moment it *sent* the last renewal that succeeded (the start request for
a run never renewed): that moment comes before the database stamped it, so
the worker's count never runs behind the monitor's.

The bound is strictly below the ping timeout: a copy cut off from the
database (or stopped, frozen) stops believing it owns its run before the
monitor even puts it on notice, and the monitor's grace then only has to
cover the time the stop takes to reach the body and the drift between the
two clocks' rates.

Pure functions of their arguments: no clock read, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

#: the share of the monitor's ping timeout a copy may go without a renewal
SELF_FENCE_SHARE = 0.75
#: a run is due for renewal after at most this share of its bound
#: (the heartbeat wakes twice a period: a first renewal by 3/4 of the
#: bound, and time for another attempt if the database did not answer)
RENEWALS_PER_BOUND = 2
#: how much later than planned a wake-up may come before it is a stall:
#: at least this many seconds ...
STALL_SLACK = 1.0
#: ... or this share of the planned wait, whichever is longer
STALL_SHARE = 0.5

#: History entry written on a run its copy gave up: its process could not
#: renew it within the self-fencing bound, the body was stopped, and its end
#: (``LeaseLost``) came while the run was still open: ended ``lost``.
LEASE_LOST = "lease_lost"
#: the exception a body gets when its process fences itself (its name is
#: what the listener reads in a ``task-failed`` event's error)
LEASE_LOST_ERROR = "LeaseLost"


@dataclass(frozen=True)
class LeaseTerms:
    """The monitor's steal settings as it publishes them in the database:
    a run whose copy has not renewed it for ``ping_timeout`` is put on
    notice, and taken ``grace`` later. ``holder`` and ``published_at``
    (the database's clock) say which monitor wrote them, and when."""

    ping_timeout: timedelta
    grace: timedelta
    holder: str | None = None
    published_at: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("ping_timeout", "grace"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise ValueError(f"{name}: {value!r} must be a duration longer than zero")

    @property
    def bound(self) -> float:
        """The self-fencing bound these terms give (:func:`self_fence_bound`)."""
        return self_fence_bound(self.ping_timeout)

    @property
    def margin(self) -> float:
        """Seconds between a copy fencing itself and the earliest instant the
        monitor may take its run: what covers stop latency and clock drift."""
        return (self.ping_timeout + self.grace).total_seconds() - self.bound


#: what a worker assumes until a monitor has published its settings: the
#: monitor's defaults (``--ping-timeout 30 s``, ``--grace 30 s``)
DEFAULT_TERMS = LeaseTerms(timedelta(seconds=30), timedelta(seconds=30))


def self_fence_bound(ping_timeout: timedelta) -> float:
    """Seconds a copy may go without a successful renewal before it stops
    counting itself the owner of its run: :data:`SELF_FENCE_SHARE` of the
    monitor's ping timeout (22.5 s for the default 30 s), strictly below it."""
    seconds = ping_timeout.total_seconds()
    if not seconds > 0:
        raise ValueError(f"ping timeout {ping_timeout} must be longer than zero")
    return SELF_FENCE_SHARE * seconds


def renewal_period(every: float, bound: float) -> float:
    """How long a copy lets a run go before renewing it: its own setting
    ``every`` (``swh_scheduler_lease_ping``), or less when that is longer
    than the bound over :data:`RENEWALS_PER_BOUND` (a monitor whose ping
    timeout is short for the workers' beat). 10 s with the defaults."""
    if not every > 0 or not bound > 0:
        raise ValueError(f"every ({every}) and bound ({bound}) must be longer than zero")
    return min(every, bound / RENEWALS_PER_BOUND)


def stall_slack(planned: float) -> float:
    """How late a wake-up planned ``planned`` seconds ahead may come before
    it counts as a stall (:func:`stalled_for`)."""
    return max(STALL_SLACK, STALL_SHARE * planned)


def stalled_for(planned_at: float, now: float, planned: float) -> float:
    """How long the process was stalled (stopped, frozen, starved), seen from
    a thread that planned to wake at ``planned_at`` (``planned`` seconds
    after it went to sleep) and woke at ``now``, both on the monotonic clock:
    the lateness when it is beyond :func:`stall_slack`, else ``0.0``."""
    late = now - planned_at
    return late if late > stall_slack(planned) else 0.0


def overdue(since: float, now: float, bound: float) -> bool:
    """Whether a copy whose last successful renewal was sent at ``since``
    (monotonic) is past its self-fencing ``bound`` at ``now``."""
    return now - since >= bound


__all__ = [
    "DEFAULT_TERMS",
    "LEASE_LOST",
    "LEASE_LOST_ERROR",
    "RENEWALS_PER_BOUND",
    "SELF_FENCE_SHARE",
    "LeaseTerms",
    "overdue",
    "renewal_period",
    "self_fence_bound",
    "stall_slack",
    "stalled_for",
]
