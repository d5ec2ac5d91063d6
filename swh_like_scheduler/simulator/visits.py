"""A listed-origin world under one visit policy, on a virtual clock.

What runs for real: the store (a private SQLite database), the listings
(``record_listed_origins``), ``schedule-recurrent``'s step
(:func:`~swh_like_scheduler.recurrent.scheduler.schedule_step`: the same
grabs, the same messages), the feedback (``record_visit_statuses``) and the
origin metrics (``update_metrics``). What is simulated: time (SimPy's
clock, passed as ``now`` to everything), the broker's queue
(:class:`.queues.SimQueues`), the visit workers, and the forge:

* each origin changes at a rate of its own, drawn log-uniform between
  :attr:`VisitWorld.changes` (changes per day): a Poisson process whose
  change times are drawn once per origin, from a random stream of its own
  (every policy meets the same world);
* a share of the forge gives a last-update date (the latest change when
  the lister lists it); a share of the origins fails every visit;
* the lister lists the first :attr:`~VisitWorld.origins` at the start, adds
  :attr:`~VisitWorld.added_per_hour` every hour, and lists the whole forge
  again every :attr:`~VisitWorld.relist_hours` (the forge dates move);
* a visit takes an exponential time (mean :attr:`~VisitWorld.visit_minutes`)
  and loads the origin's state at its end: a snapshot named by how many
  times the origin changed; statuses reach the store a minute later, in a
  batch (as the listener writes them).

Measured, per policy: visits, the share that found something new
(eventful), **stale origin-hours** (an origin is stale while the archive
lacks its latest change, or never visited it: the policy-neutral measure of
freshness), ERROR origin-hours (the origins' conditions, counted by
``update_metrics`` every hour: the deadline promise of visits/condition.py)
and the origins never visited at the end.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import simpy

from ..domain.exceptions import InvalidInput
from ..domain.model import TaskType
from ..recurrent.scheduler import schedule_step
from ..visits.feedback import VisitStatusMessage
from ..visits.model import ListedOrigin, VisitStatus
from ..visits.policy import VisitPolicy, VisitSettings, visit_policy
from .behaviour import stream
from .engine import sim_store
from .observed import PRIVATE_SQLITE
from .queues import SimQueues

#: what the comparison runs by default: each policy of a mix alone, ours,
#: and the default mix
DEFAULT_CHOICES = (
    "already_visited_order_by_lag",
    "never_visited_oldest_update_first",
    "origins_without_last_update",
    "oldest_scheduled_first",
    "stop_after_success",
    "deadline",
    "mix",
)
HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class VisitWorld:
    """The world's settings; each refusal names its field."""

    origins: int = 1000
    added_per_hour: int = 5
    days: float = 3.0
    workers: int = 2
    visit_minutes: float = 5.0
    #: changes per day: the log-uniform bounds of each origin's rate
    changes: tuple[float, float] = (1 / 60, 4.0)
    #: the share of origins whose forge gives a last-update date
    dated: float = 2 / 3
    #: the share of origins whose every visit fails
    failing: float = 0.05
    queue_limit: int = 50
    step_minutes: float = 5.0
    relist_hours: float = 24.0
    seed: int = 1
    start: datetime = field(default_factory=lambda: datetime(2026, 1, 5, tzinfo=UTC))

    def __post_init__(self) -> None:
        for name in ("origins", "added_per_hour", "workers", "queue_limit", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(name, f"{value!r} is not a whole number >= 0")
        if self.workers < 1 or self.queue_limit < 1:
            raise InvalidInput("workers" if self.workers < 1 else "queue_limit", "must be >= 1")
        for name in ("days", "visit_minutes", "step_minutes", "relist_hours"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < 10_000 or math.isnan(value):
                raise InvalidInput(name, f"{value!r} is not a positive number of {name}")
        for name in ("dated", "failing"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value <= 1:
                raise InvalidInput(name, f"{value!r} is not a share from 0 to 1")
        low, high = self.changes
        if not 0 < low <= high:
            raise InvalidInput("changes", f"{self.changes!r} is not (low, high) > 0, low <= high")

    @property
    def horizon(self) -> float:
        return self.days * DAY


@dataclass
class Origin:
    """One origin of the forge: when it appears, how it behaves."""

    index: int
    created: float
    dated: bool
    failing: bool
    #: the seconds at which it changes, in order
    changes: list[float]
    #: how many changes the archive has (the last successful visit loaded)
    archived: int | None = None

    @property
    def url(self) -> str:
        return f"https://forge.example/o{self.index}"

    def changed(self, at: float) -> int:
        """How many times it changed up to ``at``."""
        return bisect.bisect_right(self.changes, at)

    def forge_date(self, at: float) -> float:
        count = self.changed(at)
        return self.changes[count - 1] if count else self.created


def draw_origin(world: VisitWorld, index: int, created: float) -> Origin:
    rng = stream(world.seed, "origin", index)
    low, high = (c / DAY for c in world.changes)
    rate = math.exp(rng.uniform(math.log(low), math.log(high)))
    changes, at = [], created
    while True:
        at += rng.expovariate(rate)
        if at > world.horizon:
            break
        changes.append(at)
    return Origin(index, created, rng.random() < world.dated, rng.random() < world.failing, changes)


def settings_for(choice: str) -> VisitSettings:
    """One policy alone, or ``mix``: the default mix (visits/policy.py)."""
    if choice == "mix":
        return VisitSettings()
    policy = visit_policy("policy", choice)
    if policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING:
        raise InvalidInput("policy", f"{choice} needs a lister: it is not simulated alone")
    return VisitSettings(mixes={"git": {policy: 1}})


class VisitSimulation:
    """``world`` under ``choice`` (a policy, or ``mix``); :meth:`run`
    returns what it measured."""

    def __init__(self, world: VisitWorld, choice: str) -> None:
        self.world, self.choice = world, choice
        self.settings = settings_for(choice)
        self.env = simpy.Environment()
        self.queues = SimQueues(self.env)
        self.origins: list[Origin] = []
        self.pending: list[VisitStatusMessage] = []
        self.counts = {"visits": 0, "eventful": 0, "failed": 0}
        self.stale_seconds = 0.0
        self.error_seconds = 0.0
        self.stale_samples: list[float] = []

    def at(self, seconds: float | None = None) -> datetime:
        return self.world.start + timedelta(seconds=self.env.now if seconds is None else seconds)

    def run(self) -> dict[str, Any]:
        with sim_store(PRIVATE_SQLITE) as store:
            self.store = store
            store.announced, store.changed = set(), set()  # (the task engine's, unused)
            task_type = store.create_task_type(
                TaskType(
                    type="load-git",
                    backend_name="sim.load_git",
                    max_queue_length=self.world.queue_limit,
                )
            )
            self.queue = task_type.effective_queue
            self.lister = str(store.get_or_create_lister("sim", now=self.at()).id)
            self.env.process(self._lister())
            self.env.process(self._scheduler())
            self.env.process(self._feedback())
            self.env.process(self._sampler())
            for slot in range(self.world.workers):
                self.env.process(self._worker(slot))
            self.env.run(until=self.world.horizon)
            never = sum(1 for o in self.origins if o.archived is None)
        visits = self.counts["visits"]
        return {
            "policy": self.choice,
            **self.counts,
            "eventful_share": round(self.counts["eventful"] / visits, 4) if visits else 0.0,
            "stale_origin_hours": round(self.stale_seconds / HOUR, 1),
            "stale_share": round(sum(self.stale_samples) / max(1, len(self.stale_samples)), 4),
            "error_origin_hours": round(self.error_seconds / HOUR, 1),
            "origins": len(self.origins),
            "never_visited": never,
        }

    # -- the forge and its lister ----------------------------------------------------

    def _listing(self, origins: Sequence[Origin]) -> list[ListedOrigin]:
        now = self.env.now
        return [
            ListedOrigin(
                self.lister,
                o.url,
                "git",
                last_update=self.at(o.forge_date(now)) if o.dated else None,
            )
            for o in origins
        ]

    def _record(self, origins: Sequence[Origin]) -> None:
        for low in range(0, len(origins), 1000):
            chunk = origins[low : low + 1000]
            self.store.record_listed_origins(self._listing(chunk), now=self.at())

    def _lister(self) -> Generator[Any, Any, None]:
        self.origins = [draw_origin(self.world, n, 0.0) for n in range(self.world.origins)]
        self._record(self.origins)
        hours = 0
        while True:
            yield self.env.timeout(HOUR)
            hours += 1
            first = len(self.origins)
            new = [
                draw_origin(self.world, first + n, self.env.now)
                for n in range(self.world.added_per_hour)
            ]
            self.origins.extend(new)
            if hours % max(1, round(self.world.relist_hours)) == 0:
                self._record(self.origins)  # the whole forge again: its dates moved
            elif new:
                self._record(new)

    # -- the scheduler, the workers, the feedback ----------------------------------------

    def _scheduler(self) -> Generator[Any, Any, None]:
        while True:
            schedule_step(self.store, self.queues, ["git"], self.settings, self.at())
            yield self.env.timeout(self.world.step_minutes * 60)

    def _worker(self, slot: int) -> Generator[Any, Any, None]:
        rng = stream(self.world.seed, "worker", slot)
        queue = self.queues.queue(self.queue)
        while True:
            message = yield queue.get()
            origin = self.origins[int(message.kwargs["url"].rsplit("o", 1)[1])]
            yield self.env.timeout(rng.expovariate(1 / (self.world.visit_minutes * 60)))
            self.counts["visits"] += 1
            if origin.failing:
                self.counts["failed"] += 1
                status = VisitStatusMessage(origin.url, "git", self.at(), VisitStatus.FAILED, None)
            else:
                changed = origin.changed(self.env.now)
                if origin.archived != changed:
                    self.counts["eventful"] += 1
                origin.archived = changed
                snapshot = hashlib.sha1(f"{origin.index}:{changed}".encode()).hexdigest()
                status = VisitStatusMessage(
                    origin.url, "git", self.at(), VisitStatus.FULL, snapshot
                )
            self.pending.append(status)

    def _feedback(self) -> Generator[Any, Any, None]:
        while True:
            yield self.env.timeout(60)
            if self.pending:
                self.store.record_visit_statuses(self.pending)
                self.pending = []

    def _sampler(self) -> Generator[Any, Any, None]:
        """Every hour, standing for the hour that follows."""
        while True:
            now = self.env.now
            stale = sum(
                1 for o in self.origins if o.archived is None or o.archived < o.changed(now)
            )
            self.stale_seconds += stale * HOUR
            self.stale_samples.append(stale / max(1, len(self.origins)))
            metrics = self.store.update_metrics(now=self.at())
            self.error_seconds += sum(m.origins_error for m in metrics) * HOUR
            yield self.env.timeout(HOUR)


def compare(world: VisitWorld, choices: Sequence[str] = DEFAULT_CHOICES) -> list[dict[str, Any]]:
    """Each choice on the same world, in the order given."""
    for choice in choices:
        settings_for(choice)  # every choice checked before the first runs
    return [VisitSimulation(world, choice).run() for choice in choices]
