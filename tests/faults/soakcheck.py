"""The soak's history checker: what the bodies and the receivers saw
against what the scheduler recorded.

Ground truth: the probe bodies' own notes (start, end, outcome), the HTTP
receiver's counts by ``Idempotency-Key`` and the notify consumer's counts by
``swh-key``. The checks:

1. **every due instant delivered exactly once**: each one-shot probe task
   ended one good body; each job instant still in its job was received once
   (an instant its job dropped, never);
2. **no body twice at once**: the bodies of one task never overlap;
3. **outcomes as they happened**: each body end's run is recorded with the
   body's outcome;
4. **nothing stuck**: no run open, and no task ready and not dispatched, for
   longer than a bound once the faults are over;
5. **conditions consistent with the history**: no task in ERROR; a task's
   latest run failed exactly when its condition says so.

Some disagreements are caused by a fault and cannot be avoided by any
scheduler: a body that ended a moment before its worker was killed with
SIGKILL (its report died with it, so the run is lost and runs again), a
notification the broker lost when it was emptied or restarted without
persistence before the consumer read it. Those are counted apart, each
naming the fault that explains it, and not as failures.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from soakplan import Fault

from swh_like_scheduler.jobs import idempotency_key, task_key
from swh_like_scheduler.model import RunStatus, ScheduleKind, Task, TaskRun, TaskStatus
from swh_like_scheduler.policy import start_times
from swh_like_scheduler.policy.condition import Condition, Reason, condition
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter

#: seconds after a body's end within which a SIGKILL of its worker explains
#: a lost report (events, result, acknowledgement not sent yet)
KILL_WINDOW = 10.0
#: seconds around a broker wipe within which a notification may be lost
WIPE_WINDOW = 5.0
#: how long past its promise a recurring task may be when the soak stops
#: dispatching (a run due at that moment is under way or queued)
STALE_BOUND = timedelta(minutes=1)
#: faults that end a worker's bodies under way: SIGKILL of its group, and
#: SIGTERM (a warm shutdown lets them end, unless it is cut short)
_STOPS = ("kill9", "term")
_GOOD = {"eventful": RunStatus.EVENTFUL, "uneventful": RunStatus.UNEVENTFUL}


@dataclass
class Verdict:
    """What the checker found; :attr:`failures` must be empty."""

    due: int = 0
    delivered: int = 0
    bodies: int = 0
    failures: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)

    def fail(self, text: str) -> None:
        self.failures.append(text)

    def table(self) -> dict[str, Any]:
        return {
            "due instants": self.due,
            "delivered": self.delivered,
            "bodies": self.bodies,
            "failures": len(self.failures),
            "explained by a fault": len(self.explained),
        }


def _worker_name(hostname: str) -> str:
    return hostname.split("@", 1)[0]


class Checker:
    def __init__(
        self,
        store: SQLAlchemyStore,
        faults: list[tuple[Fault, float, float]],
        *,
        wipes_lose_messages: bool,
    ) -> None:
        self.store = store
        self.faults = faults
        self.wipes_lose_messages = wipes_lose_messages
        self.verdict = Verdict()

    # -- explanations -----------------------------------------------------------

    def killed_after(self, worker: str, at: float) -> Fault | None:
        """A SIGKILL of ``worker`` (or a restart of a server its report
        needed) within :data:`KILL_WINDOW` after ``at``."""
        for fault, began, _ in self.faults:
            if fault.kind == "kill9" and fault.target == worker and at <= began <= at + KILL_WINDOW:
                return fault
        return None

    def wipe_near(self, at: float) -> Fault | None:
        if not self.wipes_lose_messages:
            return None
        for fault, began, _ in self.faults:
            wipe = fault.kind == "flushall" or (
                fault.kind == "restart" and fault.target == "broker"
            )
            if wipe and abs(began - at) <= WIPE_WINDOW:
                return fault
        return None

    # -- the checks ---------------------------------------------------------------

    def check(
        self,
        bodies: list[dict[str, Any]],
        http: dict[str, int],
        notify: dict[str, int],
        tids: dict[int, str],
        job_keys: list[str],
        now: datetime,
    ) -> Verdict:
        tasks = self.all_tasks()
        runs = self.all_runs()
        self.verdict.bodies = sum(1 for b in bodies if b["kind"] == "start")
        self.check_bodies(bodies, tasks, tids, runs)
        self.check_jobs(job_keys, http, notify, runs)
        self.check_stuck(tasks, runs, now)
        self.check_conditions(tasks, runs, now)
        return self.verdict

    def all_tasks(self) -> dict[int, Task]:
        found: dict[int, Task] = {}
        after = 0
        while page := self.store.search_tasks(TaskFilter(), after_id=after, limit=1000):
            found.update({t.id or 0: t for t in page})
            after = page[-1].id or 0
        return found

    def all_runs(self) -> dict[str, TaskRun]:
        from swh_like_scheduler.store import rows
        from swh_like_scheduler.store.tables import task_run

        with self.store.engine.connect() as conn:
            return {
                run.backend_id: run
                for run in (rows.run_from_row(r._mapping) for r in conn.execute(task_run.select()))
            }

    def check_bodies(
        self,
        bodies: list[dict[str, Any]],
        tasks: dict[int, Task],
        tids: dict[int, str],
        runs: dict[str, TaskRun],
    ) -> None:
        starts = {b["run"]: b for b in bodies if b["kind"] == "start"}
        ends = {b["run"]: b for b in bodies if b["kind"] == "end"}
        by_tid: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
        for run_id, start in starts.items():
            end = ends.get(run_id)
            worker = _worker_name(start["worker"])
            if end is not None:
                stop = end["t"]
            else:  # never ended: it died with its worker (or runs at the soak's end)
                stop = min(
                    (
                        b
                        for f, b, _ in self.faults
                        if f.kind in _STOPS and f.target == worker and b >= start["t"]
                    ),
                    default=float("inf"),
                )
            by_tid[start["tid"]].append((start["t"], stop, run_id))
        for tid, spans in by_tid.items():
            spans.sort()
            for (_, first_end, first), (second_start, _, second) in itertools.pairwise(spans):
                if second_start < first_end:
                    self.verdict.fail(f"{tid}: bodies of runs {first} and {second} overlap")
        # outcomes as they happened
        for run_id, end in ends.items():
            run = runs.get(run_id)
            expected = _GOOD.get(end["outcome"], RunStatus.FAILED)
            if run is not None and run.status is expected:
                continue
            recorded = run.status if run is not None else "no run"
            fault = self.killed_after(_worker_name(end["worker"]), end["t"])
            if fault is not None and run is not None and run.status is RunStatus.LOST:
                self.verdict.explained.append(
                    f"{end['tid']} run {run_id}: ended {end['outcome']}, recorded lost "
                    f"({fault.describe()})"
                )
                continue
            self.verdict.fail(
                f"{end['tid']} run {run_id}: the body ended {end['outcome']}, "
                f"the scheduler recorded {recorded}"
            )
        # one good body per one-shot probe task
        good = defaultdict(list)
        for end in ends.values():
            if end["outcome"] != "failed":
                good[end["tid"]].append(end)
        for task_id, tid in tids.items():
            task = tasks.get(task_id)
            if task is None or task.schedule_kind is not ScheduleKind.ONESHOT:
                continue
            self.verdict.due += 1
            done = good.get(tid, [])
            if len(done) == 1:
                self.verdict.delivered += 1
            elif not done:
                self.verdict.fail(f"{tid} (task {task_id}): never ran to its end ({task.status})")
            else:
                self.explain_twice(tid, done)

    def explain_twice(self, what: str, ends: list[dict[str, Any]]) -> None:
        for end in sorted(ends, key=lambda e: e["t"])[:-1]:
            fault = self.killed_after(_worker_name(end["worker"]), end["t"])
            if fault is None:
                self.verdict.fail(f"{what}: ran to its end {len(ends)} times")
                return
        self.verdict.delivered += 1
        self.verdict.explained.append(
            f"{what}: ran to its end {len(ends)} times, each earlier end followed by a SIGKILL "
            "of its worker before it could report"
        )

    def check_jobs(
        self,
        job_keys: list[str],
        http: dict[str, int],
        notify: dict[str, int],
        runs: dict[str, TaskRun],
    ) -> None:
        by_task: dict[int, TaskRun] = {}
        for run in runs.values():
            latest = by_task.get(run.task_id)
            if latest is None or run.scheduled > latest.scheduled:
                by_task[run.task_id] = run
        for key in job_keys:
            view = self.store.get_job(key)
            assert view is not None, key
            for instant in view.instants:
                rabbitmq = instant.task.type == "notify"
                counted = (
                    notify.get(task_key(key, instant.at), 0)
                    if rabbitmq
                    else http.get(idempotency_key(key, instant.at), 0)
                )
                what = f"job {key} at {instant.at.isoformat()}"
                if instant.task.status is TaskStatus.CANCELLED:
                    if counted:
                        self.verdict.fail(f"{what}: dropped from its job, delivered {counted}")
                    continue
                self.verdict.due += 1
                if counted == 1:
                    self.verdict.delivered += 1
                    continue
                run = by_task.get(instant.task.id or 0)
                ended = run.ended.timestamp() if run is not None and run.ended else None
                if counted == 0 and rabbitmq and ended is not None:
                    fault = self.wipe_near(ended)
                    if fault is not None:
                        self.verdict.explained.append(
                            f"{what}: published, then lost by the broker ({fault.describe()})"
                        )
                        continue
                if counted > 1 and run is not None and run.worker and ended is not None:
                    fault = self.killed_after(_worker_name(run.worker), ended - KILL_WINDOW)
                    if fault is not None:
                        self.verdict.delivered += 1
                        self.verdict.explained.append(
                            f"{what}: delivered {counted} times ({fault.describe()})"
                        )
                        continue
                self.verdict.fail(f"{what}: delivered {counted} times ({instant.task.status})")

    def check_stuck(self, tasks: dict[int, Task], runs: dict[str, TaskRun], now: datetime) -> None:
        bound = timedelta(minutes=2)
        for run in runs.values():
            if run.status.is_open and run.scheduled < now - bound:
                self.verdict.fail(
                    f"run {run.backend_id} of task {run.task_id} open since "
                    f"{run.scheduled.isoformat()} ({run.status})"
                )
        for task in tasks.values():
            if task.status is TaskStatus.WAITING and task.next_run < now - bound:
                self.verdict.fail(
                    f"task {task.id} ready since {task.next_run.isoformat()} and not dispatched"
                )

    def check_conditions(
        self, tasks: dict[int, Task], runs: dict[str, TaskRun], now: datetime
    ) -> None:
        types = {t.type: t for t in self.store.get_task_types()}
        latest: dict[int, TaskRun] = {}
        for run in runs.values():
            if run.ended is None or run.status in (RunStatus.LOST, RunStatus.CANCELLED):
                continue
            known = latest.get(run.task_id)
            if known is None or run.ended > (known.ended or run.ended):
                latest[run.task_id] = run
        for task in tasks.values():
            times = start_times(task, types[task.type], now)
            report = condition(task, types[task.type], now, times=times)
            if report.level is Condition.ERROR:
                late = now - (times.finish_by or now)
                if late > STALE_BOUND or task.schedule_kind is ScheduleKind.ONESHOT:
                    self.verdict.fail(f"task {task.id} in ERROR: {report.detail}")
                continue
            last = latest.get(task.id or 0)
            failed = last is not None and last.status is RunStatus.FAILED
            says_failed = report.reason is Reason.LAST_RUN_FAILED
            if task.status is TaskStatus.WAITING and failed and report.level is Condition.OK:
                self.verdict.fail(f"task {task.id}: its last run failed, its condition is OK")
            if says_failed and not failed:
                self.verdict.fail(f"task {task.id}: says its last run failed; it did not")


def utcnow() -> datetime:
    return datetime.now(UTC)
