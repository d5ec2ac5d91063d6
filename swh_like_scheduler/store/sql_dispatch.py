"""Dispatch batches: which claimed runs have their message on the broker.

Every claim creates its runs in a new ``dispatch_batch`` row; the runner
marks the batch published once the batch's messages are sent. Runs still
``scheduled`` then fall in two kinds, found by :meth:`reclaim_unstarted_runs`:

- **orphans**: their batch was never marked published (the runner died, or
  its broker failed, between claim and publish): no message exists, they are
  published again as soon as the batch is older than a short bound;
- **maybe lost**: their message was published (or the run predates batches)
  and no worker has started it: it is in its queue, or prefetched by a
  worker, or lost with the broker's data. The caller decides how many to
  send again (it can compare with the queue's depth).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..domain.model import Claimed, RunStatus, TaskStatus
from .sql_base import SQLBase
from .tables import dispatch_batch as batch_t
from .tables import task as task_t
from .tables import task_run as run_t

_SCHEDULED_RUN = run_t.c.status == RunStatus.SCHEDULED.value
_NEW_BATCH = (
    sa.insert(batch_t)
    .values(claimed_at=sa.bindparam("claimed_at", type_=batch_t.c.claimed_at.type))
    .returning(batch_t.c.id)
)


def _not_held(held: Mapping[str, datetime | None] | None) -> list[sa.ColumnElement[bool]]:
    """Conditions that leave out the runs ``held`` names: per task type,
    every run (``None``) or those dispatched before an instant."""
    conditions: list[sa.ColumnElement[bool]] = []
    for type_name, until in sorted((held or {}).items()):
        if until is None:
            conditions.append(task_t.c.type != type_name)
        else:
            conditions.append(sa.or_(task_t.c.type != type_name, run_t.c.scheduled >= until))
    return conditions


class DispatchMethods(SQLBase):
    """Dispatch batches, and taking back the runs whose message is missing."""

    def _new_batch(self, conn: sa.Connection, now: datetime) -> int:
        """A new, unpublished dispatch batch (caller's transaction)."""
        batch = conn.execute(_NEW_BATCH, {"claimed_at": now}).scalar_one()
        return int(batch)

    def _drop_batch(self, conn: sa.Connection, batch: int) -> None:
        """Delete the batch of a claim that took nothing."""
        conn.execute(sa.delete(batch_t).where(batch_t.c.id == batch))

    def mark_published(self, batches: Collection[int], *, at: datetime) -> None:
        if not batches:
            return
        with self._write("mark dispatch batches published") as conn:
            conn.execute(
                sa.update(batch_t)
                .where(batch_t.c.id.in_(sorted(set(batches))), batch_t.c.published_at.is_(None))
                .values(published_at=at)
            )

    def unstarted_run_counts(
        self,
        *,
        task_types: Sequence[str] | None = None,
        held: Mapping[str, datetime | None] | None = None,
    ) -> dict[str, int]:
        published = sa.or_(batch_t.c.id.is_(None), batch_t.c.published_at.is_not(None))
        query = (
            sa.select(task_t.c.type, sa.func.count())
            .select_from(run_t)
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .outerjoin(batch_t, batch_t.c.id == run_t.c.batch_id)
            .where(_SCHEDULED_RUN, published, *_not_held(held))
            .group_by(task_t.c.type)
        )
        if task_types is not None:
            query = query.where(task_t.c.type.in_(list(task_types)))
        with self._read("count unstarted runs") as conn:
            return {type_name: count for type_name, count in conn.execute(query).all()}

    def reclaim_unstarted_runs(
        self,
        *,
        now: datetime,
        limit: int = 1000,
        published_before: datetime | None = None,
        claimed_before: datetime | None = None,
        task_types: Sequence[str] | None = None,
        held: Mapping[str, datetime | None] | None = None,
    ) -> list[tuple[str, Claimed]]:
        if limit <= 0 or (published_before is None and claimed_before is None):
            return []
        with self._write("reclaim unstarted runs") as conn:
            found = conn.execute(
                self._unstarted(conn, published_before, claimed_before, task_types, limit, held)
            ).all()
            if not found:
                return []
            batch = self._new_batch(conn, now)
            entry = {"event": "republished", "at": now.isoformat()}
            conn.execute(
                sa.update(run_t)
                .where(run_t.c.id == sa.bindparam("run_id"))
                .values(scheduled=now, batch_id=batch, history=sa.bindparam("new_history")),
                [{"run_id": r.id, "new_history": [*(r.history or []), entry]} for r in found],
            )
        return [
            (
                r.type,
                Claimed(
                    r.task_id,
                    r.slot,
                    r.deadline,
                    r.backend_id,
                    r.arguments,
                    tuple(r.dont_run_on_nodes or ()),
                    batch,
                ),
            )
            for r in found
        ]

    def _unstarted(
        self,
        conn: sa.Connection,
        published_before: datetime | None,
        claimed_before: datetime | None,
        task_types: Sequence[str] | None,
        limit: int,
        held: Mapping[str, datetime | None] | None = None,
    ) -> sa.Select[Any]:
        """The runs :meth:`reclaim_unstarted_runs` takes, oldest first."""
        kinds: list[sa.ColumnElement[bool]] = []
        if claimed_before is not None:
            # orphans: a run's ``scheduled`` is its batch's claim time, so the
            # range of open runs to look at starts at the oldest orphan batch
            oldest = conn.scalar(
                sa.select(sa.func.min(batch_t.c.claimed_at)).where(
                    batch_t.c.published_at.is_(None), batch_t.c.claimed_at < claimed_before
                )
            )
            if oldest is not None:
                kinds.append(
                    sa.and_(
                        run_t.c.scheduled >= oldest,
                        run_t.c.scheduled < claimed_before,
                        batch_t.c.id.is_not(None),
                        batch_t.c.published_at.is_(None),
                    )
                )
        if published_before is not None:
            kinds.append(
                sa.and_(
                    run_t.c.scheduled < published_before,
                    sa.or_(
                        batch_t.c.id.is_(None),
                        batch_t.c.published_at < published_before,
                    ),
                    *_not_held(held),
                )
            )
        query = (
            sa.select(
                run_t.c.id,
                run_t.c.backend_id,
                run_t.c.slot,
                run_t.c.history,
                task_t.c.id.label("task_id"),
                task_t.c.type,
                task_t.c.deadline,
                task_t.c.arguments,
                task_t.c.dont_run_on_nodes,
            )
            .join(task_t, task_t.c.id == run_t.c.task_id)
            .outerjoin(batch_t, batch_t.c.id == run_t.c.batch_id)
            .where(
                _SCHEDULED_RUN,
                task_t.c.status == TaskStatus.SCHEDULED.value,
                sa.or_(*kinds) if kinds else sa.false(),
            )
            .order_by(run_t.c.scheduled, run_t.c.id)
            .limit(limit)
        )
        if task_types is not None:
            query = query.where(task_t.c.type.in_(list(task_types)))
        if self._capabilities.skip_locked:
            query = query.with_for_update(of=run_t, skip_locked=True)
        return query

    def delete_old_batches(self, *, claimed_before: datetime, limit: int = 10_000) -> int:
        victims = (
            sa.select(batch_t.c.id)
            .where(batch_t.c.claimed_at < claimed_before)
            .order_by(batch_t.c.id)
            .limit(limit)
            .scalar_subquery()
        )
        with self._write("delete old dispatch batches") as conn:
            return conn.execute(sa.delete(batch_t).where(batch_t.c.id.in_(victims))).rowcount
