"""The soak's history checker: what the bodies and the receivers did,
against what the scheduler recorded.

Ground truth: the probe bodies' own notes (:mod:`soakapp`: one execution =
one start in one process, with its run, process, parent, fencing token,
and its end or stop), the receivers' deliveries of the jobs' callbacks
(:mod:`soakjobs`), and the soak's journal of signals and outages
(:mod:`soaklife`). The store's records are what is checked, never the
measure. The checks, per installation:

1. **executions**: each is counted by itself (never merged by run id): a run
   executed twice, or a token granted to two executions, is a double; every
   execution belongs to a run the guard started under its token for its
   worker (the ``assigned`` entry), and starts no earlier than the instant
   its run was due (its ``slot``, on the database's clock: a runner whose
   clock is off must not start anything early); every execution ends,
   stops, or died with its process;
2. **runs against bodies**: a run recorded good has a body that ended so,
   and whose completion was accepted; a failed run, a body that failed; a
   superseded run, a stale end of the same outcome; a lost run whose body
   had ended needs the chain of :func:`soakproof.end_unrecorded`; a body of
   a recurring task that made its side effect after its run was taken is a
   double (the task runs again for that instant);
3. **every due instant done once**: a one-shot's completions are its bodies
   that made their side effect (their ``self.fence.check()`` passed and they
   ended well), whether the probe's own register took the write or not, and
   whenever they came: exactly one. A second one is a double unless
   :func:`soakproof.ran_again` shows the first's end died with its process
   before anything could record it (counted apart, by name: see the
   randomized soak in ``tests/faults/README.md`` for why that one
   excuse stays);
4. **one copy at a time**: two executions of a task never run at once
   (stopped time excluded), unless the older is a stale copy proven
   harmless (:func:`soakproof.stale_copy`; counted, with how long it ran on);
5. **nothing stuck**: no run open, no task ready and not dispatched, for
   longer than a bound once the faults are over;
6. **conditions consistent with the history**: no task in ERROR, unless
   its bodies explain it (:func:`failed_on_purpose`: every run since its
   last good one is a body that failed on purpose, the first dispatched
   before the freshness it missed was due); a task's latest run failed
   exactly when its condition says so.

Anything not proven is a failure, named by its kind (``doubled``,
``overlap``, ``lost``, ``wrong record``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from soaklife import INF, Life
from soakplan import Timeouts, outcome_of
from soakproof import (
    STOPS,
    Execution,
    Proof,
    Unproven,
    assigned,
    end_unrecorded,
    ran_again,
    stale_copy,
    stale_end,
    taken_at,
)

from swh_like_scheduler.domain.model import (
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
)
from swh_like_scheduler.intake.jobs import JobView
from swh_like_scheduler.policy import start_times
from swh_like_scheduler.policy.condition import Condition, Reason, condition
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter

#: how long past its promise a recurring task may be when the soak stops
#: dispatching (a run due at that moment is under way or queued)
STALE_BOUND = timedelta(minutes=1)
_GOOD = {"eventful": RunStatus.EVENTFUL, "uneventful": RunStatus.UNEVENTFUL}
#: the runs that neither renew a task's freshness nor count as its failures
_NOT_OUTCOMES = (RunStatus.LOST, RunStatus.CANCELLED, RunStatus.SUPERSEDED)
DOUBLED, OVERLAP, LOST, WRONG = "doubled", "overlap", "lost", "wrong record"
EARLY = "early"
#: how early a body may seem to start: the database's clock as a daemon
#: measures it (a round trip's midpoint) against the body's, on one machine
EARLY_SLACK = 1.0


@dataclass
class Records:
    """What one installation's store holds at the end."""

    tasks: dict[int, Task]
    runs: list[TaskRun]
    types: dict[str, TaskType]
    jobs: dict[str, JobView] = field(default_factory=dict)

    def by_backend(self) -> dict[str, TaskRun]:
        return {run.backend_id: run for run in self.runs}


