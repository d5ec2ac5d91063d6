"""The soak's plan, drawn from one seed: the workload and the faults.

Nothing here touches a server: :func:`make_plan` is a pure function of the
seed, the scale and the names of the processes and servers, so a failing
run is replayed by its seed (printed with the fault schedule).

The stalls are drawn longer than every bound the platform has to notice a
silent process (:data:`TIMEOUTS`: the monitor's ping timeout plus its grace,
the worker timeout), so that each one ends with the run taken away, or
(when only a worker's main process stops) with nothing taken; so is a
worker's partition from the database. Every fault kind the plan can draw at
its scale appears at least once.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Timeouts:
    """The bounds the soak's platform runs with (seconds): the checker's
    proofs are written in these terms."""

    #: a body's process renews its run this often (``swh_scheduler_lease_ping``)
    beat: float = 2.0
    #: the monitor puts a copy silent this long on notice (``--ping-timeout``) ...
    ping_timeout: float = 8.0
    #: ... and takes its run this long later (``--grace``)
    grace: float = 8.0
    #: a worker silent this long is offline (``--worker-timeout``)
    worker_timeout: float = 10.0
    #: a worker that said it went offline has this long (``--offline-grace``)
    offline_grace: float = 10.0
    #: how late a told body may stop: the exception's delivery (a 0.05 s
    #: step), a database round trip, a busy machine's scheduling
    slack: float = 3.0

    @property
    def silent(self) -> float:
        """How long a copy must stay silent before its run is taken."""
        return self.ping_timeout + self.grace

    @property
    def record_after(self) -> float:
        """A body's end not recorded this long after it is written by the
        worker itself (3 beats: the heartbeat's default)."""
        return 3 * self.beat

    @property
    def recorded_within(self) -> float:
        """The latest a body's end is recorded while the database is up: by
        the worker itself at its first beat after :attr:`record_after`."""
        return self.record_after + self.beat + self.slack


TIMEOUTS = Timeouts()


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
    #: seconds a worker's main process, or its whole group, stays stopped:
    #: longer than the monitor's bounds (:data:`TIMEOUTS`)
    stall: tuple[float, float] = (22.0, 30.0)
    #: seconds a runner stays stopped, longer than a claim may be held (a
    #: minute); ``None``: not drawn (it does not fit the scale)
    runner_pause: tuple[float, float] | None = None
    #: seconds a second worker process runs under a worker's name
    twin: tuple[float, float] = (15.0, 30.0)
    #: seconds a probe worker is cut off from PostgreSQL alone (its broker
    #: reachable): longer than the monitor's ping timeout and grace
    partition: tuple[float, float] = (20.0, 30.0)
    #: seconds a runner runs with its clock moved (libfaketime), and by how
    #: much (seconds, ahead or behind)
    skewed: tuple[float, float] = (20.0, 40.0)
    skew: tuple[int, int] = (30, 120)
    #: the second installation's one-shots and recurring tasks of each kind
    other_oneshots: int = 6
    other_recurring: int = 1
    #: one-shots whose body works for a while (a stalled worker is caught
    #: with one under way, and its new copy still runs when it resumes)
    long_oneshots: int = 6
    long_duration: tuple[float, float] = (8.0, 20.0)


#: the suite's cut: 40 s of faults (each stall still outlasts the monitor's
#: bounds; the faults that wait for their moment push the end later)
QUICK = Scale(seconds=40, mean_gap=11, recurring=4, oneshots=25, jobs=6)
FULL = Scale(
    seconds=1800,
    mean_gap=38,
    recurring=15,
    oneshots=400,
    jobs=60,
    pause=(10.0, 45.0),
    listener_down=(60.0, 180.0),
    stall=(22.0, 60.0),
    runner_pause=(70.0, 100.0),
    twin=(20.0, 90.0),
    partition=(20.0, 60.0),
    skewed=(60.0, 240.0),
    other_oneshots=60,
    other_recurring=2,
    long_oneshots=60,
    long_duration=(10.0, 30.0),
)


def outcome_of(backend_id: str, fail_rate: float) -> str:
    """``failed``, ``eventful`` or ``uneventful``: the same for a run every time
    (the probe body's outcome, drawn from its run's id; the checker draws it
    again to tell a body that failed on purpose)."""
    digest = hashlib.md5(backend_id.encode(), usedforsecurity=False).hexdigest()
    draw = int(digest[:8], 16) / 2**32
    if draw < fail_rate:
        return "failed"
    return "eventful" if draw < fail_rate + (1 - fail_rate) / 2 else "uneventful"


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
    lasting ``seconds`` (down time, pause, ...); ``offset``: the seconds a
    ``skewed_runner``'s clock is moved by (ahead when positive)."""

    at: float
    kind: str
    target: str
    seconds: float = 0.0
    offset: int = 0

    def describe(self) -> str:
        if self.kind == "burst":
            return f"t+{self.at:6.1f}s burst: {self.seconds:.0f} one-shots due at once"
        lasting = f" for {self.seconds:.0f} s" if self.seconds else ""
        clock = f" (its clock {self.offset:+d} s)" if self.offset else ""
        return f"t+{self.at:6.1f}s {self.kind} {self.target}{clock}{lasting}"


@dataclass(frozen=True)
class Plan:
    seed: int
    scale: Scale
    recurring: tuple[Recurring, ...]
    oneshots: tuple[OneShot, ...]
    jobs: tuple[JobPlan, ...]
    faults: tuple[Fault, ...] = field(default=())
    #: the second installation's workload (its own database, the same broker)
    other_recurring: tuple[Recurring, ...] = ()
    other_oneshots: tuple[OneShot, ...] = ()

    def describe(self) -> str:
        lines = [
            f"soak seed {self.seed}: {len(self.recurring)} recurring, {len(self.oneshots)} "
            f"one-shot, {len(self.jobs)} jobs (second installation: "
            f"{len(self.other_recurring)} recurring, {len(self.other_oneshots)} one-shot); "
            f"{len(self.faults)} faults over {self.scale.seconds:.0f} s:"
        ]
        return "\n".join(lines + [f"  {f.describe()}" for f in self.faults])


#: fault kinds and their weights; servers are named "postgres", "broker".
#: ``pause``: a worker's process group stopped (SIGSTOP) for a while, maybe
#: shorter than the monitor's bounds; ``stall_main``: a worker's main process
#: alone stopped, its pool going on; ``stall_worker``: its whole group
#: stopped, both longer than every bound (with a body under way that has a
#: while to go); ``stall_resume``: the same, caught when a body has little
#: work left, so that it finishes right after it resumes (its side effect
#: must be refused); ``runner_pause``: a runner stopped longer than a claim
#: may be held (caught inside a transaction when it can be); ``twin``: a
#: second worker process under a live worker's name; ``skewed_runner``: a
#: runner restarted under libfaketime, its clock ahead or behind, then
#: restarted on true time; ``db_partition``: a probe worker cut off from
#: PostgreSQL alone (its connections' proxy frozen, the broker reachable)
#: longer than the monitor's ping timeout and grace
FAULT_WEIGHTS = {
    "kill9": 28,
    "term": 16,
    "restart": 16,
    "flushall": 6,
    "listener_down": 8,
    "pause": 14,
    "burst": 12,
    "stall_main": 8,
    "stall_worker": 8,
    "runner_pause": 4,
    "twin": 6,
    "stall_resume": 8,
    "db_partition": 8,
    "skewed_runner": 6,
}
#: kinds every plan holds at least once when its scale allows them (added
#: at drawn instants when the draw did not make them)
REQUIRED = (
    "stall_main",
    "stall_worker",
    "runner_pause",
    "twin",
    "stall_resume",
    "db_partition",
    "skewed_runner",
)
#: the kinds that hit a probe worker (its bodies leave notes)
ON_PROBES = ("stall_worker", "stall_resume", "db_partition")
#: the second installation starts in the first part of the soak and runs to its end
OTHER = "second_install"


def _recurring(rng: random.Random, count: int, prefix: str = "") -> list[Recurring]:
    made = []
    for n in range(count):
        fail = rng.choice([0.0, 0.0, 0.15, 0.3])
        kinds = (
            ("a", {"interval": f"{rng.randint(15, 40)} s"}),
            ("p", {"period": f"{rng.randint(25, 50)} s", "cooldown": "5 s"}),
            # a DST zone: cron reads local time
            ("c", {"cron": "* * * * *", "tz": "Europe/Paris", "cron_max_duration": "40 s"}),
        )
        for kind, schedule in kinds:
            tid = f"{prefix}{kind}{n}"
            made.append(Recurring(tid, schedule, round(rng.uniform(0.05, 1.5), 2), fail))
    return made


def make_plan(
    seed: int,
    scale: Scale,
    *,
    processes: list[str],
    workers: list[str],
    listeners: list[str],
    runners: list[str],
    flushable: bool,
    skewable: bool = True,
) -> Plan:
    """The workload and the faults of one soak (see the module doc);
    ``skewable``: a runner's clock may be moved (libfaketime is there)."""
    rng = random.Random(seed)
    span = scale.seconds
    oneshots = _oneshots(rng, scale.oneshots, span)
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
    if scale.runner_pause is None:
        del weights["runner_pause"]
    if not skewable:
        del weights["skewed_runner"]
    targets = Targets(processes, workers, listeners, runners)
    faults = []
    at = rng.uniform(5, scale.mean_gap)
    while at < span:
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        faults.append(_fault(rng, at, kind, scale, targets))
        at += rng.uniform(0.5, 1.5) * scale.mean_gap
    for kind in REQUIRED:
        if kind in weights and all(f.kind != kind for f in faults):
            _ensure(rng, faults, kind, scale, targets)
    faults.append(Fault(round(rng.uniform(0, span / 5), 1), OTHER, "install-2"))
    faults.sort(key=lambda f: f.at)
    long = tuple(
        OneShot(
            f"l{n}",
            round(rng.uniform(2, max(span / 2, span - 60)), 2),  # done before the end
            round(rng.uniform(*scale.long_duration), 1),
        )
        for n in range(scale.long_oneshots)
    )
    return Plan(
        seed,
        scale,
        tuple(_recurring(rng, scale.recurring)),
        oneshots + long,
        tuple(jobs),
        tuple(faults),
        tuple(_recurring(rng, scale.other_recurring, "x")),
        _oneshots(rng, scale.other_oneshots, span, "x"),
    )


def _oneshots(rng: random.Random, count: int, span: float, prefix: str = "") -> tuple[OneShot, ...]:
    return tuple(
        OneShot(
            f"{prefix}o{n}",
            round(rng.uniform(2, span), 2),
            rng.choice([0.0, 0.1, 0.5, 2.0, 4.0]),
            rng.choice([None, None, "1 min"]),
        )
        for n in range(count)
    )


@dataclass(frozen=True)
class Targets:
    """The names a fault may hit."""

    processes: list[str]
    workers: list[str]
    listeners: list[str]
    runners: list[str]


def _ensure(
    rng: random.Random, faults: list[Fault], kind: str, scale: Scale, targets: Targets
) -> None:
    """Add one fault of ``kind`` at a drawn instant, so that it ends before
    the soak's faults do when it can."""
    target, seconds = _target(rng, kind, scale, targets)
    at = rng.uniform(5, max(5.0, scale.seconds - seconds))
    faults.append(_fault(rng, at, kind, scale, targets, (target, seconds)))


def _fault(
    rng: random.Random,
    at: float,
    kind: str,
    scale: Scale,
    targets: Targets,
    drawn: tuple[str, float] | None = None,
) -> Fault:
    target, seconds = drawn or _target(rng, kind, scale, targets)
    offset = 0
    if kind == "skewed_runner":
        offset = rng.choice((-1, 1)) * rng.randint(*scale.skew)
    return Fault(round(at, 1), kind, target, round(seconds, 1), offset)


def _target(rng: random.Random, kind: str, scale: Scale, targets: Targets) -> tuple[str, float]:
    if kind in ("kill9", "term"):
        return rng.choice(targets.processes), rng.uniform(1, 6)  # down before its restart
    if kind == "restart":
        return rng.choice(["postgres", "broker"]), rng.uniform(2, 15)
    if kind == "flushall":
        return "broker", 0.0
    if kind == "listener_down":
        return rng.choice(targets.listeners), rng.uniform(*scale.listener_down)
    if kind == "pause":
        return rng.choice(targets.workers), rng.uniform(*scale.pause)
    if kind == "stall_main":
        return rng.choice(targets.workers), rng.uniform(*scale.stall)
    if kind in ON_PROBES:  # a probe worker: its bodies leave notes
        probes = [w for w in targets.workers if w.startswith("work")] or targets.workers
        span = scale.partition if kind == "db_partition" else scale.stall
        return rng.choice(probes), rng.uniform(*span)
    if kind == "skewed_runner":
        return rng.choice(targets.runners), rng.uniform(*scale.skewed)
    if kind == "runner_pause":
        assert scale.runner_pause is not None
        return rng.choice(targets.runners), rng.uniform(*scale.runner_pause)
    if kind == "twin":
        return rng.choice(targets.workers), rng.uniform(*scale.twin)
    return "workload", float(rng.randint(10, 30))  # burst: that many instants due at once


__all__ = [
    "FULL",
    "ON_PROBES",
    "OTHER",
    "QUICK",
    "TIMEOUTS",
    "Fault",
    "JobPlan",
    "OneShot",
    "Plan",
    "Recurring",
    "Scale",
    "Targets",
    "Timeouts",
    "make_plan",
]
