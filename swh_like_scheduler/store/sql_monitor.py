"""The monitor duties: the store's half (DESIGN.md §4).

* the runs of workers that went away (the ``worker`` table is recorded by
  :mod:`.sql_workers`), ended ``lost`` through the same path as a stolen lease
  (:meth:`LeaseMethods._end_owned`: ``apply`` in the same transaction, the
  task runnable at once in a new slot);
* one-shot tasks that can no longer start in time although a runner pass
  that began after they could be claimed had room for them
  (``dispatch_room``: the instant each type and class's latest such pass
  began), disabled with a run that says why; and which ready tasks a pass
  left behind (rows another transaction held), so that it records no room;
* a named lock with an expiry on the database clock (``scheduler_lock``),
  taken and renewed with one conditional UPSERT.

Runs whose task is owned (a start guard let a copy through: every run of a
task type built on the worker's base class) are never ended here: the
process running the body renews them, and the steal protocol decides about
them (a restart under the worker's name only puts their copies on notice).
Only runs no guard took (a Celery task not built on the base class, known
from its ``task-started`` event) end with their worker.

Lock order is the listener's and the lease's (run row, then task row), and
run rows another transaction holds are skipped (PostgreSQL): a run being
ended by the listener right now is left to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import sqlalchemy as sa

from ..domain.enums import check_aware
from ..domain.exceptions import InvalidInput
from ..domain.model import (
    OPEN_RUN_STATUSES,
    PRIORITY_ORDER,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    run_backend_id,
)
from ..domain.records import (
    ASSIGNED,
    EXPIRED,
    EXPIRED_ERROR,
    MIN_WORKER_TIMEOUT,
    PINGED_LATE,
    WORKER_OFFLINE,
    Expiry,
    LockState,
    WorkerSweep,
    worker_timeout,
)
from ..policy import claimable_from, may_expire, start_times
from ..policy.times import fmt_duration, fmt_instant
from . import rows
from .interface import ApplyOutcome
from .sql_base import upsert_into
from .sql_claim import runnable_on
from .sql_identity import IdentityMethods
from .sql_lease import _TICK, LeaseMethods, _entry
from .tables import OPEN_RUN
from .tables import dispatch_room as room_t
from .tables import scheduler_lock as lock_t
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as task_type_t
from .tables import worker as worker_t

_OPEN = [s.value for s in OPEN_RUN_STATUSES]


class MonitorMethods(LeaseMethods, IdentityMethods):
    """Workers and their lost runs, one-shot expiry, the monitor's lock."""

    # -- workers --------------------------------------------------------------

    def end_worker_runs(
        self,
        worker: str,
        *,
        at: datetime,
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
        pid: int | None = None,
    ) -> list[TaskRun]:
        query = self._worker_runs_query(limit).where(run_t.c.worker == worker)
        with self._write("end the runs of an offline worker") as conn:
            found = [
                run
                for run in (rows.run_from_row(r._mapping) for r in conn.execute(query))
                if _before_or_other(run, at, pid)
            ]
            self._notice_copies(conn, worker, at, pid, limit)
            return self._lose_runs(
                conn,
                found,
                ended=at,
                apply=apply,
                error=f"its worker {worker} went offline (worker-offline event)",
                detail="worker-offline event",
            )

    def sweep_silent_workers(
        self,
        *,
        now: datetime,
        timeout: timedelta | None = None,
        offline_grace: timedelta = timedelta(0),
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
    ) -> WorkerSweep:
        if timeout is not None and timeout <= timedelta(0):
            raise InvalidInput("worker_timeout", f"{timeout} must be longer than zero")
        if offline_grace < timedelta(0):
            raise InvalidInput("offline_grace", f"{offline_grace} is negative")
        with self._write("sweep silent workers") as conn:
            online = conn.execute(
                self._lock(sa.select(worker_t).where(worker_t.c.online.is_(True)))
            ).all()
            silent = sorted(
                w.hostname
                for w in online
                if w.last_heartbeat_at < now - worker_timeout(w.freq, timeout)
            )
            if silent:
                conn.execute(
                    sa.update(worker_t).where(worker_t.c.hostname.in_(silent)).values(online=False)
                )
            # runs of offline workers (just marked, or before: an offline
            # event whose runs were locked at the time) that started before
            # the worker's last sign of life, or longer ago than its timeout
            # (a worker restarted under the same name keeps its new runs)
            bound = timeout if timeout is not None else MIN_WORKER_TIMEOUT
            query = (
                self._worker_runs_query(
                    limit, extra=(worker_t.c.last_heartbeat_at, worker_t.c.freq)
                )
                .join(worker_t, worker_t.c.hostname == run_t.c.worker)
                .where(worker_t.c.online.is_(False))
                .where(
                    sa.or_(
                        run_t.c.started.is_(None),
                        run_t.c.started <= worker_t.c.last_heartbeat_at,
                        run_t.c.started <= now - bound,
                    )
                )
            )
            found = []
            for row in conn.execute(query):
                run = rows.run_from_row(row._mapping)
                silence = worker_timeout(row.freq, timeout)
                # a warm shutdown says offline first, then finishes its runs:
                # they may report for the grace (or until the worker has been
                # silent for its timeout, which proves it gone)
                if row.last_heartbeat_at >= now - min(offline_grace, silence):
                    continue
                cutoff = now - silence
                if run.started is None or run.started <= max(row.last_heartbeat_at, cutoff):
                    found.append(run)
            lost = self._lose_runs(
                conn,
                found,
                ended=now,
                apply=apply,
                error="its worker stopped sending heartbeats (no heartbeat within the "
                "worker timeout)",
                detail="no heartbeat",
            )
        return WorkerSweep(marked_offline=tuple(silent), lost=tuple(lost))

    def _notice_copies(
        self, conn: sa.Connection, worker: str, at: datetime, pid: int | None, limit: int
    ) -> None:
        """The guarded runs the old process of ``worker`` took (a restart
        under its name): their copies are put on notice (the steal step's
        ``steal_start_at``), never ended here. A body still running (its
        pool process outlived the main process, or the name is another live
        process's) renews within the grace and keeps its run; a dead one's
        run is taken after the grace."""
        query = (
            sa.select(run_t)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .where(
                OPEN_RUN,
                run_t.c.worker == worker,
                task_t.c.owner_tag.is_not(None),
                task_t.c.steal_start_at.is_(None),
            )
            .order_by(run_t.c.id)
            .limit(limit)
        )
        if self._capabilities.skip_locked:  # run rows first, as every writer
            query = query.with_for_update(of=run_t, skip_locked=True)
        runs = [rows.run_from_row(r._mapping) for r in conn.execute(query)]
        runs = [run for run in runs if _before_or_other(run, at, pid)]
        if not runs:
            return
        now = self._db_now(conn)
        conn.execute(
            sa.update(task_t)
            .where(
                task_t.c.id.in_(sorted({run.task_id for run in runs})),
                task_t.c.steal_start_at.is_(None),
            )
            .values(
                steal_start_at=now,
                owner_last_ping_at=sa.func.coalesce(
                    task_t.c.owner_last_ping_at, task_t.c.owner_started_at
                ),
            )
        )
        for run in runs:
            detail = f"its worker {worker} came back as a new process; steal started"
            self._add_history(conn, run, _entry(PINGED_LATE, now, worker=run.worker, detail=detail))

    def _worker_runs_query(
        self, limit: int, extra: tuple[sa.ColumnElement[Any], ...] = ()
    ) -> sa.Select[Any]:
        """Open runs whose task has no owner (no start guard took them: the
        steal protocol decides about the others, from the renewals of the
        process running their body), oldest first, locked (run rows only;
        rows another transaction holds are skipped)."""
        query = (
            sa.select(run_t, *extra)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .where(OPEN_RUN, task_t.c.owner_tag.is_(None))
            .order_by(run_t.c.id)
            .limit(limit)
        )
        if self._capabilities.skip_locked:
            query = query.with_for_update(of=run_t, skip_locked=True)
        return query

    def _lose_runs(
        self,
        conn: sa.Connection,
        runs: list[TaskRun],
        *,
        ended: datetime,
        apply: ApplyOutcome | None,
        error: str,
        detail: str,
    ) -> list[TaskRun]:
        lost: list[TaskRun] = []
        for run in runs:
            task = self._lease_task(conn, run.task_id)  # locked, after its run
            if task is None or task.owner_tag is not None:
                continue  # a guard took it meanwhile: the steal protocol decides
            end = max(ended, run.started) if run.started is not None else ended
            done = self._end_owned(
                conn,
                run,
                status=RunStatus.LOST,
                now=end,
                error=error,
                entry=_entry(WORKER_OFFLINE, end, worker=run.worker, detail=detail),
                apply=apply,
                runnable_now=True,
                take=True,
            )
            if done is not None and done.status is RunStatus.LOST:
                lost.append(done)
        return lost

    # -- one-shot expiry --------------------------------------------------------

    def ready_left_behind(
        self,
        task_type: str,
        *,
        at: datetime,
        priorities: Sequence[Priority] | None = None,
        nodes: Sequence[str] | None = None,
    ) -> list[Priority]:
        check_aware("at", at)
        classes = [p for p in PRIORITY_ORDER if p in set(priorities or PRIORITY_ORDER)]
        runnable = runnable_on(self.engine.dialect.name, nodes)
        # one probe per class, each a range of ix_task_ready that stops at
        # the first match; a plain read: a row another transaction holds
        # is seen as it was committed (waiting), never waited for
        probes = [
            sa.exists().where(
                task_t.c.type == task_type,
                task_t.c.status == TaskStatus.WAITING.value,
                task_t.c.priority == priority.value,
                task_t.c.next_run <= at,
                task_t.c.updated_at <= at,
                runnable,
            )
            for priority in classes
        ]
        with self._read("find ready tasks a pass left behind") as conn:
            found = conn.execute(sa.select(*probes)).one()
        return [p for p, left in zip(classes, found, strict=True) if left]

    def record_room(
        self, task_type: str, *, at: datetime, priorities: Sequence[Priority] | None = None
    ) -> None:
        check_aware("at", at)
        classes = sorted({p.value for p in (priorities or PRIORITY_ORDER)})
        with self._write("record dispatch room") as conn:
            if self._type_paused(conn, task_type):
                return  # a pass claimed nothing because of the pause: no room
            conn.execute(
                _room_upsert(self.engine.dialect.name),
                [{"room_type": task_type, "room_class": c, "room_at": at} for c in classes],
            )

    def expire_oneshot_tasks(
        self, *, now: datetime, grace: timedelta = timedelta(0), limit: int = 1000
    ) -> list[Expiry]:
        if grace < timedelta(0):
            raise InvalidInput("oneshot_expiry_grace", f"{grace} is negative")
        never_dispatched = ~sa.exists().where(run_t.c.task_id == task_t.c.id)
        room = (
            sa.select(room_t.c.at)
            .where(room_t.c.task_type == task_t.c.type, room_t.c.priority == task_t.c.priority)
            .scalar_subquery()
        )
        query = (
            sa.select(task_t, room.label("room_at"))
            .where(
                task_t.c.schedule_kind == ScheduleKind.ONESHOT.value,
                task_t.c.status == TaskStatus.WAITING.value,
                task_t.c.max_delay.is_not(None),
                task_t.c.last_start_at.is_(None),
                task_t.c.last_end_at.is_(None),
                # necessary conditions, cheap to test: T <= should_start_by,
                # and the last pass with room began after the deadline, after
                # the task became ready and after its last write (creation,
                # enabling...): the policy's may_expire decides
                task_t.c.next_run < now - grace,
                room > task_t.c.deadline,
                room > task_t.c.next_run,
                room > task_t.c.updated_at,
                room > task_t.c.created_at,
                never_dispatched,
                # nothing of a paused type was dispatched: it expires nothing
                task_t.c.type.not_in(
                    sa.select(task_type_t.c.type).where(task_type_t.c.paused_at.is_not(None))
                ),
            )
            .order_by(task_t.c.deadline, task_t.c.id)
            .limit(limit)
        )
        expired: list[Expiry] = []
        with self._write("expire one-shot tasks") as conn:
            found = [
                (rows.task_from_row(r._mapping), r.room_at)
                for r in conn.execute(self._lock_skip(query))
            ]
            if not found:
                return []
            types = {
                t.type: t
                for t in (
                    rows.task_type_from_row(r._mapping)
                    for r in conn.execute(sa.select(task_type_t))
                )
            }
            for task, room_at in found:
                assert task.id is not None
                should = start_times(task, types[task.type], now).should_start_by
                if not may_expire(task, should, grace, room_at, now):
                    continue
                expired.append(self._expire(conn, task, should, grace, room_at, now))
        return expired

    def _expire(
        self,
        conn: sa.Connection,
        task: Task,
        should: datetime,
        grace: timedelta,
        room_at: datetime,
        now: datetime,
    ) -> Expiry:
        assert task.id is not None
        since = claimable_from(task, should, grace)
        why = (
            f"{EXPIRED_ERROR}a one-shot task that had to start by {fmt_instant(should)}"
            + (f" (+ a grace of {fmt_duration(grace)})" if grace else "")
            + f" had not started at {fmt_instant(now)}, although a runner pass of its type"
            f" had room at {fmt_instant(room_at)} (when it began, after the task could be"
            f" claimed from {fmt_instant(since)}) and could not take it; disabled"
        )
        run = TaskRun(
            task_id=task.id,
            backend_id=run_backend_id(task.id, task.next_run, self._run_namespace(conn)),
            slot=task.next_run,
            scheduled=now,
            status=RunStatus.CANCELLED,
            ended=now,
            error=why,
            history=(
                _entry(
                    EXPIRED,
                    now,
                    should_start_by=should.isoformat(),
                    room_at=room_at.isoformat(),
                    claimable_from=since.isoformat(),
                ),
            ),
        )
        [run_id] = self._insert(conn, run_t, [rows.run_to_row(run)])
        # the slot is taken by that run: were the task enabled again, its
        # next run needs another one
        after = task.updated(
            status=TaskStatus.DISABLED, next_run=task.next_run + _TICK, updated_at=now
        )
        conn.execute(
            sa.update(task_t)
            .where(task_t.c.id == task.id)
            .values(status=after.status.value, next_run=after.next_run, updated_at=now)
        )
        return Expiry(after, replace(run, id=run_id), should)

    # -- named locks ------------------------------------------------------------

    def acquire_lock(self, name: str, *, holder: str, ttl: timedelta) -> LockState:
        if ttl <= timedelta(0):
            raise InvalidInput("lock_ttl", f"{ttl} must be longer than zero")
        if not holder:
            raise InvalidInput("holder", "a lock holder must be named")
        with self._write("acquire lock") as conn:
            now = self._db_now(conn)
            insert = self._upsert(lock_t).values(name=name, holder=holder, expires_at=now + ttl)
            stmt = insert.on_conflict_do_update(
                index_elements=[lock_t.c.name],
                set_={"holder": insert.excluded.holder, "expires_at": insert.excluded.expires_at},
                where=sa.or_(lock_t.c.holder == insert.excluded.holder, lock_t.c.expires_at <= now),
            ).returning(lock_t.c.expires_at)
            won = conn.execute(stmt).first()
            if won is not None:
                return LockState(name, True, holder, won.expires_at, now)
            current = conn.execute(
                sa.select(lock_t.c.holder, lock_t.c.expires_at).where(lock_t.c.name == name)
            ).first()
        if current is None:  # cannot happen: the conflicting row is there
            return LockState(name, False, None, None, now)
        return LockState(name, False, current.holder, current.expires_at, now)

    def release_lock(self, name: str, *, holder: str) -> bool:
        with self._write("release lock") as conn:
            deleted = conn.execute(
                sa.delete(lock_t).where(lock_t.c.name == name, lock_t.c.holder == holder)
            )
            return bool(deleted.rowcount)


