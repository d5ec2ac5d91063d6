"""Runs of one workload under several dispatch orders and loads, side by
side, and the smallest worker counts that keep a target (capacity planning).

Every run of a comparison meets the same world: the same tasks, first run
instants and run fates (durations, failures, changes), drawn from the
workload's seed; only the order of dispatch (and the load, when asked)
differs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import DispatchOrder
from .engine import Simulation
from .limits import limit_lines, run_limits
from .peaks import peak_overloads, peak_warning
from .watch import CAUSES
from .workload import MAX_STRETCH, Workload

#: the orders compared when none is given
DEFAULT_ORDERS = (
    DispatchOrder.TRIAGE,
    DispatchOrder.DEADLINE,
    DispatchOrder.FIFO,
    DispatchOrder.RANDOM,
)

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def describe(workload: Workload) -> dict[str, Any]:
    """The workload as it was simulated (after scaling)."""
    return {
        "name": workload.name,
        "description": workload.description,
        "start": workload.start.isoformat(),
        "days": workload.days,
        "seed": workload.seed,
        "tasks": workload.task_count,
        "workers": dict(sorted(workload.workers.items())),
        "natural_load": {t: round(v, 4) for t, v in sorted(workload.natural_load().items())},
        "groups": [
            {"name": g.name, "type": g.type, "count": g.count, "kind": g.kind.value}
            for g in workload.groups
        ],
    }


def compare(
    workload: Workload,
    orders: Sequence[DispatchOrder] = DEFAULT_ORDERS,
    loads: Sequence[float | None] = (None,),
    *,
    db_url: str | None = None,
    progress: Progress = _quiet,
    tasks: Sequence[Any] | None = None,
    scale_limits: bool = True,
    keep_slots: bool = True,
) -> dict[str, Any]:
    """The results of every order at every load (``None``: the workload's
    own durations), in the order given. The JSON holds no wall-clock
    figure: the same workload and seed give the same bytes.

    Beside each run's measures: ``load_not_reached`` (the types ``--load``
    could not bring to the load), ``peak_overload`` (the types whose peak
    demand exceeds their workers though their mean does not:
    :mod:`.peaks`) and ``run_limits`` (the types whose runs the load
    lengthened, and what became of their ``max_allowed_duration``:
    lengthened with them unless ``scale_limits`` is False, :mod:`.limits`);
    all said on ``progress`` too, once per load. ``keep_slots``: whether the
    simulated runner keeps worker slots from long runs (:class:`.engine.Simulation`)."""
    runs = []
    for load in loads:
        scaled = workload if load is None else workload.with_load(load, scale_limits=scale_limits)
        said = notes(workload, scaled, load, tasks)
        for line in said.lines:
            progress(line)
        for order in orders:
            progress(f"simulating {scaled.name}: order {order.value}, load {_load_text(load)}")
            result = Simulation(
                scaled, order, db_url=db_url, tasks=tasks, keep_slots=keep_slots
            ).run()
            runs.append(
                {
                    "order": order.value,
                    "load": load,
                    "load_not_reached": said.short,
                    "peak_overload": said.peaks,
                    "run_limits": said.limits,
                    **result,
                }
            )
    return {
        "workload": describe(workload),
        "orders": [o.value for o in orders],
        "loads": list(loads),
        "keep_slots": keep_slots,
        "runs": runs,
    }


@dataclass(frozen=True)
class Notes:
    """What a workload about to be simulated at a load should be said with."""

    #: the lines for stderr
    lines: list[str]
    #: the types under the load, with the load they reach
    short: dict[str, float]
    #: per type whose peak exceeds its workers, the peak (:meth:`.peaks.Peak.to_json`)
    peaks: dict[str, Any]
    #: per type whose runs the load lengthened, its limit (:meth:`.limits.RunLimit.to_json`)
    limits: dict[str, Any]


def notes(
    written: Workload,
    scaled: Workload,
    load: float | None,
    tasks: Sequence[Any] | None = None,
) -> Notes:
    """The :class:`Notes` of ``scaled``, which is ``written`` at ``load``
    (None: as written; ``tasks``: the live tasks of ``--from-store``)."""
    lines: list[str] = []
    short: dict[str, float] = {}
    limits: dict[str, Any] = {}
    if load is not None:
        short = scaled.unreached(load)
        lines += [load_warning(scaled, name, load, reached) for name, reached in short.items()]
        found = run_limits(written, scaled)
        lines += limit_lines(found, load)
        limits = {name: limit.to_json() for name, limit in found.items()}
    overloads = peak_overloads(scaled, tasks)
    lines += [peak_warning(peak, load) for peak in overloads.values()]
    peaks = {name: peak.to_json() for name, peak in overloads.items()}
    return Notes(lines, short, peaks, limits)


def load_warning(workload: Workload, name: str, load: float, reached: float) -> str:
    """The warning for a type that ``--load`` could not bring to ``load``."""
    return (
        f"warning: load {load:.0%}: {name} reaches only {reached:.0%} "
        f"({workload.workers[name]} worker(s); its runs would have to be more than "
        f"{MAX_STRETCH:g}x as long, so they are kept as written)"
    )


def _load_text(load: float | None) -> str:
    return "as written" if load is None else f"{load:.0%}"


@dataclass(frozen=True)
class Sizing:
    """The outcome of :func:`find_workers`."""

    workers: dict[str, int]
    #: per type, the ERROR-hours with those workers
    error_hours: dict[str, float]
    #: the simulations run, ``(workers tried, ERROR-hours per type)``
    trials: list[tuple[dict[str, int], dict[str, float]]]

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "error_hours": self.error_hours,
            "trials": [{"workers": w, "error_hours": e} for w, e in self.trials],
        }


def find_workers(
    workload: Workload,
    order: DispatchOrder,
    *,
    target: float = 0.0,
    limit: int = 4096,
    db_url: str | None = None,
    progress: Progress = _quiet,
) -> Sizing:
    """Per task type, the smallest worker count whose ERROR-hours are at
    most ``target``.

    First, one simulation with a worker per task for every type (more are
    never busy: a task has one run at a time): a type still above the
    target there stays above it with any number of workers, and the search
    is refused (:class:`~..exceptions.InvalidInput`), naming the type, its
    groups in ERROR and what keeps them there when the simulation can tell
    (:data:`.watch.CAUSES`). Then the types have queues and workers of their
    own, so one simulation tries a count for every type at once: the counts
    of the types still short double (up to their task count, and
    ``limit``), then each type's range, from its last count that missed to
    its first that met the target, is halved by its own ERROR-hours (a
    binary search per type, in lockstep). Every trial is kept by its worker
    counts and never simulated twice."""
    trials: list[tuple[dict[str, int], dict[str, float]]] = []
    cache: dict[tuple[tuple[str, int], ...], dict[str, Any]] = {}

    def simulate(workers: Mapping[str, int]) -> dict[str, Any]:
        key = tuple(sorted(workers.items()))
        if key not in cache:
            progress(f"simulating with workers {dict(key)}")
            cache[key] = Simulation(workload.with_workers(workers), order, db_url=db_url).run()
            errors = {t: r["error_hours"] for t, r in cache[key]["types"].items()}
            trials.append((dict(key), errors))
        return cache[key]

    def trial(workers: Mapping[str, int]) -> dict[str, float]:
        return {t: r["error_hours"] for t, r in simulate(workers)["types"].items()}

    types = sorted(workload.workers)
    tasks = dict.fromkeys(types, 0)
    for group in workload.groups:
        tasks[group.type] += group.count
    ceiling = {t: max(1, min(limit, tasks[t])) for t in types}
    _refuse_unreachable(workload, simulate({t: max(1, tasks[t]) for t in types}), target)
    high = dict(workload.workers)
    low = dict.fromkeys(types, 0)  # counts known to miss the target (0: none tried)
    errors = trial(high)
    good = {t for t in types if errors[t] <= target}
    while len(good) < len(types):  # double the counts of the types still short
        short = sorted(t for t in types if t not in good)
        if any(high[t] >= ceiling[t] for t in short):
            at = ", ".join(f"{t} at {high[t]}" for t in short if high[t] >= ceiling[t])
            raise InvalidInput(
                "target_error_hours",
                f"ERROR-hours still above {target:g} with {at} workers (the search stops "
                f"at a worker per task, or {limit})",
            )
        for t in short:
            low[t] = high[t]
        high = {t: high[t] if t in good else min(ceiling[t], high[t] * 2) for t in types}
        errors = trial(high)
        good.update(t for t in types if errors[t] <= target)
    while any(high[t] - low[t] > 1 for t in types):
        middle = {t: (low[t] + high[t]) // 2 if high[t] - low[t] > 1 else high[t] for t in types}
        errors = trial(middle)
        for t in types:
            if high[t] - low[t] > 1:
                if errors[t] <= target:
                    high[t] = middle[t]
                else:
                    low[t] = middle[t]
    # the types share one runner (a full queue makes it sleep its period):
    # the counts found are checked together, and a type that misses the
    # target with the others at their answer gets one more worker at a time
    errors = trial(high)
    while short := [t for t in types if errors[t] > target and high[t] < ceiling[t]]:
        high = {t: high[t] + (t in short) for t in types}
        errors = trial(high)
    return Sizing(workers=high, error_hours=errors, trials=trials)


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