def read_records(store: SQLAlchemyStore, job_keys: Sequence[str] = ()) -> Records:
    from swh_like_scheduler.store import rows
    from swh_like_scheduler.store.tables import task_run

    tasks: dict[int, Task] = {}
    after = 0
    while page := store.search_tasks(TaskFilter(), after_id=after, limit=1000):
        tasks.update({t.id or 0: t for t in page})
        after = page[-1].id or 0
    with store.engine.connect() as conn:
        runs = [rows.run_from_row(r._mapping) for r in conn.execute(task_run.select())]
    jobs = {}
    for key in job_keys:
        view = store.get_job(key)
        assert view is not None, key
        jobs[key] = view
    return Records(tasks, runs, {t.type: t for t in store.get_task_types()}, jobs)


@dataclass
class Verdict:
    """What the checker found; :attr:`failures` must be empty."""

    due: int = 0
    delivered: int = 0
    #: due instants whose good run published its notification and the
    #: broker then lost it (emptied before the receiver read it): the
    #: platform did its work once; the fault destroyed its output
    output_lost: int = 0
    executions: int = 0
    failures: list[str] = field(default_factory=list)
    #: failures by kind (doubled, overlap, lost, wrong record)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: disagreements a fault explains, by the name of their chain
    explained: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    #: stale copies proven harmless beside a newer one, and the longest one ran on
    stale: list[str] = field(default_factory=list)
    stale_seconds: float = 0.0
    #: executions told their run was taken while they worked (stopped), side
    #: effects refused by ``self.fence.check()``, and side effects made that the
    #: probe's own register refused (each one counted as a completion)
    told: int = 0
    refused: int = 0
    register_refused: int = 0

    def fail(self, kind: str, text: str) -> None:
        self.counts[kind] += 1
        self.failures.append(f"{kind}: {text}")

    def explain(self, proof: Proof) -> None:
        self.explained[proof.kind].append(proof.text)

    def table(self) -> dict[str, Any]:
        return {
            "due instants": self.due,
            "delivered once": self.delivered,
            "output lost by the broker": self.output_lost,
            "bodies": self.executions,
            "doubled": self.counts[DOUBLED],
            "overlapping": self.counts[OVERLAP],
            "lost": self.counts[LOST],
            "started early": self.counts[EARLY],
            "failures": len(self.failures),
            "stale copies told (RunTaken, LeaseLost)": self.told,
            "side effects refused by fence.check()": self.refused,
            "side effects the probe's register refused (counted)": self.register_refused,
            "stale copies beside a newer one (harmless)": len(self.stale),
            "stale copy ran on s": round(self.stale_seconds, 2),
            "explained by a fault": {k: len(v) for k, v in sorted(self.explained.items())},
        }


def executions_of(notes: list[dict[str, Any]], life: Life) -> list[Execution]:
    """The executions the notes tell of; one that left no note after its
    start died when its worker was killed, if it was (after it started)."""
    found: dict[str, Execution] = {}
    for note in notes:
        kind, key = note.get("kind"), str(note.get("exec"))
        if kind == "start":
            found[key] = Execution(
                exec=key,
                tid=str(note["tid"]),
                task=int(note["task"]),
                token=int(note["token"]),
                run=str(note["run"]),
                worker=str(note["worker"]),
                pid=int(note["pid"]),
                ppid=int(note["ppid"]),
                start=float(note["t"]),
            )
        elif key in found and found[key].how == "running":
            execution = found[key]
            execution.left, execution.how = float(note["t"]), str(kind)
            execution.outcome = note.get("outcome")
            execution.accepted = note.get("accepted")
            execution.why = note.get("why")
            execution.where = note.get("where")
    for execution in found.values():
        incarnation = life.of(execution.ppid)
        if execution.how == "running" and incarnation is not None:
            killed = incarnation.killed
            if killed is not None and killed >= execution.start:
                execution.died = killed
    return sorted(found.values(), key=lambda e: e.start)


