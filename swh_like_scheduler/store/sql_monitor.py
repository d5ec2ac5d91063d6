"""The monitor duties: the store's half (DESIGN.md §4).

* the runs of workers that went away (the ``worker`` table is recorded by
  :mod:`.sql_workers`), ended ``lost`` through the same path as a stolen lease
  (:meth:`LeaseMethods._end_owned`: ``apply`` in the same transaction, the
  task runnable at once in a new slot);
* one-shot tasks that can no longer start in time although a runner had
  room for them (``dispatch_room``), disabled with a run that says why;
* a named lock with an expiry on the database clock (``scheduler_lock``),
  taken and renewed with one conditional UPSERT.

Runs whose task is owned through the lease (an owner that pings:
``owner_last_ping_at`` set) are never ended here: the steal protocol decides
about them. A run the start guard let through (owner set, no pings) is the
worker's like any other and ends with it.

Lock order is the listener's and the lease's (run row, then task row), and
run rows another transaction holds are skipped (PostgreSQL): a run being
ended by the listener right now is left to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..exceptions import InvalidInput
from ..model import (
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
from ..policy import start_times
from ..policy.times import fmt_duration, fmt_instant
from ..records import (
    ASSIGNED,
    EXPIRED,
    EXPIRED_ERROR,
    MIN_WORKER_TIMEOUT,
    WORKER_OFFLINE,
    Expiry,
    LockState,
    WorkerSweep,
    worker_timeout,
)
from . import rows
from .interface import ApplyOutcome
from .sql_identity import IdentityMethods
from .sql_lease import _TICK, LeaseMethods, _entry
from .tables import dispatch_room as room_t
from .tables import scheduler_lock as lock_t
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as task_type_t
from .tables import worker as worker_t

_OPEN = [s.value for s in OPEN_RUN_STATUSES]


class MonitorMethods(LeaseMethods, IdentityMethods):
    """Workers and their lost runs, one-shot expiry, the monitor's lock."""

    def _upsert(self, table: sa.Table) -> Any:
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(table)

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

    def _worker_runs_query(
        self, limit: int, extra: tuple[sa.ColumnElement[Any], ...] = ()
    ) -> sa.Select[Any]:
        """Open runs whose task is not leased (no pinging owner), oldest first,
        locked (run rows only; rows another transaction holds are skipped)."""
        query = (
            sa.select(run_t, *extra)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .where(run_t.c.status.in_(_OPEN), task_t.c.owner_last_ping_at.is_(None))
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
            if task is None or task.owner_last_ping_at is not None:
                continue  # the lease took it meanwhile: the steal protocol decides
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
            )
            if done is not None and done.status is RunStatus.LOST:
                lost.append(done)
        return lost

    # -- one-shot expiry --------------------------------------------------------

    def record_room(
        self, task_type: str, *, at: datetime, priorities: Sequence[Priority] | None = None
    ) -> None:
        classes = sorted({p.value for p in (priorities or PRIORITY_ORDER)})
        with self._write("record dispatch room") as conn:
            if self._type_paused(conn, task_type):
                return  # a pass claimed nothing because of the pause: no room
            insert = self._upsert(room_t).values(
                [{"task_type": task_type, "priority": c, "at": at} for c in classes]
            )
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[room_t.c.task_type, room_t.c.priority],
                    set_={"at": insert.excluded.at},
                    where=room_t.c.at < insert.excluded.at,
                )
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
                # and a pass with room came after the deadline
                task_t.c.next_run < now - grace,
                room > task_t.c.deadline,
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
                if not (should + grace < now and should + grace < room_at):
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
        why = (
            f"{EXPIRED_ERROR}a one-shot task that had to start by {fmt_instant(should)}"
            + (f" (+ a grace of {fmt_duration(grace)})" if grace else "")
            + f" had not started at {fmt_instant(now)}, although a runner pass of its type"
            f" had room at {fmt_instant(room_at)} and could not take it; disabled"
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
