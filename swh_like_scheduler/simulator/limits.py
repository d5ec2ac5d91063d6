"""``--load`` and the types' ``max_allowed_duration``: how many runs exceed it.

``--load`` lengthens a type's runs (:meth:`.workload.Workload.with_load`).
A simulated run longer than its type's ``max_allowed_duration`` is killed
and ends ``timed_out`` (a failure, retried by the type's policy): with the
limit as written, a longer run exceeds it more often, and the load asked
would change the failure rate too. By default the limit is lengthened with
the runs (the share over it stays as written) and said so; with
``scale_limits=False`` (``--keep-limits``) it is kept, and a type where the
share of runs over it grows by :data:`LIMIT_NOTICE` or more is warned.

A run's duration is log-normal (``median``, ``sigma``): it exceeds a limit
L with probability ``1 - Φ(ln(L / median) / sigma)`` (a sigma of 0: 1 when
the median is over L). A type's share is over its groups, each weighted by
the runs it asks for (:func:`.workload.nominal_rate`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .peaks import percent, span
from .workload import Duration, Workload, nominal_rate

#: a share of runs over the limit grown by this much (absolute) is warned
LIMIT_NOTICE = 0.01


def share_over(duration: Duration, limit: timedelta) -> float:
    """The probability that a run of ``duration`` lasts longer than ``limit``."""
    median, allowed = duration.median.total_seconds(), limit.total_seconds()
    if duration.sigma == 0:
        return 1.0 if median > allowed else 0.0
    z = math.log(allowed / median) / duration.sigma
    return 0.5 * math.erfc(z / math.sqrt(2))


def shares_over(workload: Workload) -> dict[str, float]:
    """Per type with a ``max_allowed_duration``, the share of its runs
    longer than it (weighted by the runs each group asks for)."""
    runs: dict[str, float] = {}
    over: dict[str, float] = {}
    for group in workload.groups:
        task_type = workload.task_type(group.type)
        limit = task_type.max_allowed_duration
        if limit is None:
            continue
        rate = group.count * nominal_rate(group, task_type, workload.start, workload.horizon)
        runs[group.type] = runs.get(group.type, 0.0) + rate
        over[group.type] = over.get(group.type, 0.0) + rate * share_over(group.duration, limit)
    return {name: over[name] / runs[name] if runs[name] else 0.0 for name in sorted(runs)}


@dataclass(frozen=True)
class RunLimit:
    """A type whose runs ``--load`` lengthened, and its limit."""

    type: str
    #: the factor on its runs
    factor: float
    written: timedelta
    #: the limit simulated (``written`` times ``factor`` when scaled)
    simulated: timedelta
    #: the share of runs over the limit as written, and as simulated
    before: float
    after: float

    @property
    def scaled(self) -> bool:
        return self.simulated != self.written

    @property
    def noticed(self) -> bool:
        """The share grew noticeably (the limit was kept)."""
        return self.after - self.before >= LIMIT_NOTICE

    def to_json(self) -> dict[str, Any]:
        return {
            "run_factor": round(self.factor, 4),
            "max_allowed_duration_s": round(self.written.total_seconds(), 3),
            "simulated_max_allowed_duration_s": round(self.simulated.total_seconds(), 3),
            "scaled": self.scaled,
            "share_over_before": round(self.before, 4),
            "share_over_after": round(self.after, 4),
        }


def run_limits(written: Workload, simulated: Workload) -> dict[str, RunLimit]:
    """Per type with a ``max_allowed_duration`` whose runs ``simulated``
    lengthened (from ``written``): its limit and shares before and after."""
    before, after = shares_over(written), shares_over(simulated)
    found = {}
    for name in sorted(after):
        factor = simulated.run_factors.get(name, 1.0) / written.run_factors.get(name, 1.0)
        limit = written.task_type(name).max_allowed_duration
        if limit is None or math.isclose(factor, 1.0):
            continue
        found[name] = RunLimit(
            type=name,
            factor=factor,
            written=limit,
            simulated=simulated.task_type(name).max_allowed_duration or limit,
            before=before.get(name, 0.0),
            after=after[name],
        )
    return found


def limit_lines(limits: dict[str, RunLimit], load: float) -> list[str]:
    """What to say on stderr: one note for the limits lengthened with the
    runs, one warning per type whose kept limit now kills noticeably more."""
    lines = []
    scaled = [lim for lim in limits.values() if lim.scaled]
    if scaled:
        lines.append(
            f"note: load {load:.0%}: max_allowed_duration lengthened with the runs (the share "
            "of runs over it stays as written; --keep-limits keeps it): "
            + ", ".join(
                f"{lim.type} {span(lim.written.total_seconds())} -> "
                f"{span(lim.simulated.total_seconds())} (x{lim.factor:.2f})"
                for lim in scaled
            )
        )
    for lim in limits.values():
        if not lim.scaled and lim.noticed:
            lines.append(f"warning: load {load:.0%}: {limit_text(lim)}")
    return lines


def limit_text(lim: RunLimit) -> str:
    return (
        f"{lim.type}'s runs, x{lim.factor:.2f} as long, exceed its max_allowed_duration "
        f"({span(lim.written.total_seconds())}) {percent(lim.after)} of the time instead of "
        f"{percent(lim.before)}: they are killed (timed_out) and retried"
    )