def active(execution: Execution, life: Life) -> list[tuple[float, float]]:
    """When ``execution`` could execute: from its start to its finish, less
    the time its worker's process group was stopped."""
    spans = [(execution.start, execution.finish)]
    incarnation = life.of(execution.ppid)
    for stop_start, stop_end in incarnation.group_stops if incarnation else []:
        cut = []
        for a, b in spans:
            if stop_end <= a or stop_start >= b:
                cut.append((a, b))
                continue
            if a < stop_start:
                cut.append((a, stop_start))
            if stop_end < b:
                cut.append((stop_end, b))
        spans = cut
    return spans


def overlap(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in first for c, d in second)


class Checker:
    """One installation's history (module doc)."""

    def __init__(
        self,
        records: Records,
        life: Life,
        timeouts: Timeouts,
        *,
        work_type: str,
        wipes_lose_messages: bool = False,
        name: str = "",
    ) -> None:
        self.records = records
        self.life = life
        self.t = timeouts
        self.work_type = work_type
        self.wipes_lose_messages = wipes_lose_messages
        self.name = name
        self.runs = records.by_backend()
        self.verdict = Verdict()

    def check(
        self,
        notes: list[dict[str, Any]],
        tids: dict[int, str],
        now: datetime,
        deliveries: dict[str, list[dict[str, Any]]] | None = None,
    ) -> Verdict:
        self.check_bodies(notes, tids)
        if deliveries is not None:
            from soakjobs import check_jobs

            check_jobs(self, deliveries)
        self.check_stuck(now)
        self.check_conditions(now)
        return self.verdict

    def check_bodies(self, notes: list[dict[str, Any]], tids: dict[int, str]) -> Verdict:
        """Checks 1 to 4: the probe's executions against the runs."""
        executions = executions_of(notes, self.life)
        self.verdict.executions = len(executions)
        self.verdict.told = sum(
            e.how == "stopped" and e.why in STOPS and not e.refused for e in executions
        )
        self.verdict.refused = sum(e.refused for e in executions)
        self.verdict.register_refused = sum(e.good and e.accepted is False for e in executions)
        self.check_executions(executions)
        self.check_runs(executions)
        self.check_oneshots(executions, tids)
        self.check_overlaps(executions)
        return self.verdict

    # -- 1. executions ------------------------------------------------------------

    def check_executions(self, executions: list[Execution]) -> None:
        per_run: dict[str, list[Execution]] = defaultdict(list)
        per_token: dict[tuple[int, int], list[Execution]] = defaultdict(list)
        for e in executions:
            per_run[e.run].append(e)
            per_token[(e.task, e.token)].append(e)
            self.check_started(e)
        for run_id, found in per_run.items():
            if len(found) > 1:
                starts = ", ".join(f"process {e.pid} at {e.start:.1f}" for e in found)
                self.verdict.fail(
                    DOUBLED, f"{found[0].tid}: run {run_id} executed {len(found)} times ({starts})"
                )
        for (task, token), found in per_token.items():
            if len({e.run for e in found}) > 1:
                runs = ", ".join(e.run for e in found)
                self.verdict.fail(DOUBLED, f"task {task}: token {token} given to runs {runs}")

    def check_started(self, e: Execution) -> None:
        """The execution belongs to a run the guard started for it."""
        run = self.runs.get(e.run)
        where = f"{e.tid}: the body of {e.name()}"
        if run is None:
            self.verdict.fail(WRONG, f"{where}: no such run in the store")
            return
        entry = assigned(run, e.token)
        if run.task_id != e.task or entry is None:
            self.verdict.fail(WRONG, f"{where}: the guard never started it under that token")
        elif entry.get("pid") not in (e.ppid, e.pid):
            self.verdict.fail(
                WRONG, f"{where}: started for process {entry.get('pid')}, ran under {e.ppid}"
            )
        if e.finish == INF:
            self.verdict.fail(
                WRONG,
                f"{where}: never ended, and its worker was not killed (started {e.start:.1f})",
            )
        due = run.slot.timestamp()
        if e.start < due - EARLY_SLACK:
            skewed = [
                f"{i.name} with its clock {i.skew:+.0f} s"
                for i in self.life.skewed(run.scheduled.timestamp() - 5, e.start)
            ]
            why = f" (then: {', '.join(skewed)})" if skewed else ""
            self.verdict.fail(
                EARLY,
                f"{where}: started {due - e.start:.1f} s before its run was due "
                f"(at {due:.1f}){why}",
            )

    # -- 2. runs against bodies ---------------------------------------------------

    def check_runs(self, executions: list[Execution]) -> None:
        by_run: dict[str, list[Execution]] = defaultdict(list)
        for e in executions:
            by_run[e.run].append(e)
        for run in self.records.runs:
            task = self.records.tasks.get(run.task_id)
            if task is None or task.type != self.work_type:
                continue
            bodies = by_run.get(run.backend_id, [])
            what = f"{task.kwargs.get('tid')} run {run.backend_id} ({run.status})"
            if task.schedule_kind is not ScheduleKind.ONESHOT:
                self.check_taken_effects(what, run, bodies)
            if run.status.is_good:
                if not bodies:
                    guard = "a start" if assigned(run, run.fence) else "no start of the guard"
                    self.verdict.fail(
                        WRONG, f"{what}: recorded good by {run.worker}, no body ran ({guard})"
                    )
                elif not any(
                    e.good and e.accepted and _GOOD[e.outcome or ""] is run.status for e in bodies
                ):
                    hows = ", ".join(f"{e.how} {e.outcome or e.why or ''}" for e in bodies)
                    self.verdict.fail(WRONG, f"{what}: its body did not end so ({hows})")
            elif run.status is RunStatus.FAILED:
                if not any(e.how == "end" and e.outcome == "failed" for e in bodies):
                    hows = ", ".join(f"{e.how} {e.outcome or e.why or ''}" for e in bodies)
                    self.verdict.fail(WRONG, f"{what}: recorded failed, its body did not ({hows})")
            elif run.status is RunStatus.SUPERSEDED:
                self.check_superseded(what, run, bodies)
            elif run.status is RunStatus.LOST:
                self.check_lost(what, run, bodies)
            elif bodies and not run.status.is_open:
                self.verdict.fail(WRONG, f"{what}: a body ran for it")

    def check_taken_effects(self, what: str, run: TaskRun, bodies: list[Execution]) -> None:
        """A recurring task's body that made its side effect after its run
        was taken: the task runs again for that instant, a second side
        effect (a one-shot's are counted in :meth:`check_oneshots`)."""
        taken = taken_at(run)
        if taken is None:
            return
        for e in bodies:
            if e.good and e.finish > taken:
                register = " (the probe's register refused it)" if e.accepted is False else ""
                self.verdict.fail(
                    DOUBLED,
                    f"{what}: {e.name()} made its side effect at {e.finish:.1f}, after its "
                    f"run was taken at {taken:.1f}{register}",
                )

    def check_superseded(self, what: str, run: TaskRun, bodies: list[Execution]) -> None:
        entry = stale_end(run)
        said = entry.get("status") if entry else None
        for e in bodies:
            if e.how == "end":
                expected = str(_GOOD.get(e.outcome or "", RunStatus.FAILED))
            elif e.how == "stopped":
                expected = str(RunStatus.FAILED)
            else:
                continue
            if said != expected:
                self.verdict.fail(WRONG, f"{what}: its stale end says {said}, its body {expected}")

    def check_lost(self, what: str, run: TaskRun, bodies: list[Execution]) -> None:
        for e in bodies:
            if e.how == "stopped" and e.why in STOPS:
                continue  # told its run was taken: nothing to record
            if e.how == "running" and e.died is not None:
                continue  # died with its worker: nothing to record
            if e.how == "stopped":
                self.verdict.fail(WRONG, f"{what}: its body was stopped by {e.why}")
                continue
            taken = taken_at(run)
            if taken is not None and e.finish >= taken:
                continue  # a stale copy's end: the run was taken before it came
            try:
                kind, at, taken = end_unrecorded(e.finish, e.ppid, run, self.life, self.t)
            except Unproven as why:
                self.verdict.fail(WRONG, f"{what}: its body ended {e.outcome}: {why}")
                continue
            self.verdict.explain(
                Proof(
                    f"end lost with its process ({kind.split(' (')[0]})",
                    f"{what}: ended {e.outcome} at {e.finish:.1f}, {kind} at {at:.1f}, "
                    f"run taken at {taken:.1f}",
                )
            )

    # -- 3. one-shots: done once ----------------------------------------------------

    def check_oneshots(self, executions: list[Execution], tids: dict[int, str]) -> None:
        done: dict[int, list[Execution]] = defaultdict(list)
        everything: dict[int, list[Execution]] = defaultdict(list)
        for e in executions:
            everything[e.task].append(e)
            if e.good:  # its side effect made, whatever the register said
                done[e.task].append(e)
        for task_id, tid in tids.items():
            task = self.records.tasks.get(task_id)
            if task is None or task.schedule_kind is not ScheduleKind.ONESHOT:
                continue
            self.verdict.due += 1
            completions = done.get(task_id, [])
            if len(completions) == 1:
                self.verdict.delivered += 1
            elif not completions:
                self.verdict.fail(LOST, f"{tid} (task {task_id}): never completed ({task.status})")
            else:
                self.twice(tid, completions, everything[task_id])

    def twice(self, tid: str, completions: list[Execution], executions: list[Execution]) -> None:
        proofs = []
        for first in completions[:-1]:
            later = [e for e in executions if e.token > first.token]
            nxt = min(later, key=lambda e: e.token) if later else None
            try:
                proofs.append(
                    ran_again(
                        first.finish,
                        first.ppid,
                        self.runs.get(first.run),
                        self.runs.get(nxt.run) if nxt else None,
                        self.life,
                        self.t,
                    )
                )
            except Unproven as why:
                runs = ", ".join(f"{e.name()} at {e.finish:.1f}" for e in completions)
                self.verdict.fail(
                    DOUBLED, f"{tid}: completed {len(completions)} times ({runs}): {why}"
                )
                return
        self.verdict.delivered += 1
        for proof in proofs:
            self.verdict.explain(Proof(proof.kind, f"{tid}: {proof.text}"))

    # -- 4. one copy at a time --------------------------------------------------

    def check_overlaps(self, executions: list[Execution]) -> None:
        per_task: dict[int, list[Execution]] = defaultdict(list)
        for e in executions:
            per_task[e.task].append(e)
        for found in per_task.values():
            spans = {e.exec: active(e, self.life) for e in found}
            for n, a in enumerate(found):  # sorted by start
                for b in found[n + 1 :]:
                    if b.start >= a.finish:
                        continue
                    together = overlap(spans[a.exec], spans[b.exec])
                    if together <= 0:
                        continue
                    self.excuse_overlap(a, b, together)

    def excuse_overlap(self, a: Execution, b: Execution, together: float) -> None:
        older, newer = (a, b) if a.token < b.token else (b, a)
        try:
            proof = stale_copy(
                older,
                newer,
                self.runs.get(older.run),
                self.runs.get(newer.run),
                self.life,
                self.t,
            )
        except Unproven as why:
            self.verdict.fail(
                OVERLAP,
                f"{a.tid}: {a.name()} and {b.name()} executed together for {together:.2f} s "
                f"({a.start:.1f}..{a.finish:.1f} and {b.start:.1f}..{b.finish:.1f}): {why}",
            )
            return
        self.verdict.stale.append(proof.text)
        self.verdict.stale_seconds = max(self.verdict.stale_seconds, together)

    # -- 5. nothing stuck -----------------------------------------------------------

    def check_stuck(self, now: datetime) -> None:
        bound = timedelta(minutes=2)
        for run in self.records.runs:
            if run.status.is_open and run.scheduled < now - bound:
                self.verdict.fail(
                    WRONG,
                    f"run {run.backend_id} of task {run.task_id} open since "
                    f"{run.scheduled.isoformat()} ({run.status})",
                )
        for task in self.records.tasks.values():
            if task.status is TaskStatus.WAITING and task.next_run < now - bound:
                self.verdict.fail(
                    WRONG, f"task {task.id} ready since {task.next_run.isoformat()} and not run"
                )

    # -- 6. conditions ----------------------------------------------------------------

    def check_conditions(self, now: datetime) -> None:
        types = self.records.types
        latest: dict[int, TaskRun] = {}
        for run in self.records.runs:
            if run.ended is None or run.status in _NOT_OUTCOMES:
                continue
            known = latest.get(run.task_id)
            if known is None or run.ended > (known.ended or run.ended):
                latest[run.task_id] = run
        for task in self.records.tasks.values():
            times = start_times(task, types[task.type], now)
            report = condition(task, types[task.type], now, times=times)
            if report.level is Condition.ERROR:
                late = now - (times.finish_by or now)
                if late > STALE_BOUND or task.schedule_kind is ScheduleKind.ONESHOT:
                    proof = failed_on_purpose(task, self.records.runs, times.finish_by)
                    if proof is not None:
                        self.verdict.explain(proof)
                    else:
                        self.verdict.fail(WRONG, f"task {task.id} in ERROR: {report.detail}")
                continue
            last = latest.get(task.id or 0)
            failed = last is not None and last.status is RunStatus.FAILED
            says_failed = report.reason is Reason.LAST_RUN_FAILED
            if task.status is TaskStatus.WAITING and failed and report.level is Condition.OK:
                self.verdict.fail(
                    WRONG, f"task {task.id}: its last run failed, its condition is OK"
                )
            if says_failed and not failed:
                self.verdict.fail(WRONG, f"task {task.id}: says its last run failed; it did not")