def _assigned_pid(run: TaskRun) -> int | None:
    """The worker main process that took ``run`` (its latest ``assigned``
    entry), if the worker said."""
    for entry in reversed(run.history):
        if entry.get("event") == ASSIGNED:
            pid = entry.get("pid")
            return pid if isinstance(pid, int) else None
    return None


def _before_or_other(run: TaskRun, at: datetime, pid: int | None) -> bool:
    """Whether an open run belongs to the worker's process that went away:
    taken by another process than ``pid`` (when both are known), else
    started no later than ``at``."""
    taken_by = _assigned_pid(run)
    if pid is not None and taken_by is not None:
        return taken_by != pid
    return run.started is None or run.started <= at


@lru_cache(maxsize=4)
def _room_upsert(dialect: str) -> Any:
    """The room of one class recorded, never moved back (built once per
    dialect: every pass with room runs it)."""
    insert = upsert_into(dialect, room_t).values(
        task_type=sa.bindparam("room_type"),
        priority=sa.bindparam("room_class"),
        at=sa.bindparam("room_at", type_=room_t.c.at.type),
    )
    return insert.on_conflict_do_update(
        index_elements=[room_t.c.task_type, room_t.c.priority],
        set_={"at": insert.excluded.at},
        where=room_t.c.at < insert.excluded.at,
    )
