"""Capacity planning: the fewest workers per type that keep the promises.

A count of workers keeps a type's promises when, simulated, (1) its
ERROR-hours are at most the target, (2) the intervals it delivers are
stretched at most ``max_stretch`` beyond what a worker per task delivers,
and (3) it loses no more cron firings than a worker per task does
(:mod:`.firings`). ERROR-hours alone do not say it: the capacity-aware
interval rule lengthens adaptive intervals until nothing is late, so a
fleet short of workers shows no ERROR while its targets are visited every
73 minutes instead of 60 (issue 61).

**Stretch** of a type: the delivered gaps between two good starts of its
tasks over the intervals their schedules promise, pooled over its groups
(:mod:`.results`). A worker per task (a task has one run at a time: more
are never busy) delivers the intervals the tasks' own rules ask for (an
adaptive task that finds nothing comes back later by design; a run's length
and the runner's pace add a little): the bound is on the trial's stretch
over that one, what the shortage of workers adds. A type whose tasks gave no
gap at a worker per task (one-shots) has no stretch to bound; one that gave
gaps there and none in a trial is stretched beyond any bound.

Each trial's queue limits are scaled with its workers (the same queue per
worker, as ``--tasks`` and ``--load`` do): a limit written for 2 workers
would otherwise cap the runs of 20 (:mod:`.pace`), and say so when it still
does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import DispatchOrder
from .engine import Simulation
from .pace import paces
from .watch import CAUSES
from .workload import Workload

Progress = Callable[[str], None]
#: the default bound on the stretch a count of workers may add
MAX_STRETCH = 1.1


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class Trial:
    """One simulation of the search, per type."""

    workers: dict[str, int]
    queue_limits: dict[str, int | None]
    error_hours: dict[str, float]
    #: delivered over written, pooled over the type's groups (None: no gap)
    stretch: dict[str, float | None]
    busy_share: dict[str, float | None]
    #: cron firings owed and lost
    runs_owed: dict[str, int]
    runs_lost: dict[str, int]
    #: the runner's pace, not the workers, bounds the type (:mod:`.pace`)
    queue_bound: dict[str, bool]
    #: filled by the search: stretch over a worker per task's, and
    #: whether the trial keeps each type's promises
    added_stretch: dict[str, float | None] = field(default_factory=dict)
    meets: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, workload: Workload, result: Mapping[str, Any]) -> Trial:
        types = result["types"]
        owed = dict.fromkeys(types, 0)
        lost = dict.fromkeys(types, 0)
        # (the groups of --from-store's live tasks are their types)
        kinds = {g.name: g.type for g in workload.groups} | {t: t for t in types}
        for name, group in result["groups"].items():
            if group.get("runs_owed") is not None and name in kinds:
                owed[kinds[name]] += group["runs_owed"]
                lost[kinds[name]] += group["runs_lost"]
        pace = paces(workload)
        return cls(
            workers=dict(sorted(workload.workers.items())),
            queue_limits={t: workload.task_type(t).max_queue_length for t in sorted(types)},
            error_hours={t: r["error_hours"] for t, r in types.items()},
            stretch={t: r["stretch"] for t, r in types.items()},
            busy_share={t: r["busy_share"] for t, r in types.items()},
            runs_owed=owed,
            runs_lost=lost,
            queue_bound={t: t in pace and pace[t].binding for t in types},
        )

    def judge(self, baseline: Trial, target: float, max_stretch: float) -> None:
        """Fill :attr:`added_stretch` and :attr:`meets` against ``baseline``
        (a worker per task)."""
        for t in self.workers:
            mine, base = self.stretch.get(t), baseline.stretch.get(t)
            added = None if mine is None or not base else round(mine / base, 3)
            self.added_stretch[t] = added
            stretched = base is not None and (added is None or added > max_stretch + 1e-9)
            self.meets[t] = (
                self.error_hours[t] <= target
                and not stretched
                and self.runs_lost[t] <= baseline.runs_lost[t]
            )

    def misses(self, name: str, target: float, max_stretch: float) -> str:
        """Why the trial does not keep ``name``'s promises."""
        why = []
        if self.error_hours[name] > target:
            why.append(f"{self.error_hours[name]:,.1f} ERROR-hours (target {target:g})")
        added = self.added_stretch.get(name)
        if added is None and self.stretch.get(name) is None:
            why.append("no task ran twice")
        elif added is not None and added > max_stretch:
            why.append(f"intervals x{added:.2f} of a worker per task's (bound x{max_stretch:g})")
        if self.runs_lost[name]:
            why.append(f"{self.runs_lost[name]} cron firings lost")
        if self.queue_bound[name]:
            why.append(f"its queue limit ({self.queue_limits[name]}) bounds its runs")
        return ", ".join(why) or "it misses"

    def line(self, name: str) -> str:
        """One type of the trial, as the search prints it."""
        return (
            f"{name}={self.workers[name]} (queue {self.queue_limits[name] or '-'}): "
            f"{self.error_hours[name]:g} ERROR-h, stretch {_times(self.stretch[name])} "
            f"({_times(self.added_stretch.get(name))} of a worker per task), busy "
            f"{_share(self.busy_share[name])}, cron runs lost {self.runs_lost[name]}/"
            f"{self.runs_owed[name]}"
            + (", queue-bound" if self.queue_bound[name] else "")
            + (", meets" if self.meets.get(name) else ", misses")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "queue_limits": self.queue_limits,
            "error_hours": self.error_hours,
            "stretch": self.stretch,
            "stretch_over_worker_per_task": self.added_stretch,
            "busy_share": self.busy_share,
            "cron_runs_owed": self.runs_owed,
            "cron_runs_lost": self.runs_lost,
            "queue_bound": self.queue_bound,
            "meets": self.meets,
        }