#: the kind, in the table, of an ERROR the task's own bodies explain
FAILED_ON_PURPOSE = "failed on purpose"


def failed_on_purpose(
    task: Task, runs: Sequence[TaskRun], promised: datetime | None
) -> Proof | None:
    """The proof that a recurring task is in ERROR because its probe bodies
    failed, as its ``fail_rate`` told them to, and not because the platform
    left it undispatched: every run that ended since its last good one
    failed, each is a body whose outcome (:func:`soakplan.outcome_of`, drawn
    again from the run's id) is ``failed``, and the first of them started
    before ``promised``, the end of the freshness it missed. None when any
    link does not hold."""
    rate = float(task.kwargs.get("fail_rate", 0.0))
    if task.schedule_kind is ScheduleKind.ONESHOT or rate <= 0 or promised is None:
        return None
    ended = sorted(
        (
            (r.ended, r)
            for r in runs
            if r.task_id == task.id and r.ended is not None and r.status not in _NOT_OUTCOMES
        ),
        key=lambda pair: pair[0],
    )
    last_good = max((at for at, r in ended if r.status in _GOOD.values()), default=None)
    since = [r for at, r in ended if last_good is None or at > last_good]
    if not since or any(
        r.status is not RunStatus.FAILED or outcome_of(r.backend_id, rate) != "failed"
        for r in since
    ):
        return None
    first = since[0].started
    if first is None or first > promised:
        return None
    return Proof(
        FAILED_ON_PURPOSE,
        f"task {task.id}: the {len(since)} runs since its last good one are bodies that "
        f"failed on purpose (fail rate {rate}); the first started at {first.isoformat()}, "
        f"before its freshness ran out at {promised.isoformat()}",
    )


def utcnow() -> datetime:
    return datetime.now(UTC)
