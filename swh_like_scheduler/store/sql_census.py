"""The condition ledger and the stored census on SQL (:class:`CensusStore`).

Finding what to assess is two scans the database does with its own joins:
ledger rows that no longer match their task (or type, or the clock), and
watched tasks without a row. Neither sorts: each stops at ``limit``, and
the caller assesses what it got and asks again, so the first build of a
large ledger costs one pass over the table rather than one per batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..domain.enums import check_aware
from ..domain.exceptions import InvalidInput
from .sql_base import SQLBase
from .tables import census as census_t
from .tables import forecast as forecast_t
from .tables import task as task_t
from .tables import task_condition as cond_t
from .values import (
    LEVEL_RANKS,
    MAX_TYPE_VERSIONS,
    CensusRecord,
    ConditionRow,
    ProblemEntry,
    ProblemQuery,
    StoredForecast,
)

#: the statuses whose tasks have a ledger row (the census's "watched")
WATCHED = ("waiting", "scheduled", "disabled")
#: longest free-text filter, in characters
MAX_QUERY_TEXT = 200
#: rows written per statement
PUT_CHUNK = 1000


def _row_values(row: ConditionRow, now: datetime) -> dict[str, Any]:
    return {
        "task_id": row.task_id,
        "type": row.type,
        "rank": LEVEL_RANKS.index(row.level),
        "reason": row.reason,
        "finish_by": row.finish_by,
        "holds_until": row.holds_until,
        "kind": row.kind,
        "priority": row.priority,
        "text": row.text,
        "seen_updated_at": row.seen_updated_at,
        "seen_started_at": row.seen_started_at,
        "seen_status": row.seen_status,
        "type_seen": row.type_seen,
        "assessed_at": now,
    }


def _record(row: Any) -> CensusRecord:
    return CensusRecord(
        id=int(row.id),
        at=row.at,
        conditions={
            str(name): {str(level): int(n) for level, n in per.items()}
            for name, per in row.conditions.items()
        },
        tasks={(str(t), str(s)): int(n) for t, s, n in row.tasks},
        not_ok=int(row.not_ok),
        assessed=int(row.assessed),
        took=float(row.took),
        versions={str(k): str(v) for k, v in row.versions.items()},
        sweep_after=int(row.sweep_after),
    )


def _missing() -> sa.Select[Any]:
    """Watched tasks without a ledger row."""
    has_row = sa.select(cond_t.c.task_id).where(cond_t.c.task_id == task_t.c.id).exists()
    return sa.select(task_t.c.id).where(task_t.c.status.in_(WATCHED), ~has_row)


def _version(type_versions: Mapping[str, str]) -> sa.ColumnElement[Any]:
    version: sa.ColumnElement[Any] = sa.literal("")
    if type_versions:  # (a CASE needs a WHEN)
        version = sa.case(dict(type_versions), value=cond_t.c.type, else_=version)
    return version


def _seen_differs() -> sa.ColumnElement[bool]:
    """A ledger row assessed on other values of its task than it has now."""
    return sa.or_(
        cond_t.c.seen_updated_at != task_t.c.updated_at,
        cond_t.c.seen_started_at.is_distinct_from(task_t.c.owner_started_at),
        cond_t.c.seen_status != task_t.c.status,
    )


def _differs(
    now: datetime | None, type_versions: Mapping[str, str], retyped: Sequence[str]
) -> sa.Select[Any]:
    """Ledger rows that differ from their task, or (of a ``retyped`` type)
    from its type, or whose level the clock may have moved (with ``now``)."""
    wanted = {t: v for t, v in type_versions.items() if t in retyped}
    reasons = [_seen_differs()]
    if wanted:
        reasons.append(
            sa.and_(cond_t.c.type.in_(list(wanted)), cond_t.c.type_seen != _version(wanted))
        )
    if now is not None:
        reasons.append(cond_t.c.holds_until < now)
    return (
        sa.select(cond_t.c.task_id)
        .select_from(cond_t.join(task_t, task_t.c.id == cond_t.c.task_id))
        .where(sa.or_(*reasons))
    )


def _since(
    now: datetime, since: datetime, type_versions: Mapping[str, str], retyped: Sequence[str]
) -> list[sa.Select[Any]]:
    """The scans that find what changed since ``since``, each through an
    index: a cost that follows the changes, not the table."""
    changed = (
        sa.select(task_t.c.id)
        .select_from(task_t.outerjoin(cond_t, cond_t.c.task_id == task_t.c.id))
        .where(
            task_t.c.updated_at >= since,
            sa.or_(
                sa.and_(cond_t.c.task_id.is_(None), task_t.c.status.in_(WATCHED)),
                sa.and_(cond_t.c.task_id.is_not(None), _seen_differs()),
            ),
        )
    )
    # a run's start (the start guard) leaves ``updated_at`` as it is
    running = (
        sa.select(cond_t.c.task_id)
        .select_from(cond_t.join(task_t, task_t.c.id == cond_t.c.task_id))
        .where(cond_t.c.seen_status == "scheduled", _seen_differs())
    )
    moved = sa.select(cond_t.c.task_id).where(cond_t.c.holds_until < now)
    scans = [changed, running, moved]
    wanted = {t: v for t, v in type_versions.items() if t in retyped}
    if wanted:
        scans.append(
            sa.select(cond_t.c.task_id).where(
                cond_t.c.type.in_(list(wanted)), cond_t.c.type_seen != _version(wanted)
            )
        )
    return scans


def _few_types(type_versions: Mapping[str, str], retyped: Sequence[str] = ()) -> None:
    """Refuse more task types than one statement's parameters can hold."""
    for name, value in (("type_versions", type_versions), ("retyped", retyped)):
        if len(value) > MAX_TYPE_VERSIONS:
            raise InvalidInput(
                name, f"names {len(value):,} task types; at most {MAX_TYPE_VERSIONS:,} per call"
            )


