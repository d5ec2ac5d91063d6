"""Workload files: the task types, their workers, and groups of tasks with
the way their runs behave, read from TOML.

A workload names its task types with the fields ``swh scheduler task-type
add`` takes, plus ``workers`` (the Celery worker slots serving the type),
and its tasks in groups (``[[tasks]]``) with the fields ``swh scheduler task
add`` takes (``kind``, ``interval``, ``period``, ``cron``, ``tz``,
``priority``, ``max_delay``, ``blackout_periods``...) plus how many tasks the
group has and how their runs behave::

    name = "crawler-fleet"
    start = 2026-03-02T00:00:00Z   # the simulated clock's first instant
    days = 7
    seed = 1

    [runner]
    period = "60 s"            # longest sleep of the runner between passes
    min_sleep = "30 s"         # and shortest (a task waits at most that much more)
    listener_delay = "10 s"    # a worker's events are recorded this long after
    sample_every = "1 h"       # every task's condition is read this often

    [types.load-git]
    workers = 8
    default_interval = "1 day"
    min_interval = "1 h"
    max_interval = "30 days"
    backoff_factor = 2
    max_queue_length = 100

    [[tasks]]
    name = "git origins"
    type = "load-git"
    count = 5000
    kind = "adaptive"
    spread = ["0 s", "1 day"]      # first next_run: uniform over these offsets
    duration = { median = "3 min", sigma = 1.0 }   # log-normal
    failure = 0.02                 # a run fails (retried by the type's policy)
    changes_every = ["2 h", "180 days"]   # per task, log-uniform: a visit is
                                          # eventful with p = 1 - exp(-elapsed / it)

Everything is checked when the file is read; a refusal names the field
(``tasks[2].duration.median``).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import ScheduleKind, TaskType
from ..intake.builders import TASK_FIELDS, task_type_from_input
from ..policy import cron_times, default_cooldown, run_time_basis

#: the workloads shipped with the package (``simulator/workloads/*.toml``)
SHIPPED = ("crawler-fleet", "reminders", "mixed-platform", "always-changing", "long-and-short")
DEFAULT_WORKLOAD = "crawler-fleet"
#: fields of a task group that are not task fields
GROUP_FIELDS = ("name", "count", "spread", "duration", "failure", "permfailure", "changes_every")
#: the task fields a group may set (its tasks' arguments, key, first run
#: and nodes are the simulation's)
GROUP_TASK_FIELDS = tuple(
    f for f in TASK_FIELDS if f not in ("args", "kwargs", "key", "next_run", "dont_run_on_nodes")
)
#: fields of a task type that are not type fields
TYPE_SIM_FIELDS = ("workers",)
#: the most ``--load`` lengthens a type's runs (:meth:`Workload.with_load`)
MAX_STRETCH = 8.0
#: a load reached within this share of the one asked counts as reached
LOAD_TOLERANCE = 0.01


@dataclass(frozen=True)
class Duration:
    """A log-normal run duration: ``median`` and the ``sigma`` of its log."""

    median: timedelta
    sigma: float = 0.0

    @classmethod
    def of_mean(cls, mean: timedelta, sigma: float) -> Duration:
        """The log-normal duration whose mean is ``mean`` (a measured
        average is a mean: taken as the median, the runs would last
        ``exp(sigma² / 2)`` times longer on average, 13 % at 0.5)."""
        return cls(mean / math.exp(sigma**2 / 2), sigma)

    @property
    def mean(self) -> timedelta:
        return self.median * math.exp(self.sigma**2 / 2)

    def scaled(self, factor: float) -> Duration:
        return replace(self, median=self.median * factor)


@dataclass(frozen=True)
class TaskGroup:
    """``count`` tasks sharing a definition and a behaviour."""

    name: str
    type: str
    count: int
    #: the task fields, as ``swh scheduler task add`` takes them
    fields: Mapping[str, Any]
    #: offsets from the start between which each task's first next_run is drawn
    spread: tuple[timedelta, timedelta]
    duration: Duration
    failure: float = 0.0
    permfailure: float = 0.0
    #: per task, the mean time between two changes of what it visits is
    #: drawn log-uniformly between these (None: every run is eventful)
    changes_every: tuple[timedelta, timedelta] | None = None

    @property
    def kind(self) -> ScheduleKind:
        return ScheduleKind(self.fields.get("kind", "adaptive"))


@dataclass(frozen=True)
class RunnerSettings:
    """How the simulated daemons pace themselves."""

    #: the runner's longest sleep between passes (``start-runner --period``)
    period: timedelta = timedelta(seconds=60)
    #: the runner's shortest sleep: a pass per ready task would cost one
    #: pass per dispatch; a task is dispatched at most this much later
    min_sleep: timedelta = timedelta(seconds=30)
    #: a worker's events are recorded this long after the first of a batch
    listener_delay: timedelta = timedelta(seconds=10)
    #: every task's condition is read this often
    sample_every: timedelta = timedelta(hours=1)
    #: an outage: no runner pass from ``down_from`` after the start, for
    #: ``down_for`` (what the task types' ``catch_up`` then does is seen in
    #: the results: ``events.skipped``, dispatches, conditions)
    down_from: timedelta | None = None
    down_for: timedelta | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    start: datetime
    days: float
    seed: int
    types: tuple[TaskType, ...]
    workers: Mapping[str, int]
    groups: tuple[TaskGroup, ...]
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    description: str = ""
    #: per type, the factor :meth:`with_load` lengthened its runs by (absent: 1)
    run_factors: Mapping[str, float] = field(default_factory=dict)
    #: per type, the demand counted from each task's own schedule, when the
    #: tasks are given rather than grouped (``--from-store``: :mod:`.live`)
    given_demand: Mapping[str, float] | None = None

    @property
    def horizon(self) -> timedelta:
        return timedelta(days=self.days)

    @property
    def task_count(self) -> int:
        return sum(g.count for g in self.groups)

    def task_type(self, name: str) -> TaskType:
        return next(t for t in self.types if t.type == name)

    # -- scaling ------------------------------------------------------------------

    def demand(self, stretch: Mapping[str, float] | None = None) -> dict[str, float]:
        """Per type, the worker-seconds its tasks ask for per second, at
        their nominal rate (adaptive: the first interval; periodic: the
        period; cron: the firings of the first week; one-shot: the share of
        its spread that falls within the horizon, over the horizon) and
        mean duration: the number of workers that would be busy all the
        time. Retries are not counted. A periodic task counts once per
        cooldown plus its mean duration: it may run again that soon after
        its last good end. ``stretch``: per type, a factor on its run
        durations (see :meth:`with_load`)."""
        stretch = stretch or {}
        if self.given_demand is not None:
            return {
                name: self.given_demand.get(name, 0.0) * stretch.get(name, 1.0)
                for name in self.workers
            }
        demand = dict.fromkeys(self.workers, 0.0)
        for group in self.groups:
            factor = stretch.get(group.type, 1.0)
            if factor != 1.0:
                group = replace(group, duration=group.duration.scaled(factor))
            rate = nominal_rate(group, self.task_type(group.type), self.start, self.horizon)
            demand[group.type] += group.count * rate * group.duration.mean.total_seconds()
        return demand

    def natural_load(self) -> dict[str, float]:
        """Per type, :meth:`demand` over its workers."""
        return {t: d / max(1, self.workers[t]) for t, d in self.demand().items()}

    def unreached(self, load: float) -> dict[str, float]:
        """The types whose :meth:`natural_load` stays under ``load`` (by
        more than 1 %), with the load they reach."""
        return {
            name: reached
            for name, reached in sorted(self.natural_load().items())
            if reached < load * (1 - LOAD_TOLERANCE)
        }

    def with_tasks(self, total: int) -> Workload:
        """The workload with ``total`` tasks, its groups (and its workers,
        and their queue limits) scaled alike; every group and type keeps at
        least one."""
        if total < 1:
            raise InvalidInput("tasks", f"{total} is not a positive number of tasks")
        factor = total / self.task_count
        groups = tuple(replace(g, count=max(1, round(g.count * factor))) for g in self.groups)
        workers = {t: max(1, round(w * factor)) for t, w in self.workers.items()}
        return replace(self, groups=groups)._staffed(workers)

    def with_load(self, load: float, *, scale_limits: bool = True) -> Workload:
        """The workload whose tasks ask, per type, ``load`` times what its
        workers can do (1.0: exactly; 1.5: half as much again). The rule,
        per type: its worker count is its demand over ``load``, rounded up
        (at least one); its run durations are then lengthened by the factor
        that makes its demand exactly ``load`` times that count (solved, so
        that periodic tasks, which run less often when their runs are
        longer, count right). A type whose runs would have to be more than
        :data:`MAX_STRETCH` times as long (a type whose demand is far under
        ``load`` of one worker, or whose periodic tasks cannot ask that much
        however long their runs) keeps its durations and stays under the
        load: :meth:`unreached` names it, with the load it reaches. Queue
        limits follow the worker counts (:meth:`_staffed`).

        ``scale_limits`` (the default): a type's ``max_allowed_duration``
        and ``max_expected_duration`` (and its groups' own) are lengthened
        with its runs, so that the share of runs killed for lasting too long
        stays as written (a run lengthened past the limit would fail: the
        load would change the failure rate). False keeps them as written
        (:mod:`.limits` says how many more runs then exceed them)."""
        if not (0 < load <= 100) or math.isnan(load):
            raise InvalidInput("load", f"{load} is not a load between 0 and 100 (1.0 = 100 %)")
        workers, factors = {}, {}
        for name, demand in self.demand().items():
            # (a demand of exactly ``load`` workers needs no extra one)
            workers[name] = max(1, math.ceil(demand / load * (1 - 1e-12)))
            factors[name] = self._stretch(name, load * workers[name])
        groups = tuple(replace(g, duration=g.duration.scaled(factors[g.type])) for g in self.groups)
        scaled = replace(
            self,
            groups=groups,
            run_factors={n: self.run_factors.get(n, 1.0) * f for n, f in factors.items()},
        )
        if scale_limits:
            scaled = scaled._limits_scaled(factors)
        return scaled._staffed(workers)

    def _limits_scaled(self, factors: Mapping[str, float]) -> Workload:
        """The workload whose types' (and groups') ``max_allowed_duration``
        and ``max_expected_duration`` are ``factors`` times as long."""
        names = ("max_allowed_duration", "max_expected_duration")
        types = []
        for task_type in self.types:
            factor = factors.get(task_type.type, 1.0)
            changes = {
                name: getattr(task_type, name) * factor
                for name in names
                if factor != 1.0 and getattr(task_type, name) is not None
            }
            types.append(replace(task_type, **changes) if changes else task_type)
        groups = []
        for group in self.groups:
            factor = factors.get(group.type, 1.0)
            own = {
                name: validation.parse_duration(name, group.fields[name]) * factor
                for name in names
                if factor != 1.0 and group.fields.get(name) is not None
            }
            groups.append(replace(group, fields={**group.fields, **own}) if own else group)
        return replace(self, types=tuple(types), groups=tuple(groups))

    def _stretch(self, name: str, target: float) -> float:
        """The factor on type ``name``'s run durations that makes its demand
        ``target`` (1.0 when it is already there, or when no factor up to
        :data:`MAX_STRETCH` reaches it): ``target`` over the demand when the
        demand is proportional to the durations (no periodic task), else
        found by bisection (demand grows with the factor)."""

        def demand(factor: float) -> float:
            return self.demand({name: factor})[name]

        base = demand(1.0)
        if base >= target or demand(MAX_STRETCH) < target * (1 - 1e-9):
            return 1.0
        proportional = target / base
        if math.isclose(demand(proportional), target, rel_tol=1e-6):  # (durations in µs)
            return proportional
        low, high = 1.0, MAX_STRETCH
        for _ in range(60):
            middle = (low + high) / 2
            if demand(middle) < target:
                low = middle
            else:
                high = middle
        return high

    def _staffed(self, workers: Mapping[str, int]) -> Workload:
        """The workload with ``workers``, each type's ``max_queue_length``
        scaled with its worker count (the same queue per worker: a queue
        written for 18 workers would hold hours of work for two, and a
        dispatch order decides nothing for the tasks already queued)."""
        types = []
        for task_type in self.types:
            before, after = self.workers[task_type.type], workers[task_type.type]
            limit = task_type.max_queue_length
            if limit is not None and after != before:
                task_type = replace(
                    task_type, max_queue_length=max(1, round(limit * after / before))
                )
            types.append(task_type)
        return replace(self, types=tuple(types), workers=dict(workers))

    def with_workers(self, workers: Mapping[str, int], *, scale_queues: bool = False) -> Workload:
        """The workload with ``workers`` (per type; the others as written);
        ``scale_queues``: each type's ``max_queue_length`` scaled with its
        count, as :meth:`with_tasks` and :meth:`with_load` do (by default
        kept as written: ``--workers``)."""
        unknown = sorted(set(workers) - set(self.workers))
        if unknown:
            raise InvalidInput("workers", f"{unknown[0]!r} is not a task type of the workload")
        if scale_queues:
            return self._staffed({**self.workers, **workers})
        return replace(self, workers={**self.workers, **workers})

    def with_seed(self, seed: int) -> Workload:
        return replace(self, seed=seed)

    def with_days(self, days: float) -> Workload:
        if not (0 < days <= 366):
            raise InvalidInput("days", f"{days} is not a number of days between 0 and 366")
        return replace(self, days=days)


def nominal_rate(
    group: TaskGroup, task_type: TaskType, start: datetime, horizon: timedelta
) -> float:
    """Runs per second of one task of ``group`` (see :meth:`Workload.demand`)."""
    kind = group.kind
    if kind is ScheduleKind.ONESHOT:
        return _share_within(group.spread, horizon) / horizon.total_seconds()
    if kind is ScheduleKind.PERIODIC:
        # a periodic task may run again a cooldown after its last good end:
        # as often as that, when the workers keep up (its period is a bound
        # on staleness, not a rate)
        raw = group.fields.get("cooldown")
        if raw is not None:
            cooldown = validation.parse_duration("cooldown", raw)
        else:  # the default the store gives it, which follows the runs' average
            period = validation.parse_duration("period", group.fields["period"])
            expected = validation.optional_duration(
                "expected_duration", group.fields.get("expected_duration")
            )
            cooldown = default_cooldown(period, run_time_basis(expected, group.duration.mean))
        return 1 / max(1.0, (cooldown + group.duration.mean).total_seconds())
    if kind is ScheduleKind.CRON:
        week = timedelta(days=7)
        count = 0
        for instant in cron_times(group.fields["cron"], group.fields.get("tz", "UTC"), start):
            if instant > start + week:
                break
            count += 1
        return count / week.total_seconds()
    raw = group.fields.get("interval")
    interval = (
        validation.parse_duration("interval", raw)
        if raw is not None
        else task_type.default_interval
    )
    return 1 / max(1.0, (interval or timedelta(days=1)).total_seconds())


def _share_within(spread: tuple[timedelta, timedelta], horizon: timedelta) -> float:
    """The probability that an offset drawn uniformly from ``spread`` falls
    within ``[0, horizon)``: a one-shot task spread over 7 days runs in a
    2-day horizon with probability 2/7."""
    low, high = spread
    if high <= low:
        return 1.0 if timedelta(0) <= low < horizon else 0.0
    inside = min(high, horizon) - max(low, timedelta(0))
    return max(0.0, inside / (high - low))


# -- reading ---------------------------------------------------------------------------


def load_workload(source: str | Path | None = None) -> Workload:
    """The workload in file ``source``, or the shipped one of that name
    (default: :data:`DEFAULT_WORKLOAD`)."""
    name = str(source) if source is not None else DEFAULT_WORKLOAD
    if name in SHIPPED:
        text = resources.files(__package__).joinpath(f"workloads/{name}.toml").read_text("utf-8")
        where = f"workload {name}"
    else:
        path = Path(name)
        if not path.is_file():
            raise InvalidInput(
                "workload", f"{name!r} is not a file nor a shipped workload ({', '.join(SHIPPED)})"
            )
        text, where = path.read_text("utf-8"), str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput("workload", f"{where} is not valid TOML: {error}") from None
    return parse_workload(data)


def parse_workload(data: Mapping[str, Any]) -> Workload:
    """A :class:`Workload` from the mapping of a workload file."""
    known = {"name", "description", "start", "days", "seed", "runner", "types", "tasks"}
    _no_unknown("", data, known)
    start = data.get("start", datetime(2026, 3, 2, tzinfo=UTC))
    if isinstance(start, str):
        start = validation.parse_datetime("start", start, "UTC")
    if not isinstance(start, datetime) or start.tzinfo is None:
        raise InvalidInput("start", f"{start!r} is not an instant with a UTC offset")
    days = _number("days", data.get("days", 7), low=1e-3, high=366)
    seed = data.get("seed", 1)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InvalidInput("seed", f"{seed!r} is not an integer")
    runner = _runner(data.get("runner", {}))
    types_data = data.get("types")
    if not isinstance(types_data, Mapping) or not types_data:
        raise InvalidInput("types", "a workload needs at least one [types.NAME] table")
    types, workers = [], {}
    for name, values in types_data.items():
        task_type, count = _task_type(name, values)
        types.append(task_type)
        workers[name] = count
    tasks_data = data.get("tasks")
    if not isinstance(tasks_data, Sequence) or not tasks_data:
        raise InvalidInput("tasks", "a workload needs at least one [[tasks]] group")
    groups = tuple(_group(i, g, workers) for i, g in enumerate(tasks_data))
    return Workload(
        name=str(data.get("name", "workload")),
        description=str(data.get("description", "")),
        start=start.astimezone(UTC),
        days=days,
        seed=seed,
        types=tuple(types),
        workers=workers,
        groups=groups,
        runner=runner,
    )


def _no_unknown(where: str, values: Mapping[str, Any], known: set[str] | Sequence[str]) -> None:
    unknown = sorted(set(values) - set(known))
    if unknown:
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        raise InvalidInput(
            name, f"is not a workload field here (known: {', '.join(sorted(known))})"
        )


def _number(name: str, value: Any, *, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidInput(name, f"{value!r} is not a number")
    if not low <= value <= high:
        raise InvalidInput(name, f"{value} is not between {low:g} and {high:g}")
    return float(value)


def _runner(values: Any) -> RunnerSettings:
    if not isinstance(values, Mapping):
        raise InvalidInput("runner", "must be a table")
    _no_unknown(
        "runner",
        values,
        ("period", "min_sleep", "listener_delay", "sample_every", "down_from", "down_for"),
    )
    if ("down_from" in values) != ("down_for" in values):
        raise InvalidInput("runner.down_for", "an outage needs both down_from and down_for")
    settings = RunnerSettings()
    parsed = {
        name: validation.parse_duration(f"runner.{name}", value) for name, value in values.items()
    }
    for name, value in parsed.items():
        if value <= timedelta(0):
            raise InvalidInput(f"runner.{name}", "must be longer than 0 s")
    return replace(settings, **parsed)


def _task_type(name: str, values: Any) -> tuple[TaskType, int]:
    where = f"types.{name}"
    if not isinstance(values, Mapping):
        raise InvalidInput(where, "must be a table")
    fields = {k: v for k, v in values.items() if k not in TYPE_SIM_FIELDS}
    fields.setdefault("backend_name", f"sim.{name}")
    fields["type"] = name
    try:
        task_type = task_type_from_input(fields)
    except InvalidInput as error:
        raise InvalidInput(f"{where}.{error.field}", error.message) from None
    workers = values.get("workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 100_000:
        raise InvalidInput(f"{where}.workers", f"{workers!r} is not a number of workers (1+)")
    return task_type, workers


def _group(index: int, values: Any, workers: Mapping[str, int]) -> TaskGroup:
    where = f"tasks[{index}]"
    if not isinstance(values, Mapping):
        raise InvalidInput(where, "must be a table")
    _no_unknown(where, values, (*GROUP_FIELDS, *GROUP_TASK_FIELDS))
    type_name = values.get("type")
    if type_name not in workers:
        raise InvalidInput(f"{where}.type", f"{type_name!r} is not one of the workload's types")
    count = values.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 10_000_000:
        raise InvalidInput(f"{where}.count", f"{count!r} is not a number of tasks")
    fields = {k: v for k, v in values.items() if k not in GROUP_FIELDS}
    kind = fields.setdefault("kind", "adaptive")
    try:
        ScheduleKind(kind)
    except ValueError:
        choices = ", ".join(k.value for k in ScheduleKind)
        raise InvalidInput(f"{where}.kind", f"{kind!r} is not one of {choices}") from None
    spread = _span(f"{where}.spread", values.get("spread", ["0 s", "0 s"]))
    duration = _duration(f"{where}.duration", values.get("duration", {"median": "1 min"}))
    changes = values.get("changes_every")
    return TaskGroup(
        name=str(values.get("name", f"group {index}")),
        type=str(type_name),
        count=count,
        fields=fields,
        spread=spread,
        duration=duration,
        failure=_number(f"{where}.failure", values.get("failure", 0.0), low=0, high=1),
        permfailure=_number(f"{where}.permfailure", values.get("permfailure", 0.0), low=0, high=1),
        changes_every=None if changes is None else _span(f"{where}.changes_every", changes),
    )


def _span(name: str, value: Any) -> tuple[timedelta, timedelta]:
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
        raise InvalidInput(name, f'{value!r} is not a pair of durations like ["1 h", "2 days"]')
    low = validation.parse_duration(f"{name}[0]", value[0])
    high = validation.parse_duration(f"{name}[1]", value[1])
    if high < low:
        raise InvalidInput(name, f"{value!r}: the second duration is shorter than the first")
    return low, high


def _duration(name: str, value: Any) -> Duration:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        value = {"median": value}
    if not isinstance(value, Mapping):
        raise InvalidInput(name, f"{value!r} is not a duration nor {{median = ..., sigma = ...}}")
    _no_unknown(name, value, ("median", "sigma"))
    median = validation.parse_duration(f"{name}.median", value.get("median", "1 min"))
    if median <= timedelta(0):
        raise InvalidInput(f"{name}.median", "must be longer than 0 s")
    sigma = _number(f"{name}.sigma", value.get("sigma", 0.0), low=0, high=5)
    return Duration(median, sigma)
