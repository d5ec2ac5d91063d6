"""The soak's plan, drawn from one seed: the workload and the faults.

Nothing here touches a server: :func:`make_plan` is a pure function of the
seed, the scale and the names of the processes and servers, so a failing
run is replayed by its seed (printed with the fault schedule).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Scale:
    """How long and how big a soak is."""

    #: seconds during which faults are injected (the workload spans them too)
    seconds: float
    #: mean seconds between the starts of two faults
    mean_gap: float
    #: recurring tasks of each kind (adaptive, periodic, cron)
    recurring: int
    #: one-shot tasks at random instants
    oneshots: int
    #: jobs by key (half rabbitmq callbacks, half http)
    jobs: int
    #: seconds a worker stays paused (SIGSTOP), a listener stopped
    pause: tuple[float, float] = (5.0, 20.0)
    listener_down: tuple[float, float] = (20.0, 40.0)


QUICK = Scale(seconds=60, mean_gap=11, recurring=4, oneshots=25, jobs=6)
FULL = Scale(
    seconds=1800,
    mean_gap=38,
    recurring=15,
    oneshots=400,
    jobs=60,
    pause=(10.0, 45.0),
    listener_down=(60.0, 180.0),
)


@dataclass(frozen=True)
class Recurring:
    tid: str
    #: ``task add`` fields of the schedule: interval, period or cron
    schedule: dict[str, str]
    duration: float
    fail_rate: float


@dataclass(frozen=True)
class OneShot:
    tid: str
    #: seconds after the soak's start
    at: float
    duration: float
    max_delay: str | None = None


@dataclass(frozen=True)
class JobPlan:
    key: str
    callback: str  # "rabbitmq" or "http"
    #: seconds after the soak's start (whole seconds: jobs keep seconds)
    instants: tuple[int, ...]
    #: replaced at this offset by ``replaced_by`` (instants still in the future only)
    replace_at: float | None = None
    replaced_by: tuple[int, ...] = ()


@dataclass(frozen=True)
class Fault:
    """One fault: at ``at`` seconds after the start, ``kind`` on ``target``,
    lasting ``seconds`` (down time, pause, ...)."""

    at: float
    kind: str
    target: str
    seconds: float = 0.0

    def describe(self) -> str:
        if self.kind == "burst":
            return f"t+{self.at:6.1f}s burst: {self.seconds:.0f} one-shots due at once"
        lasting = f" for {self.seconds:.0f} s" if self.seconds else ""
        return f"t+{self.at:6.1f}s {self.kind} {self.target}{lasting}"


@dataclass(frozen=True)
class Plan:
    seed: int
    scale: Scale
    recurring: tuple[Recurring, ...]
    oneshots: tuple[OneShot, ...]
    jobs: tuple[JobPlan, ...]
    faults: tuple[Fault, ...] = field(default=())

    def describe(self) -> str:
        lines = [
            f"soak seed {self.seed}: {len(self.recurring)} recurring, {len(self.oneshots)} "
            f"one-shot, {len(self.jobs)} jobs; {len(self.faults)} faults over "
            f"{self.scale.seconds:.0f} s:"
        ]
        return "\n".join(lines + [f"  {f.describe()}" for f in self.faults])


#: fault kinds and their weights; servers are named "postgres", "broker"
FAULT_WEIGHTS = {
    "kill9": 28,
    "term": 16,
    "restart": 16,
    "flushall": 6,
    "listener_down": 8,
    "pause": 14,
    "burst": 12,
}


def _recurring(rng: random.Random, count: int) -> list[Recurring]:
    made = []
    for n in range(count):
        fail = rng.choice([0.0, 0.0, 0.15, 0.3])
        kinds = (
            ("a", {"interval": f"{rng.randint(15, 40)} s"}),
            ("p", {"period": f"{rng.randint(25, 50)} s", "cooldown": "5 s"}),
            # a DST zone: cron reads local time
            ("c", {"cron": "* * * * *", "tz": "Europe/Paris", "cron_max_duration": "40 s"}),
        )
        for prefix, schedule in kinds:
            made.append(Recurring(f"{prefix}{n}", schedule, round(rng.uniform(0.05, 1.5), 2), fail))
    return made


def make_plan(
    seed: int,
    scale: Scale,
    *,
    processes: list[str],
    workers: list[str],
    listeners: list[str],
    flushable: bool,
) -> Plan:
    """The workload and the faults of one soak (see the module doc)."""
    rng = random.Random(seed)
    span = scale.seconds
    oneshots = tuple(
        OneShot(
            f"o{n}",
            round(rng.uniform(2, span), 2),
            rng.choice([0.0, 0.1, 0.5, 2.0, 4.0]),
            rng.choice([None, None, "1 min"]),
        )
        for n in range(scale.oneshots)
    )
    jobs = []
    for n in range(scale.jobs):
        instants = tuple(sorted({rng.randint(3, int(span)) for _ in range(rng.randint(2, 5))}))
        replace_at = rng.uniform(0, span / 2) if rng.random() < 0.3 else None
        replaced_by: tuple[int, ...] = ()
        if replace_at is not None:
            # keep some, drop others, add new ones: all well after the
            # replacement (a minute, or a quarter of a short soak), and due
            # before the soak's end
            margin = int(min(60.0, span / 4))
            later = [t for t in instants if t > replace_at + margin]
            kept = [t for t in later if rng.random() < 0.5]
            added = {rng.randint(int(replace_at) + margin, int(span)) for _ in range(2)}
            replaced_by = tuple(sorted(set(kept) | added))
        callback = "rabbitmq" if n % 2 == 0 else "http"
        jobs.append(JobPlan(f"job-{n}", callback, instants, replace_at, replaced_by))
    weights = dict(FAULT_WEIGHTS)
    if not flushable:
        del weights["flushall"]
    faults = []
    at = rng.uniform(5, scale.mean_gap)
    while at < span:
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        target, seconds = _target(rng, kind, scale, processes, workers, listeners)
        faults.append(Fault(round(at, 1), kind, target, round(seconds, 1)))
        at += rng.uniform(0.5, 1.5) * scale.mean_gap
    return Plan(
        seed, scale, tuple(_recurring(rng, scale.recurring)), oneshots, tuple(jobs), tuple(faults)
    )


def _target(
    rng: random.Random,
    kind: str,
    scale: Scale,
    processes: list[str],
    workers: list[str],
    listeners: list[str],
) -> tuple[str, float]:
    if kind in ("kill9", "term"):
        return rng.choice(processes), rng.uniform(1, 6)  # down before its restart
    if kind == "restart":
        return rng.choice(["postgres", "broker"]), rng.uniform(2, 15)
    if kind == "flushall":
        return "broker", 0.0
    if kind == "listener_down":
        return rng.choice(listeners), rng.uniform(*scale.listener_down)
    if kind == "pause":
        return rng.choice(workers), rng.uniform(*scale.pause)
    return "workload", float(rng.randint(10, 30))  # burst: that many instants due at once


__all__ = [
    "FULL",
    "QUICK",
    "Fault",
    "JobPlan",
    "OneShot",
    "Plan",
    "Recurring",
    "Scale",
    "make_plan",
]