def _matching(query: ProblemQuery) -> list[sa.ColumnElement[bool]]:
    if query.level and query.level not in LEVEL_RANKS:
        raise InvalidInput("level", f"must be one of {', '.join(LEVEL_RANKS)}")
    if len(query.q) > MAX_QUERY_TEXT:
        raise InvalidInput("q", f"must be at most {MAX_QUERY_TEXT} characters")
    where: list[sa.ColumnElement[bool]] = [cond_t.c.rank < LEVEL_RANKS.index("OK")]
    if query.level:
        rank = LEVEL_RANKS.index(query.level)
        where.append(cond_t.c.rank <= rank if query.at_least else cond_t.c.rank == rank)
    if query.type:
        where.append(cond_t.c.type == query.type)
    if query.kind:
        where.append(cond_t.c.kind == query.kind)
    if query.priority:
        where.append(cond_t.c.priority == query.priority)
    if query.q:
        # a literal substring: LIKE's own wildcards escaped
        where.append(cond_t.c.text.contains(query.q.lower(), autoescape=True))
    return where


class CensusMethods(SQLBase):
    """The condition ledger (``task_condition``) and the ``census`` rows."""

    def conditions_to_assess(
        self,
        now: datetime,
        type_versions: Mapping[str, str],
        *,
        limit: int = 2000,
        after_id: int | None = None,
        since: datetime | None = None,
        retyped: Sequence[str] = (),
    ) -> list[int]:
        check_aware("now", now)
        if limit < 1:
            raise InvalidInput("limit", "must be at least 1")
        _few_types(type_versions, retyped)
        if after_id is not None:
            # new tasks in id order, through the primary key: a pass costs
            # what it finds, however large the table
            newer = _missing().where(task_t.c.id > after_id).order_by(task_t.c.id).limit(limit)
            with self._read("find the new tasks to assess") as conn:
                return [int(i) for i in conn.scalars(newer)]
        if since is None:
            scans = [_differs(now, type_versions, list(type_versions)), _missing()]
        else:
            check_aware("since", since)
            scans = _since(now, since, type_versions, retyped)
        found: set[int] = set()
        with self._read("find the tasks to assess") as conn:
            self._maintenance(conn)  # without ``since``: a pass over the ledger and the tasks
            for scan in scans:
                found.update(int(i) for i in conn.scalars(scan.limit(limit - len(found))))
                if len(found) >= limit:
                    break
        return sorted(found)

    def sweep_conditions(
        self, type_versions: Mapping[str, str], *, after_id: int, span: int
    ) -> list[int]:
        if span < 1:
            raise InvalidInput("span", "must be at least 1")
        _few_types(type_versions)
        within_tasks = task_t.c.id.between(after_id + 1, after_id + span)
        within_rows = cond_t.c.task_id.between(after_id + 1, after_id + span)
        orphans = (
            sa.select(cond_t.c.task_id)
            .select_from(cond_t.outerjoin(task_t, task_t.c.id == cond_t.c.task_id))
            .where(within_rows, task_t.c.id.is_(None))
        )
        scans = [
            _differs(now=None, type_versions=type_versions, retyped=list(type_versions)).where(
                within_rows
            ),
            _missing().where(within_tasks),
            orphans,
        ]
        with self._read("sweep the ledger") as conn:
            return sorted({int(i) for scan in scans for i in conn.scalars(scan)})

    def condition_frontier(self) -> int:
        with self._read("read the ledger's highest task id") as conn:
            return int(conn.scalar(sa.select(sa.func.max(cond_t.c.task_id))) or 0)

    def put_conditions(self, rows: Sequence[ConditionRow], *, now: datetime) -> None:
        check_aware("now", now)
        if not rows:
            return
        values = [_row_values(row, now) for row in rows]
        insert = self._upsert(cond_t)
        replace = {c.name: insert.excluded[c.name] for c in cond_t.c if c.name != "task_id"}
        statement = insert.on_conflict_do_update(index_elements=["task_id"], set_=replace)
        with self._write("record tasks' conditions") as conn:
            ids = [row.task_id for row in rows]
            existing = set(conn.scalars(sa.select(task_t.c.id).where(task_t.c.id.in_(ids))))
            kept = [v for v in values if v["task_id"] in existing]  # deleted since: dropped
            for start in range(0, len(kept), PUT_CHUNK):
                # the driver's batched executemany (psycopg pipelines it)
                conn.execute(statement, kept[start : start + PUT_CHUNK])

    def drop_conditions(self, task_ids: Sequence[int]) -> int:
        if not task_ids:
            return 0
        with self._write("drop tasks' conditions") as conn:
            done = conn.execute(sa.delete(cond_t).where(cond_t.c.task_id.in_(list(task_ids))))
        return int(done.rowcount or 0)

    def count_conditions(
        self, *, unwatched: bool = True
    ) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
        per_row = sa.select(
            cond_t.c.type, cond_t.c.rank, cond_t.c.seen_status, sa.func.count()
        ).group_by(cond_t.c.type, cond_t.c.rank, cond_t.c.seen_status)
        others = (
            sa.select(task_t.c.type, task_t.c.status, sa.func.count())
            .where(task_t.c.status.not_in(WATCHED))
            .group_by(task_t.c.type, task_t.c.status)
        )
        with self._read("count the conditions") as conn:
            self._maintenance(conn)  # counts over every task
            self._one_core(conn)  # in the background: the API answers meanwhile
            rows = conn.execute(per_row).all()
            finished = conn.execute(others).all() if unwatched else []
        conditions: dict[str, dict[str, int]] = {}
        tasks: dict[tuple[str, str], int] = {}
        for name, rank, status, n in rows:
            per_level = conditions.setdefault(name, dict.fromkeys(reversed(LEVEL_RANKS), 0))
            per_level[LEVEL_RANKS[rank]] += int(n)
            tasks[(name, status)] = tasks.get((name, status), 0) + int(n)
        for name, status, n in finished:
            tasks[(str(name), str(status))] = int(n)
        return conditions, tasks

    def save_census(
        self,
        *,
        at: datetime,
        conditions: Mapping[str, Mapping[str, int]],
        tasks: Mapping[tuple[str, str], int],
        assessed: int,
        took: float,
        keep: timedelta,
        versions: Mapping[str, str] | None = None,
        sweep_after: int = 0,
    ) -> CensusRecord:
        check_aware("at", at)
        if keep <= timedelta(0):
            raise InvalidInput("keep", "must be positive")
        not_ok = sum(n for per in conditions.values() for lv, n in per.items() if lv != "OK")
        values = {
            "at": at,
            "conditions": {k: dict(v) for k, v in conditions.items()},
            "tasks": [[t, s, n] for (t, s), n in sorted(tasks.items())],
            "not_ok": not_ok,
            "assessed": assessed,
            "took": took,
            "versions": dict(versions or {}),
            "sweep_after": sweep_after,
        }
        with self._write("store a census") as conn:
            conn.execute(sa.delete(census_t).where(census_t.c.at < at - keep))
            last_two = conn.execute(
                sa.select(census_t.c.id, census_t.c.at).order_by(census_t.c.id.desc()).limit(2)
            ).all()
            # samples ``keep / 240`` apart, and the latest
            if len(last_two) == 2 and last_two[0].at - last_two[1].at < keep / 240:
                conn.execute(sa.delete(census_t).where(census_t.c.id == last_two[0].id))
            new_id = conn.scalar(sa.insert(census_t).values(values).returning(census_t.c.id))
            row = conn.execute(sa.select(census_t).where(census_t.c.id == new_id)).one()
        return _record(row)

    def latest_census(self) -> CensusRecord | None:
        with self._read("read the latest census") as conn:
            row = conn.execute(sa.select(census_t).order_by(census_t.c.id.desc()).limit(1)).first()
        return None if row is None else _record(row)

    def census_history(self, since: datetime) -> list[CensusRecord]:
        check_aware("since", since)
        with self._read("read the census history") as conn:
            rows = conn.execute(
                sa.select(census_t).where(census_t.c.at >= since).order_by(census_t.c.id)
            ).all()
        return [_record(row) for row in rows]

    def problem_page(
        self,
        query: ProblemQuery,
        *,
        offset: int = 0,
        limit: int = 50,
        known_total: int | None = None,
    ) -> tuple[list[ProblemEntry], int]:
        if offset < 0:
            raise InvalidInput("offset", "must not be negative")
        if not 0 <= limit <= 10_000:
            raise InvalidInput("limit", "must be between 0 and 10000")
        if known_total is not None and known_total < 0:
            raise InvalidInput("known_total", "must not be negative")
        where = _matching(query)
        total = sa.select(sa.func.count()).select_from(cond_t).where(*where)
        order = [cond_t.c.rank, cond_t.c.finish_by.asc().nulls_last(), cond_t.c.task_id]
        backward = [cond_t.c.rank.desc(), cond_t.c.finish_by.desc().nulls_first()]
        backward.append(cond_t.c.task_id.desc())
        with self._read("list the problems") as conn:
            count = known_total if known_total is not None else int(conn.scalar(total) or 0)
            rows: Sequence[Any] = []
            if limit and offset + limit > count // 2 and offset < count:
                # nearer the end: the same rows, read backwards from it
                last = min(limit, count - offset)
                page = sa.select(cond_t).where(*where).order_by(*backward)
                page = page.offset(count - offset - last).limit(last)
                rows = list(reversed(conn.execute(page).all()))
            elif limit:
                page = sa.select(cond_t).where(*where).order_by(*order)
                rows = conn.execute(page.offset(offset).limit(limit)).all()
        return [
            ProblemEntry(
                id=int(r.task_id),
                type=r.type,
                level=LEVEL_RANKS[r.rank],
                reason=r.reason,
                finish_by=r.finish_by,
                kind=r.kind,
                priority=r.priority,
                text=r.text,
                assessed_at=r.assessed_at,
            )
            for r in rows
        ], count

    def record_forecast(
        self, body: Mapping[str, Any], *, at: datetime, took: float, keep: int = 24
    ) -> StoredForecast:
        check_aware("at", at)
        if not took >= 0:
            raise InvalidInput("took", f"{took} is not a number of seconds")
        if not 1 <= keep <= 1000:
            raise InvalidInput("keep", f"{keep} is not between 1 and 1000")
        values = {"at": at, "took": took, "body": dict(body)}
        with self._write("record a forecast") as conn:
            new_id = conn.scalar(sa.insert(forecast_t).values(values).returning(forecast_t.c.id))
            kept = sa.select(forecast_t.c.id).order_by(forecast_t.c.id.desc()).limit(keep)
            conn.execute(
                sa.delete(forecast_t).where(forecast_t.c.id.not_in(kept.scalar_subquery()))
            )
        return StoredForecast(int(new_id), at, took, dict(body))

    def latest_forecast(self) -> StoredForecast | None:
        found = self.recorded_forecasts(limit=1)
        return found[0] if found else None

    def recorded_forecasts(self, *, limit: int = 24) -> list[StoredForecast]:
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit", f"{limit} is not between 1 and 1000")
        with self._read("read the recorded forecasts") as conn:
            rows = conn.execute(
                sa.select(forecast_t).order_by(forecast_t.c.id.desc()).limit(limit)
            ).all()
        return [StoredForecast(int(r.id), r.at, float(r.took), dict(r.body)) for r in rows]
