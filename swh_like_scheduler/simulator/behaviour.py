"""How the simulated runs of a task behave: how long they take, whether
they fail, whether they find something new. Every draw comes from a random
stream of its own, named by the seed, the task and the attempt, so a run's
fate does not depend on the order in which the policy dispatched the others
(two policies meet the same world)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..domain.model import RunStatus
from .workload import Duration, TaskGroup

#: the statuses a simulated run ends with
SUCCESS = (RunStatus.EVENTFUL, RunStatus.UNEVENTFUL)


@dataclass(frozen=True)
class RunFate:
    """What one run does: its duration (seconds) and its final status."""

    seconds: float
    status: RunStatus


@dataclass(frozen=True)
class TaskBehaviour:
    """One task's behaviour, drawn once from its group."""

    group: TaskGroup
    #: mean seconds between two changes of what the task visits (None: it
    #: always changes)
    change_period: float | None
    #: the task's own run duration, instead of its group's
    duration: Duration | None = None

    @classmethod
    def draw(cls, group: TaskGroup, rng: random.Random) -> TaskBehaviour:
        if group.changes_every is None:
            return cls(group, None)
        low, high = (max(1.0, d.total_seconds()) for d in group.changes_every)
        period = math.exp(rng.uniform(math.log(low), math.log(high)))
        return cls(group, period)

    def fate(self, rng: random.Random, since_last_visit: float | None) -> RunFate:
        """The run's fate; ``since_last_visit``: seconds since the task's
        previous good run started (None: never visited)."""
        duration = self.duration or self.group.duration
        seconds = duration.median.total_seconds() * math.exp(duration.sigma * rng.gauss(0, 1))
        draw = rng.random()
        if draw < self.group.permfailure:
            return RunFate(seconds, RunStatus.PERMFAILED)
        if draw < self.group.permfailure + self.group.failure:
            return RunFate(seconds, RunStatus.FAILED)
        if self.change_period is None or since_last_visit is None:
            return RunFate(seconds, RunStatus.EVENTFUL)
        changed = 1 - math.exp(-since_last_visit / self.change_period)
        status = RunStatus.EVENTFUL if rng.random() < changed else RunStatus.UNEVENTFUL
        return RunFate(seconds, status)


def stream(seed: int, *names: object) -> random.Random:
    """A random stream of its own for ``names`` (a string seed is hashed
    with SHA-512 by :mod:`random`: the same in every process and run)."""
    return random.Random("/".join(map(str, (seed, *names))))
