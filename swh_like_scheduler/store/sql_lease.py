"""The lease and steal protocols: the store's half (DESIGN.md §4).

Every instant written here is the **database's** clock, read once at the
start of each call's transaction (``statement_timestamp()`` on PostgreSQL,
``strftime('%Y-%m-%d %H:%M:%f', 'now')`` on SQLite): workers' clocks never
decide who owns a task. Each call is one transaction; the run row and then
the task row are locked (``FOR UPDATE`` on PostgreSQL; SQLite's write
transaction excludes every other writer), and ownership changes are written
as a compare-and-set on ``owner_tag`` so that a lost race changes nothing.

History entries added to the run (``{"event": …, "at": …}`` plus details):
``assigned`` (lease granted), ``pinged_late`` (a steal began, or the owner
pinged while one was pending), ``stolen`` (grace over: the run is ``lost``),
``yielded`` (warm shutdown), ``timed_out`` (``max_allowed_duration`` passed).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..domain.model import (
    OPEN_RUN_STATUSES,
    OWNER_CLEARED,
    RunStatus,
    Task,
    TaskRun,
    TaskStatus,
    final_run_status,
)
from ..domain.records import (
    ASSIGNED,
    PINGED_LATE,
    REFUSED_COPY,
    RETRYING,
    TIMED_OUT,
    YIELDED,
    LeaseGrant,
    PingAnswer,
    PingReply,
    Refusal,
)
from ..policy import blackout_at
from . import rows
from .interface import ApplyOutcome
from .sql_base import SQLBase
from .sql_guard import first_copy
from .tables import task as task_t
from .tables import task_run as run_t

_TICK = timedelta(microseconds=1)
_OPEN = [s.value for s in OPEN_RUN_STATUSES]


def _entry(event: str, at: datetime, **details: Any) -> dict[str, Any]:
    return {"event": event, "at": at.isoformat(), **{k: v for k, v in details.items() if v}}


class LeaseMethods(SQLBase):
    """Acquire, ping, finish and yield a lease; steal expired ones."""

    # -- plumbing -----------------------------------------------------------

    def _db_now(self, conn: sa.Connection) -> datetime:
        """The database's clock (aware UTC)."""
        if self.engine.dialect.name == "postgresql":
            value = conn.scalar(sa.select(sa.func.statement_timestamp()))
            assert isinstance(value, datetime)
            return value.astimezone(UTC)
        text = conn.scalar(sa.select(sa.func.strftime("%Y-%m-%d %H:%M:%f", "now")))
        return datetime.fromisoformat(str(text)).replace(tzinfo=UTC)

    def _lock_skip(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """Lock rows, skipping those another transaction holds (PostgreSQL):
        a task being pinged right now is not stolen, and monitors never wait."""
        if self._capabilities.skip_locked:
            return query.with_for_update(skip_locked=True)
        return query

    def _lease_run(self, conn: sa.Connection, backend_id: str) -> TaskRun | None:
        query = sa.select(run_t).where(run_t.c.backend_id == backend_id)
        row = conn.execute(self._lock(query)).first()
        return rows.run_from_row(row._mapping) if row else None

    def _owned_run(
        self, conn: sa.Connection, backend_id: str, tag: str
    ) -> tuple[datetime, TaskRun | None, bool]:
        """(database now, the run locked, whether it is open and ``tag`` owns its task)."""
        now = self._db_now(conn)
        run = self._lease_run(conn, backend_id)
        if run is None or not run.status.is_open:
            return now, run, False
        task = self._lease_task(conn, run.task_id)
        return now, run, task is not None and task.owner_tag == tag

    def _lease_task(self, conn: sa.Connection, task_id: int) -> Task | None:
        row = conn.execute(self._lock(sa.select(task_t).where(task_t.c.id == task_id))).first()
        return rows.task_from_row(row._mapping) if row else None

    def _add_history(self, conn: sa.Connection, run: TaskRun, entry: Mapping[str, Any]) -> TaskRun:
        history = (*run.history, dict(entry))
        conn.execute(
            sa.update(run_t).where(run_t.c.id == run.id).values(history=[dict(h) for h in history])
        )
        return replace(run, history=history)

    def _end_owned(
        self,
        conn: sa.Connection,
        run: TaskRun,
        *,
        status: RunStatus,
        now: datetime,
        result: Any = None,
        error: str | None = None,
        entry: Mapping[str, Any] | None = None,
        apply: ApplyOutcome | None,
        runnable_now: bool = False,
        take: bool = False,
    ) -> TaskRun | None:
        """End ``run`` (an open run whose task the caller has locked) the way
        :meth:`end_task_run` does, add ``entry`` to its history and release
        the task's ownership. ``runnable_now``: a task left ``waiting`` may
        start at once, in a new slot: ``next_run = max(now, slot + 1 µs)``
        (unless ``now`` is in one of its blackout windows: then the policy's
        time, past the window). ``take``: the run is taken from its copy
        (stolen, yielded, given up, its worker gone): the task's fencing
        token moves on in the same transaction, so the copy's token is stale
        from now on (:meth:`current_fence`; its late end is ``superseded``)."""

        def after(task: Task, ended_run: TaskRun) -> Task:
            new = apply(task, ended_run) if apply is not None else task
            new = new.updated(**OWNER_CLEARED)
            if apply is None and new.status is TaskStatus.SCHEDULED:
                new = new.updated(status=TaskStatus.WAITING)
            if runnable_now and new.status is TaskStatus.WAITING:
                # a new slot (the run's own is taken: one run per task and
                # slot, and the backend id derives from it), at once unless
                # now is in a blackout window (the policy moved it past it)
                fresh = max(now, run.slot + _TICK)
                if blackout_at(new, now) is None or new.next_run <= run.slot:
                    new = new.updated(
                        next_run=fresh
                        if blackout_at(new, now) is None
                        else max(new.next_run, fresh)
                    )
            return new

        bound = replace_bound(self, conn)
        ended = bound.end_task_run(  # type: ignore[attr-defined]
            run.backend_id,
            status=status,
            ended=now,
            result=result,
            error=error,
            apply=after,
        )
        if ended is not None and entry is not None:
            ended = self._add_history(conn, ended, entry)
        if ended is not None and take:
            self._move_fence(conn, run.task_id)
        return ended

    def _move_fence(self, conn: sa.Connection, task_id: int) -> None:
        """The task's fencing token moves on: every copy started before is stale."""
        conn.execute(
            sa.update(task_t).where(task_t.c.id == task_id).values(fence=task_t.c.fence + 1)
        )

    # -- the owner's calls ----------------------------------------------------

    def acquire_lease(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None = None,
        pid: int | None = None,
    ) -> LeaseGrant:
        return self._take_run(
            backend_id, node=node, name=name, tag=tag, apply=apply, pinging=True, pid=pid
        )

    def guard_start(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None = None,
        pid: int | None = None,
    ) -> LeaseGrant:
        return self._take_run(
            backend_id, node=node, name=name, tag=tag, apply=apply, pinging=False, pid=pid
        )

    def _take_run(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None,
        pinging: bool,
        pid: int | None = None,
    ) -> LeaseGrant:
        """The start guard (``pinging`` false) and the lease (true): the same
        checks; a lease's owner also pings (``owner_last_ping_at`` set), a
        guarded start's never does (left null: the steal step ignores it,
        the worker's liveness covers it)."""
        if not pinging and self._capabilities.writable_ctes:
            if self._held is not None and self._bound is None:
                granted = first_copy(self._held, backend_id, node=node, name=name, tag=tag, pid=pid)
            else:
                with self._single("guard the start of a run") as conn:
                    granted = first_copy(conn, backend_id, node=node, name=name, tag=tag, pid=pid)
            if granted is not None:
                at, task_id, fence = granted
                return LeaseGrant(True, Refusal.OK, at, fence=fence, task_id=task_id)
        with self._write("guard the start of a run") as conn:
            now = self._db_now(conn)
            run = self._lease_run(conn, backend_id)
            if run is None:
                return LeaseGrant(False, Refusal.UNKNOWN_RUN, now)
            task = self._lease_task(conn, run.task_id)
            if task is None:  # cannot happen: runs are deleted with their task
                return LeaseGrant(False, Refusal.UNKNOWN_RUN, now, None, run)
            if not run.status.is_open:
                run = self._refused_copy(conn, run, now, Refusal.FINISHED_RUN, name, node)
                return LeaseGrant(False, Refusal.FINISHED_RUN, now, task, run)
            if task.owner_tag is not None:
                if task.owner_tag == tag:  # the same owner asking again
                    return LeaseGrant(True, Refusal.OK, now, task, run, run.fence, task.id)
                run = self._refused_copy(conn, run, now, Refusal.ALREADY_RUNNING, name, node)
                return LeaseGrant(False, Refusal.ALREADY_RUNNING, now, task, run)
            refusal = _refusal(task, node, now)
            if refusal is not None:
                if apply is not None and refusal in _ENDING_REFUSALS:
                    status = _ENDING_REFUSALS[refusal]
                    run = self._end_owned(
                        conn,
                        run,
                        status=status,
                        now=now,
                        error=f"refused at start: {refusal}",
                        apply=apply,
                    )
                    task = self._lease_task(conn, task.id or 0)
                return LeaseGrant(False, refusal, now, task, run)
            owner = {
                "owner_node": node,
                "owner_name": name,
                "owner_tag": tag,
                "owner_started_at": now,
                "owner_last_ping_at": now if pinging else None,
                "steal_start_at": None,
            }
            claimed = conn.execute(
                sa.update(task_t)
                .where(task_t.c.id == task.id, task_t.c.owner_tag.is_(None))
                .values(
                    **owner,
                    status=TaskStatus.SCHEDULED.value,
                    updated_at=now,
                    fence=task_t.c.fence + 1,
                )
                .returning(task_t.c.fence)
            ).first()
            if claimed is None:  # lost a race (only possible without row locks)
                return LeaseGrant(False, Refusal.ALREADY_RUNNING, now, task, run)
            fence = int(claimed.fence)
            worker = f"{name}@{node}"
            started = run.started or now
            entry = _entry(
                ASSIGNED, now, worker=worker, tag=tag, lease=pinging, pid=pid, fence=fence
            )
            history = [*(dict(h) for h in run.history), entry]
            conn.execute(
                sa.update(run_t)
                .where(run_t.c.id == run.id)
                .values(
                    status=RunStatus.STARTED.value,
                    started=started,
                    worker=worker,
                    history=history,
                    fence=fence,
                )
            )
            run = replace(
                run,
                status=RunStatus.STARTED,
                started=started,
                worker=worker,
                history=tuple(history),
                fence=fence,
            )
            task = task.updated(**owner, status=TaskStatus.SCHEDULED, updated_at=now)
            return LeaseGrant(True, Refusal.OK, now, task, run, fence, task.id)

    def _refused_copy(
        self,
        conn: sa.Connection,
        run: TaskRun,
        now: datetime,
        refusal: Refusal,
        name: str,
        node: str,
    ) -> TaskRun:
        """Note on ``run`` that a second copy of it was refused (a duplicate
        delivery: re-published, redelivered, or revoked too late)."""
        entry = _entry(REFUSED_COPY, now, worker=f"{name}@{node}", reason=str(refusal))
        return self._add_history(conn, run, entry)

    def ping_lease(self, backend_id: str, *, tag: str, progress: float | None = None) -> PingReply:
        if progress is not None and not 0.0 <= progress <= 1.0:
            raise InvalidInput("progress", f"{progress} is not between 0 and 1")
        with self._write("ping lease") as conn:
            now = self._db_now(conn)
            run = self._lease_run(conn, backend_id)
            task = self._lease_task(conn, run.task_id) if run is not None else None
            if run is None or task is None or task.owner_tag != tag:
                return PingReply(False, PingAnswer.STOLEN, now)
            if not run.status.is_open:
                return PingReply(False, PingAnswer.FINISHED, now)
            if task.status in (TaskStatus.CANCELLED, TaskStatus.DISABLED):
                return PingReply(False, PingAnswer.CANCELLED, now)
            if blackout_at(task, now) is not None:
                return PingReply(False, PingAnswer.BLACKOUT, now)
            conn.execute(
                sa.update(task_t)
                .where(task_t.c.id == task.id, task_t.c.owner_tag == tag)
                .values(owner_last_ping_at=now, steal_start_at=None)
            )
            if progress is not None:
                conn.execute(sa.update(run_t).where(run_t.c.id == run.id).values(progress=progress))
            if task.steal_start_at is not None:
                late = _entry(
                    PINGED_LATE,
                    now,
                    worker=run.worker,
                    detail="the owner pinged during the grace period",
                    steal_start_at=task.steal_start_at.isoformat(),
                )
                self._add_history(conn, run, late)
            return PingReply(True, PingAnswer.OK, now)

    def finish_lease(
        self,
        backend_id: str,
        *,
        tag: str,
        status: RunStatus,
        result: Any = None,
        error: str | None = None,
        apply: ApplyOutcome | None = None,
    ) -> TaskRun | None:
        status = final_run_status(status)
        with self._write("finish lease") as conn:
            now, run, owned = self._owned_run(conn, backend_id, tag)
            if run is None or not owned:
                return run  # unknown, ended, stolen or yielded: the new owner decides
            entry = (
                _entry(TIMED_OUT, now, worker=run.worker) if status is RunStatus.TIMED_OUT else None
            )
            return self._end_owned(
                conn,
                run,
                status=status,
                now=now,
                result=result,
                error=error,
                entry=entry,
                apply=apply,
            )

    def yield_lease(
        self, backend_id: str, *, tag: str, apply: ApplyOutcome | None = None
    ) -> TaskRun | None:
        with self._write("yield lease") as conn:
            now, run, owned = self._owned_run(conn, backend_id, tag)
            if run is None or not owned:
                return run
            return self._end_owned(
                conn,
                run,
                status=RunStatus.LOST,
                now=now,
                error="yielded by its worker (warm shutdown)",
                entry=_entry(YIELDED, now, worker=run.worker, progress=run.progress),
                apply=apply,
                runnable_now=True,
                take=True,
            )

    def release_start(self, backend_id: str, *, tag: str) -> bool:
        with self._write("give a run back for its retry") as conn:
            now, run, owned = self._owned_run(conn, backend_id, tag)
            if run is None or not owned:
                return False
            conn.execute(
                sa.update(task_t)
                .where(task_t.c.id == run.task_id, task_t.c.owner_tag == tag)
                .values(**OWNER_CLEARED)
            )
            self._add_history(conn, run, _entry(RETRYING, now, worker=run.worker))
            return True


#: Refusals after which the run is pointless: with ``apply``, ended so.
_ENDING_REFUSALS = {
    Refusal.CANCELLED: RunStatus.CANCELLED,
    Refusal.DISABLED: RunStatus.CANCELLED,
    Refusal.BLACKOUT: RunStatus.LOST,
}


def _refusal(task: Task, node: str, now: datetime) -> Refusal | None:
    if task.status is TaskStatus.CANCELLED:
        return Refusal.CANCELLED
    if task.status is TaskStatus.DISABLED:
        return Refusal.DISABLED
    if node in task.dont_run_on_nodes:
        return Refusal.BANNED_NODE
    if blackout_at(task, now) is not None:
        return Refusal.BLACKOUT
    return None


def replace_bound(store: SQLBase, conn: sa.Connection) -> SQLBase:
    """A view of ``store`` whose calls run on ``conn`` (the caller's
    transaction), as :meth:`SQLBase.transaction` gives."""
    if store._bound is conn:
        return store
    bound = copy.copy(store)
    bound._bound = conn
    bound._owns_engine = False
    return bound
