"""A forecast of the live platform: its conditions over the next hours at
today's capacity, and with more workers on some queues.

It reads the live store as ``simulate --from-store`` does (:mod:`.live`:
the task types, the live tasks with their schedules, next starts and
measured run times) and, besides, each type's failure shares over the runs
ended within the last hour (:meth:`~..store.SchedulerStore.schedule_health`),
then runs the real scheduling code (policy, runner pass, listener, monitor:
:class:`.engine.Simulation`) forward on a virtual clock, seeded: the same
store and options give the same forecast.

Per type and overall it says how many tasks are OK, WARNING and in ERROR
at the start, at the horizon and at the worst sample (the most in ERROR),
from when ERROR grows for good (the first sample from which it stays above
its count at the start up to the horizon), the ERROR-hours, and the stretch
(the interval delivered over the interval written, :mod:`.results`). Each
variant adds workers to some queues and says the same.

Workers are counted per Celery queue, as the live workers report them (or
as given): the simulated slots of a queue take its messages whatever their
type, as real ones do."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..domain.enums import check_aware
from ..domain.exceptions import InvalidInput
from ..domain.model import DispatchOrder, RunStatus, TaskType
from ..store import SchedulerStore
from ..store.values import ScheduleHealth
from .engine import Simulation
from .live import from_store
from .observed import store_named
from .workload import RunnerSettings

#: a forecast's horizon unless told
HORIZON = timedelta(hours=24)
#: the shortest and the longest horizon asked
SHORTEST, LONGEST = timedelta(minutes=2), timedelta(days=14)


def pacing(horizon: timedelta) -> RunnerSettings:
    """How the simulated daemons pace themselves over ``horizon``: the
    conditions read every 10 minutes, or 18 times over a shorter horizon;
    the runner at most 30 s, or 1 % of the horizon, late on a ready task
    (a real runner wakes when one falls ready); the listener 10 s (or 1 %)
    behind."""
    return RunnerSettings(
        sample_every=min(timedelta(minutes=10), horizon / 18),
        min_sleep=min(timedelta(seconds=30), horizon / 100),
        listener_delay=min(timedelta(seconds=10), horizon / 100),
    )


_FAILED = {RunStatus.FAILED.value, RunStatus.TIMED_OUT.value, RunStatus.LOST.value}
_PERMFAILED = {RunStatus.PERMFAILED.value}
_ENDED = {
    RunStatus.EVENTFUL.value,
    RunStatus.UNEVENTFUL.value,
    *_FAILED,
    *_PERMFAILED,
}


@dataclass(frozen=True)
class Conditions:
    """How many tasks are OK, WARNING and in ERROR at one sample."""

    hours: float
    ok: int
    warning: int
    error: int

    def to_json(self) -> dict[str, Any]:
        return {"hours": self.hours, "OK": self.ok, "WARNING": self.warning, "ERROR": self.error}


@dataclass(frozen=True)
class Outlook:
    """One type's (or every type's) course over the horizon."""

    start: Conditions
    horizon: Conditions
    worst: Conditions
    #: the first sample from which ERROR stays above its count at the start,
    #: up to the horizon (``None``: it does not grow for good)
    error_grows_from: float | None
    error_hours: float
    #: the interval delivered over the interval written (``None``: no
    #: recurring task ran twice)
    stretch: float | None
    #: the tasks at each sample: ``(hours, OK, WARNING, ERROR)``
    timeline: tuple[tuple[float, int, int, int], ...] = ()

    @classmethod
    def of(
        cls, readings: Sequence[Sequence[float]], error_hours: float, stretch: float | None
    ) -> Outlook:
        """From the samples ``[hours, OK, WARNING, ERROR]``, in order."""
        if not readings:
            raise ValueError("a forecast needs at least one sample")
        samples = [Conditions(float(h), int(o), int(w), int(e)) for h, o, w, e in readings]
        worst = max(samples, key=lambda c: (c.error, -c.hours))
        return cls(
            start=samples[0],
            horizon=samples[-1],
            worst=worst,
            error_grows_from=error_grows_from(samples),
            error_hours=error_hours,
            stretch=stretch,
            timeline=tuple((c.hours, c.ok, c.warning, c.error) for c in samples),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "timeline": [list(reading) for reading in self.timeline],
            "start": self.start.to_json(),
            "horizon": self.horizon.to_json(),
            "worst": self.worst.to_json(),
            "error_grows_from_hours": self.error_grows_from,
            "error_hours": self.error_hours,
            "stretch": self.stretch,
        }


def error_grows_from(samples: Sequence[Conditions]) -> float | None:
    """The hour of the first sample from which ERROR stays above its count
    at the first sample up to the last one; ``None`` when the last is not
    above it."""
    base = samples[0].error
    since = None
    for sample in samples:
        if sample.error <= base:
            since = None
        elif since is None:
            since = sample.hours
    return since


@dataclass(frozen=True)
class Scenario:
    """The forecast with ``workers`` slots per queue."""

    workers: Mapping[str, int]
    overall: Outlook
    types: Mapping[str, Outlook]

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": dict(sorted(self.workers.items())),
            "overall": self.overall.to_json(),
            "types": {name: o.to_json() for name, o in sorted(self.types.items())},
        }


@dataclass(frozen=True)
class Forecast:
    """A forecast at ``now`` and its variants."""

    now: datetime
    horizon: timedelta
    seed: int
    order: DispatchOrder
    tasks: int
    #: what the forecast assumed, in words
    assumptions: tuple[str, ...]
    #: how fresh the data read was: the listener's latest sign of life of a
    #: worker, and a runner's latest claim (``None``: none recorded)
    last_worker_seen_at: datetime | None
    last_claim_at: datetime | None
    base: Scenario
    variants: tuple[Scenario, ...] = field(default=())
    #: per queue, the fewest worker slots that keep its types out of ERROR
    #: (:func:`workers_needed`; ``None``: not within the search's bound);
    #: empty when not asked
    needed: Mapping[str, int | None] = field(default_factory=dict)
    #: the stretch bound of :attr:`needed`
    max_stretch: float = 1.1

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(),
            "horizon_hours": self.horizon.total_seconds() / 3600,
            "seed": self.seed,
            "order": self.order.value,
            "tasks": self.tasks,
            "assumptions": list(self.assumptions),
            "last_worker_seen_at": _instant(self.last_worker_seen_at),
            "last_claim_at": _instant(self.last_claim_at),
            "base": self.base.to_json(),
            "variants": [v.to_json() for v in self.variants],
            "workers_needed": dict(sorted(self.needed.items())),
            "max_stretch": self.max_stretch,
        }


def _instant(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def failure_shares(health: ScheduleHealth) -> dict[str, tuple[float, float, int]]:
    """Per type, the shares of the runs ended within the last hour (as
    ``health`` read them) that failed (to be retried: failed, timed out,
    lost) and that failed for good, and how many ended."""
    ended: dict[str, dict[str, int]] = {}
    for (name, status), count in health.ended_runs.items():
        ended.setdefault(name, {})[status] = ended.get(name, {}).get(status, 0) + count
    shares = {}
    for name, by_status in ended.items():
        total = sum(n for s, n in by_status.items() if s in _ENDED)
        if total:
            failed = sum(n for s, n in by_status.items() if s in _FAILED)
            perm = sum(n for s, n in by_status.items() if s in _PERMFAILED)
            shares[name] = (failed / total, perm / total, total)
    return shares


def per_type(types: Sequence[TaskType], slots: Mapping[str, int]) -> dict[str, int]:
    """The simulator's workers per type from slots per queue: a queue's
    slots go to the first of its types by name (the others get none; the
    slots take the queue's messages whatever their type)."""
    workers = {t.type: 0 for t in types}
    seen: set[str] = set()
    for task_type in sorted(types, key=lambda t: t.type):
        queue = task_type.effective_queue
        if queue not in seen:
            seen.add(queue)
            workers[task_type.type] = slots.get(queue, 0)
    return workers


def queues_of(types: Sequence[TaskType]) -> list[str]:
    return sorted({t.effective_queue for t in types})


def forecast(
    store: SchedulerStore,
    now: datetime,
    *,
    slots: Mapping[str, int],
    horizon: timedelta = HORIZON,
    more: Sequence[Mapping[str, int]] = (),
    seed: int = 1,
    order: DispatchOrder = DispatchOrder.DEADLINE,
    db_url: str | None = None,
    assumed_slots: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    size: bool = False,
    max_stretch: float = 1.1,
) -> Forecast:
    """The forecast of ``store`` from ``now`` over ``horizon`` with
    ``slots`` worker slots per queue (every queue of a type must be given),
    and one variant per mapping of ``more`` (slots added per queue).
    ``assumed_slots``: the queues whose slots were assumed, not reported.
    With ``size``, the workers each queue needs (:func:`workers_needed`)."""
    check_aware("now", now)
    if not SHORTEST <= horizon <= LONGEST:
        limits = f"between {SHORTEST.seconds // 60} minutes and {LONGEST.days} days"
        raise InvalidInput("horizon", f"{horizon} is not {limits}")
    types = store.get_task_types()
    queues = queues_of(types)
    for given in [slots, *more]:
        for queue, count in given.items():
            if queue not in queues:
                raise InvalidInput("workers", f"{queue!r} is not the queue of a task type")
            if count < 0:
                raise InvalidInput("workers", f"{queue}: {count} workers is negative")
    missing = [q for q in queues if q not in slots]
    if missing:
        raise InvalidInput("workers", f"no worker count for the queue(s) {', '.join(missing)}")
    health = store.schedule_health(now=now, counts=False, runs=False)
    shares = failure_shares(health)
    runner = pacing(horizon)
    workload, tasks = from_store(
        store,
        now,
        days=horizon.total_seconds() / 86400,
        workers=per_type(types, slots),
        seed=seed,
        runner=runner,
        failures={name: (f, p) for name, (f, p, _) in shares.items()},
    )
    assumptions = [workload.description]
    for name in sorted(t.type for t in types):
        if name in shares:
            failed, perm, total = shares[name]
            assumptions.append(
                f"{name}: {failed:.1%} of runs failed and {perm:.1%} failed for good "
                f"(the {total} runs ended within the last hour)"
            )
        else:
            assumptions.append(f"{name}: no run ended within the last hour; no failures assumed")
    for queue in assumed_slots:
        assumptions.append(f"queue {queue}: {slots[queue]} worker slot(s) assumed, not reported")
    where = store_named(db_url)
    assumptions.append(f"simulated on {where}, sampled every {runner.sample_every}")

    done: dict[tuple[tuple[str, int], ...], Scenario] = {}

    def run(counts: Mapping[str, int]) -> Scenario:
        key = tuple(sorted(counts.items()))
        if key in done:
            return done[key]
        staffed = workload.with_workers(per_type(types, counts))
        if progress is not None:
            progress("forecast with " + ", ".join(f"{q}={n}" for q, n in sorted(counts.items())))
        results = Simulation(
            staffed, order, db_url=db_url, tasks=tasks, by_type=True, at_horizon=True
        ).run()
        done[key] = _scenario(counts, results)
        return done[key]

    base = run(slots)
    variants = []
    for added in more:
        counts = dict(slots)
        for queue, extra in added.items():
            counts[queue] = counts[queue] + extra
        variants.append(run(counts))
    needed: dict[str, int | None] = {}
    if size:
        for queue in queues:
            names = [t.type for t in types if t.effective_queue == queue]
            needed[queue] = workers_needed(run, slots, queue, names, max_stretch)
    return Forecast(
        now=now,
        horizon=horizon,
        seed=seed,
        order=order,
        tasks=len(tasks),
        assumptions=tuple(assumptions),
        last_worker_seen_at=health.last_worker_seen_at,
        last_claim_at=health.last_claim_at,
        base=base,
        variants=tuple(variants),
        needed=needed,
        max_stretch=max_stretch,
    )


#: the most slots :func:`workers_needed` tries, as a multiple of those given
SEARCH_FACTOR = 4
#: ... and at least
SEARCH_FLOOR = 8


def workers_needed(
    run: Callable[[Mapping[str, int]], Scenario],
    slots: Mapping[str, int],
    queue: str,
    names: Sequence[str],
    max_stretch: float,
) -> int | None:
    """The fewest slots on ``queue`` (the other queues as in ``slots``)
    with which its types ``names`` end the horizon with no task in ERROR,
    never have more in ERROR than now, and deliver their intervals
    stretched at most ``max_stretch`` times what they do with the most
    slots tried (``max(SEARCH_FLOOR, SEARCH_FACTOR x given)``: adaptive and
    cooldown-bound tasks keep intervals of their own). ``None`` when even
    that many do not. A bisection: a simulation per step."""
    ceiling = max(SEARCH_FLOOR, SEARCH_FACTOR * slots[queue])
    ample = run({**slots, queue: ceiling})

    def keeps(scenario: Scenario) -> bool:
        for name in names:
            outlook, best = scenario.types[name], ample.types[name]
            if outlook.horizon.error > 0 or outlook.worst.error > outlook.start.error:
                return False
            stretch, bound = outlook.stretch, best.stretch
            if stretch is not None and bound is not None and stretch > max_stretch * bound:
                return False
        return True

    if not keeps(ample):
        return None
    low, high = 0, ceiling  # low fails (no slot runs nothing), high keeps
    while high - low > 1:
        middle = (low + high) // 2
        if keeps(run({**slots, queue: middle})):
            high = middle
        else:
            low = middle
    return high


def _scenario(counts: Mapping[str, int], results: Mapping[str, Any]) -> Scenario:
    """The scenario of one simulation's ``results``: its samples, then the
    reading taken at the horizon itself (the samples' last is one sampling
    period before it)."""
    by_type = results["timeline_by_type"]
    closing = results.get("at_horizon_by_type", {})
    types = {
        name: Outlook.of(
            [*by_type.get(name, [[0.0, 0, 0, 0]]), *([closing[name]] if name in closing else [])],
            figures["error_hours"],
            figures["stretch"],
        )
        for name, figures in results["types"].items()
    }
    read = [*results["timeline"], *([results["at_horizon"]] if "at_horizon" in results else [])]
    overall_readings = [[t["hours"], t["OK"], t["WARNING"], t["ERROR"]] for t in read] or [
        [0.0, 0, 0, 0]
    ]
    # overall: the most stretched type's
    stretches = [o.stretch for o in types.values() if o.stretch is not None]
    overall = Outlook.of(
        overall_readings, results["error_hours"], max(stretches) if stretches else None
    )
    return Scenario(dict(counts), overall, types)
