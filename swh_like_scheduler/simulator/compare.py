"""Runs of one workload under several dispatch orders and loads, side by
side (the smallest worker counts that keep a target, capacity planning, are
:mod:`.sizing`'s, named here too).

Every run of a comparison meets the same world: the same tasks, first run
instants and run fates (durations, failures, changes), drawn from the
workload's seed; only the order of dispatch (and the load, when asked)
differs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..domain.model import DispatchOrder
from .engine import Simulation
from .limits import limit_lines, run_limits
from .pace import pace_warning, paces
from .peaks import peak_overloads, peak_warning
from .sizing import Sizing, find_workers
from .workload import MAX_STRETCH, Workload

__all__ = ["DEFAULT_ORDERS", "Notes", "Sizing", "compare", "describe", "find_workers", "notes"]

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
                    "queue_bound": said.paces,
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
    #: per type whose queue limit bounds its runs (:mod:`.pace`), the runs
    #: asked and the most handed over per second
    paces: dict[str, Any]
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
    bound = [pace for pace in paces(scaled).values() if pace.binding]
    lines += [pace_warning(pace) for pace in bound]
    queues = {
        pace.type: {
            "runs_asked_per_s": round(pace.asked, 4),
            "queue_limit": pace.queue_limit,
            "runs_handed_per_s_max": round(pace.bound, 4),
        }
        for pace in bound
    }
    peaks = {name: peak.to_json() for name, peak in overloads.items()}
    return Notes(lines, short, peaks, queues, limits)


def load_warning(workload: Workload, name: str, load: float, reached: float) -> str:
    """The warning for a type that ``--load`` could not bring to ``load``."""
    return (
        f"warning: load {load:.0%}: {name} reaches only {reached:.0%} "
        f"({workload.workers[name]} worker(s); its runs would have to be more than "
        f"{MAX_STRETCH:g}x as long, so they are kept as written)"
    )


def _load_text(load: float | None) -> str:
    return "as written" if load is None else f"{load:.0%}"
