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

from ..model import DispatchOrder
from .engine import Simulation
from .workload import Workload

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
) -> dict[str, Any]:
    """The results of every order at every load (``None``: the workload's
    own durations), in the order given. The JSON holds no wall-clock
    figure: the same workload and seed give the same bytes."""
    runs = []
    for load in loads:
        scaled = workload if load is None else workload.with_load(load)
        for order in orders:
            progress(f"simulating {scaled.name}: order {order.value}, load {_load_text(load)}")
            result = Simulation(scaled, order, db_url=db_url, tasks=tasks).run()
            runs.append({"order": order.value, "load": load, **result})
    return {
        "workload": describe(workload),
        "orders": [o.value for o in orders],
        "loads": list(loads),
        "runs": runs,
    }


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
    most ``target``. The types have queues and workers of their own, so
    one simulation tries a count for every type at once: each type's
    range is halved by its own ERROR-hours (a binary search per type, in
    lockstep; about log2 of the answer simulations, after doubling the
    counts until every type meets the target). ``limit`` bounds the
    counts tried."""
    trials: list[tuple[dict[str, int], dict[str, float]]] = []

    def trial(workers: Mapping[str, int]) -> dict[str, float]:
        progress(f"simulating with workers {dict(sorted(workers.items()))}")
        result = Simulation(workload.with_workers(workers), order, db_url=db_url).run()
        errors = {t: r["error_hours"] for t, r in result["types"].items()}
        trials.append((dict(workers), errors))
        return errors

    types = sorted(workload.workers)
    high = dict(workload.workers)
    errors = trial(high)
    good = {t: errors[t] for t in types if errors[t] <= target}
    while len(good) < len(types):  # double the counts of the types still short
        if any(high[t] >= limit for t in types if t not in good):
            short = sorted(t for t in types if t not in good)
            raise RuntimeError(
                f"{', '.join(short)}: more than {limit} workers still leave ERROR-hours "
                f"above {target}"
            )
        high = {t: high[t] if t in good else min(limit, high[t] * 2) for t in types}
        errors = trial(high)
        good.update({t: errors[t] for t in types if t not in good and errors[t] <= target})
    low = dict.fromkeys(types, 0)  # counts known to miss the target (0: none tried)
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
    while short := [t for t in types if errors[t] > target and high[t] < limit]:
        high = {t: high[t] + (t in short) for t in types}
        errors = trial(high)
    return Sizing(workers=high, error_hours=errors, trials=trials)