def _times(value: float | None) -> str:
    return "-" if value is None else f"x{value:.2f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


@dataclass(frozen=True)
class Sizing:
    """The outcome of :func:`find_workers`."""

    workers: dict[str, int]
    #: per type, the ERROR-hours with those workers
    error_hours: dict[str, float]
    #: the simulations run, in order (the first: a worker per task)
    trials: list[Trial]
    target: float = 0.0
    max_stretch: float = MAX_STRETCH

    @property
    def answer(self) -> Trial:
        """The trial of the answer (the last one with its counts)."""
        return next(t for t in reversed(self.trials) if t.workers == self.workers)

    def table(self) -> list[str]:
        """The trials, one row per trial and type (Markdown)."""
        lines = [
            f"| workers | queue limit | ERROR-hours | stretch | over a worker per task "
            f"(bound x{self.max_stretch:g}) | busy | cron runs lost | keeps |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for index, trial in enumerate(self.trials):
            for t in sorted(trial.workers):
                label = f"{t}={trial.workers[t]}" + (" (one per task)" if index == 0 else "")
                lines.append(
                    f"| {label} | {trial.queue_limits[t] or '-'}"
                    + (" (bound)" if trial.queue_bound[t] else "")
                    + f" | {trial.error_hours[t]:g} | {_times(trial.stretch[t])} | "
                    f"{_times(trial.added_stretch.get(t))} | {_share(trial.busy_share[t])} | "
                    f"{trial.runs_lost[t]}/{trial.runs_owed[t]} | "
                    f"{'yes' if trial.meets.get(t) else 'no'} |"
                )
        return lines

    def to_json(self) -> dict[str, Any]:
        answer = self.answer
        return {
            "workers": self.workers,
            "error_hours": self.error_hours,
            "stretch": answer.stretch,
            "stretch_over_worker_per_task": answer.added_stretch,
            "busy_share": answer.busy_share,
            "cron_runs_lost": answer.runs_lost,
            "target_error_hours": self.target,
            "max_stretch": self.max_stretch,
            "trials": [t.to_json() for t in self.trials],
        }


def find_workers(
    workload: Workload,
    order: DispatchOrder,
    *,
    target: float = 0.0,
    max_stretch: float = MAX_STRETCH,
    limit: int = 4096,
    db_url: str | None = None,
    progress: Progress = _quiet,
    tasks: Sequence[Any] | None = None,
) -> Sizing:
    """Per task type, the smallest worker count that keeps its promises
    (module doc): ERROR-hours at most ``target``, intervals stretched at
    most ``max_stretch`` over a worker per task's, no more cron firings lost.

    First, one simulation with a worker per task for every type: a type
    still above the target there stays above it with any number of
    workers, and the search is refused (:class:`~..exceptions.InvalidInput`),
    naming the type, its groups in ERROR and what keeps them there when the
    simulation can tell (:data:`.watch.CAUSES`). Then the types have queues
    and workers of their own, so one simulation tries a count for every
    type at once: the counts of the types short double (up to their task
    count, and ``limit``), then each type's range, from its last count that
    missed to its first that kept, is halved by its own measures (a binary
    search per type, in lockstep). Every trial is kept by its worker counts
    and never simulated twice; each is said on ``progress``. ``tasks``: the
    live tasks of ``--from-store`` (:func:`.live.from_store`), simulated in
    every trial instead of the workload's groups."""
    trials: list[Trial] = []
    cache: dict[tuple[tuple[str, int], ...], Trial] = {}
    baseline: Trial | None = None

    def simulate(workers: Mapping[str, int]) -> tuple[Trial, dict[str, Any]]:
        key = tuple(sorted(workers.items()))
        progress(f"simulating with workers {dict(key)}")
        staffed = workload.with_workers(workers, scale_queues=True)
        result = Simulation(staffed, order, db_url=db_url, tasks=tasks).run()
        trial = Trial.of(staffed, result)
        cache[key] = trial
        trials.append(trial)
        return trial, result

    def trial(workers: Mapping[str, int]) -> Trial:
        key = tuple(sorted(workers.items()))
        if key not in cache:
            found, _ = simulate(workers)
            assert baseline is not None
            found.judge(baseline, target, max_stretch)
            for t in sorted(found.workers):
                progress(f"  {found.line(t)}")
        return cache[key]

    types = sorted(workload.workers)
    counts = dict.fromkeys(types, 0)
    for group in workload.groups:
        counts[group.type] += group.count
    ceiling = {t: max(1, min(limit, counts[t])) for t in types}
    baseline, result = simulate({t: max(1, counts[t]) for t in types})
    _refuse_unreachable(workload, result, target)
    baseline.judge(baseline, target, max_stretch)
    for t in types:
        progress(f"  {baseline.line(t)}")
    high = dict(workload.workers)
    low = dict.fromkeys(types, 0)  # counts known to miss (0: none tried)
    meets = trial(high).meets
    good = {t for t in types if meets[t]}
    while len(good) < len(types):  # double the counts of the types still short
        short = sorted(t for t in types if t not in good)
        if any(high[t] >= ceiling[t] for t in short):
            last = cache[tuple(sorted(high.items()))]
            at = "; ".join(
                f"{t} at {high[t]} workers: {last.misses(t, target, max_stretch)}"
                for t in short
                if high[t] >= ceiling[t]
            )
            raise InvalidInput(
                "target_error_hours",
                f"no count keeps the promises (the search stops at a worker per task, or "
                f"{limit}): {at}",
            )
        for t in short:
            low[t] = high[t]
        high = {t: high[t] if t in good else min(ceiling[t], high[t] * 2) for t in types}
        meets = trial(high).meets
        good.update(t for t in types if meets[t])
    while any(high[t] - low[t] > 1 for t in types):
        middle = {t: (low[t] + high[t]) // 2 if high[t] - low[t] > 1 else high[t] for t in types}
        meets = trial(middle).meets
        for t in types:
            if high[t] - low[t] > 1:
                if meets[t]:
                    high[t] = middle[t]
                else:
                    low[t] = middle[t]
    # the types share one runner (a full queue makes it sleep its period):
    # the counts found are checked together, and a type that misses with
    # the others at their answer gets one more worker at a time
    found = trial(high)
    while short := [t for t in types if not found.meets[t] and high[t] < ceiling[t]]:
        high = {t: high[t] + (t in short) for t in types}
        found = trial(high)
    return Sizing(
        workers=high,
        error_hours=found.error_hours,
        trials=trials,
        target=target,
        max_stretch=max_stretch,
    )


def _refuse_unreachable(workload: Workload, result: Mapping[str, Any], target: float) -> None:
    """Refuse, naming them, the types above ``target`` in ``result`` (a
    simulation with a worker per task), their groups in ERROR and the cause
    of most of each group's ERROR-hours."""
    above = sorted(t for t, r in result["types"].items() if r["error_hours"] > target)
    if not above:
        return
    parts = []
    for name in above:
        hours = result["types"][name]["error_hours"]
        groups = []
        for group in workload.groups:
            record = result["groups"].get(group.name, {})
            if group.type != name or not record.get("error_hours"):
                continue
            causes = record.get("error_hours_by_cause") or {}
            why = f": {CAUSES[max(causes, key=causes.__getitem__)]}" if causes else ""
            groups.append(f"{group.name!r} {record['error_hours']:,.1f}{why}")
        parts.append(f"{name} {hours:,.1f} ERROR-hours ({'; '.join(groups)})")
    raise InvalidInput(
        "target_error_hours",
        f"no number of workers keeps these types at or under {target:g} ERROR-hours "
        f"(with a worker per task): {' | '.join(parts)}",
    )
