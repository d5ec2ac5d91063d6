"""The runner's pace as a bound: a queue limit that caps a type's runs.

A pass claims at most ``max_queue_length`` less the queue's depth per
type, and after a pass that fills a queue the runner sleeps its period
(:meth:`~..dispatch.passes.PassReport.sleep_seconds`). So whatever the
workers, a type's runs are handed over at most ``max_queue_length`` per
period: short runs with a small queue limit wait for the runner, not for a
worker, and more workers change nothing. Said before simulating, from the
workload's definition (the runs its tasks ask for at their nominal rates,
:func:`.workload.nominal_rate`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch.serve import UNBOUNDED_PASS_LIMIT
from .workload import Workload, nominal_rate


@dataclass(frozen=True)
class Pace:
    """One type's runs asked per second, and the most the runner hands over."""

    type: str
    asked: float
    #: the queue limit (None: none, a pass takes at most UNBOUNDED_PASS_LIMIT)
    queue_limit: int | None
    period: float

    @property
    def bound(self) -> float:
        """Runs per second the runner can hand the queue at most."""
        return (self.queue_limit or UNBOUNDED_PASS_LIMIT) / self.period

    @property
    def binding(self) -> bool:
        return self.asked > self.bound


def paces(workload: Workload) -> dict[str, Pace]:
    """Per type of a workload file (none for ``--from-store``'s given
    tasks, whose rates are their own), its :class:`Pace`."""
    if workload.given_demand is not None:
        return {}
    asked = dict.fromkeys(workload.workers, 0.0)
    for group in workload.groups:
        task_type = workload.task_type(group.type)
        asked[group.type] += group.count * nominal_rate(
            group, task_type, workload.start, workload.horizon
        )
    period = workload.runner.period.total_seconds()
    return {
        name: Pace(name, rate, workload.task_type(name).max_queue_length, period)
        for name, rate in sorted(asked.items())
    }


def pace_warning(pace: Pace) -> str:
    return (
        f"warning: {pace.type}: its tasks ask for {pace.asked:.2f} runs a second, and the "
        f"runner hands its queue at most {pace.queue_limit} per pass, a period "
        f"({pace.period:g} s) after a pass that fills it: {pace.bound:.2f} a second; the "
        "queue limit, not the workers, bounds its runs (raise max_queue_length)"
    )
