"""Missed firings dropped by the catch-up policy ``skip`` (SQL side of
:mod:`~swh_like_scheduler.policy.catchup`).

A runner pass calls :meth:`CatchUpMethods.skip_missed_firings` for each
type with ready tasks before it claims any. A cheap read first looks for
candidates (the policy decides on each): for a type whose policy is
``skip``, its waiting tasks whose ``next_run`` (and, but for cron, whose
``deadline``) is before ``now`` minus the type's grace; for any type, the
(rare) tasks with a catch-up setting of their own that are ready
(``ix_task_catch_up``). Only when there are some does a write transaction
lock them again and record the skips, so an idle pass writes nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..domain.model import (
    CatchUp,
    RunStatus,
    ScheduleKind,
    TaskRun,
    TaskStatus,
    TaskType,
    run_backend_id,
)
from ..domain.records import SKIPPED, Skip
from ..policy.catchup import MissedFirings, after_skip, missed_firings
from . import rows
from .sql_identity import IdentityMethods
from .tables import task as task_t
from .tables import task_run as run_t
from .tables import task_type as task_type_t

#: a type's row (built once: every pass reads it for each type due)
_TYPE_ROW = sa.select(task_type_t).where(task_type_t.c.type == sa.bindparam("catch_up_type"))


def _candidates(task_type: TaskType, now: datetime) -> sa.ColumnElement[bool]:
    """The tasks whose firing may be missed at ``now`` (a superset: the
    policy decides), as a condition on the task table."""
    waiting = sa.and_(task_t.c.type == task_type.type, task_t.c.status == TaskStatus.WAITING.value)
    own = sa.and_(
        sa.or_(task_t.c.catch_up.is_not(None), task_t.c.catch_up_grace.is_not(None)),
        task_t.c.next_run <= now,
    )
    if task_type.catch_up is not CatchUp.SKIP:
        return sa.and_(waiting, own)
    cutoff = now - task_type.catch_up_grace
    by_type = sa.and_(
        task_t.c.catch_up.is_(None),
        task_t.c.catch_up_grace.is_(None),
        task_t.c.next_run < cutoff,
        # late from the firing for cron, from the due instant otherwise
        sa.or_(task_t.c.schedule_kind == ScheduleKind.CRON.value, task_t.c.deadline < cutoff),
    )
    return sa.and_(waiting, sa.or_(by_type, own))


def skipped_entry(missed: MissedFirings, now: datetime) -> dict[str, Any]:
    """The history entry of a ``skipped`` run: which firings were dropped
    at ``now``, and why (the grace, where the task resumes)."""
    details: dict[str, Any] = {
        "event": SKIPPED,
        "at": now.isoformat(),
        "first": missed.first.isoformat(),
        "count": missed.count,
        "grace_seconds": missed.grace / timedelta(seconds=1),
    }
    if missed.more:
        details["more"] = True
    if missed.resume_at is not None:
        details["resume_at"] = missed.resume_at.isoformat()
    return details


class CatchUpMethods(IdentityMethods):
    """:meth:`skip_missed_firings` (see the store interface)."""

    def skip_missed_firings(
        self, task_type: str, *, now: datetime, limit: int = 1000
    ) -> list[Skip]:
        with self._read("find missed firings") as conn:
            row = conn.execute(_TYPE_ROW, {"catch_up_type": task_type}).first()
            if row is None:
                return []
            kind = rows.task_type_from_row(row._mapping)
            if kind.paused_at is not None:
                return []
            where = _candidates(kind, now)
            found = list(
                conn.scalars(
                    sa.select(task_t.c.id).where(where).order_by(task_t.c.next_run).limit(limit)
                )
            )
        if not found:
            return []
        skips: list[Skip] = []
        with self._write("skip missed firings") as conn:
            if self._type_paused(conn, task_type):
                return []
            query = sa.select(task_t).where(task_t.c.id.in_(found), where)
            if self._capabilities.skip_locked:
                query = query.with_for_update(skip_locked=True)
            for task_row in conn.execute(query.order_by(task_t.c.next_run, task_t.c.id)):
                skip = self._skip(conn, rows.task_from_row(task_row._mapping), kind, now)
                if skip is not None:
                    skips.append(skip)
        return skips

    def _skip(self, conn: sa.Connection, task: Any, kind: TaskType, now: datetime) -> Skip | None:
        missed = missed_firings(task, kind, now)
        if missed is None or task.id is None:
            return None
        after = after_skip(task, kind, missed, now).updated(updated_at=now)
        details = skipped_entry(missed, now)
        run = TaskRun(
            task_id=task.id,
            backend_id=run_backend_id(task.id, task.next_run, self._run_namespace(conn)),
            slot=task.next_run,
            scheduled=now,
            ended=now,
            status=RunStatus.SKIPPED,
            error=missed.reason,
            history=(details,),
        )
        [run_id] = self._insert(conn, run_t, [rows.run_to_row(run)])
        conn.execute(
            sa.update(task_t)
            .where(task_t.c.id == task.id)
            .values(
                status=after.status.value,
                next_run=after.next_run,
                deadline=after.deadline,
                skipped_until=after.skipped_until,
                updated_at=now,
            )
        )
        return Skip(
            task=after,
            run=replace(run, id=run_id),
            first=missed.first,
            count=missed.count,
            more=missed.more,
            resume_at=missed.resume_at,
        )
