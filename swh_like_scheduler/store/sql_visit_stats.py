"""Visit statistics and origin metrics (:class:`~.role_origins.OriginStore`,
second half): statuses applied under row locks, counts per lister and
visit type."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..visits.feedback import MAX_OFFSET, VisitStatusMessage, apply_status, disables, finished
from ..visits.model import (
    DEFAULT_OFFSET,
    OriginMetrics,
    OriginVisitStats,
    origin_url,
    visit_type_name,
)
from ..visits.policy import hold_of
from .sql_base import _chunks
from .sql_origins import OriginMethods, _now, optional_name
from .tables import UTCDateTime
from .tables import listed_origin as origin_t
from .tables import origin_metrics as metrics_t
from .tables import origin_visit_stats as stats_t
from .tables import visit_queue_position as position_t

#: the statistics' columns that always take the value given (the others
#: keep the stored one when given ``None``)
_ALWAYS = ("next_position_offset", "successive_visits")
_KEY = ("url", "visit_type")


#: the columns of the statistics themselves (the others are the listings'
#: sums and the database's generated orders, store/tables.py)
STATS = [c for c in stats_t.columns if c.name in OriginVisitStats.__dataclass_fields__]


def stats_from_row(row: Mapping[Any, Any]) -> OriginVisitStats:
    return OriginVisitStats(**{c.name: row[c.name] for c in STATS})


def hold_row(stats: OriginVisitStats) -> dict[str, Any]:
    """The hold columns of the statistics (visits/policy.py, ``hold_of``)."""
    hold = hold_of(stats)
    return (
        {"held": None, "held_since": None}
        if hold is None
        else {
            "held": hold[0].value,
            "held_since": hold[1],
        }
    )


def stats_row(stats: OriginVisitStats) -> dict[str, Any]:
    row = {c.name: getattr(stats, c.name) for c in STATS}
    if stats.last_visit_status is not None:
        row["last_visit_status"] = stats.last_visit_status.value
    return row


def _keys(where: str, ids: Sequence[Any]) -> list[tuple[str, str]]:
    keys = []
    for n, pair in enumerate(ids):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise InvalidInput(f"{where}[{n}]", f"{pair!r} is not a (url, visit type) pair")
        keys.append((origin_url(f"{where}[{n}]", pair[0]), visit_type_name(where, pair[1])))
    return keys


_SOMETHING_HAPPENED = sa.or_(
    *(
        column.is_not(None)
        for column in STATS
        if column.nullable and column.name not in _KEY and not column.primary_key
    ),
    stats_t.c.next_position_offset != DEFAULT_OFFSET,
    stats_t.c.successive_visits != 1,
)


#: the origin is enabled by a lister (the metrics' own reading of it)
_ENABLED = stats_t.c.enabled.is_(True)


class VisitStatsMethods(OriginMethods):
    """Visit statistics and metrics of :class:`SchedulerStore`."""

    def _stats_upsert(self, *, keep_stored: bool) -> Any:
        """Rows of the statistics; ``keep_stored``: a ``None`` keeps the
        stored value (and the holds are then not in the rows: see
        :meth:`_rehold`), else the rows are whole, with their holds."""
        insert = self._upsert(stats_t)
        values = {}
        for column in STATS:
            if column.name in _KEY:
                continue
            given = insert.excluded[column.name]
            keep = keep_stored and column.name not in _ALWAYS
            values[column.name] = sa.func.coalesce(given, column) if keep else given
        if not keep_stored:
            values.update(held=insert.excluded.held, held_since=insert.excluded.held_since)
        return insert.on_conflict_do_update(index_elements=list(_KEY), set_=values)

    def _rehold(self, conn: sa.Connection, keys: list[tuple[str, str]]) -> None:
        """The holds of ``keys`` again, from their statistics as stored."""
        update = (
            sa.update(stats_t)
            .where(stats_t.c.url == sa.bindparam("k_url"))
            .where(stats_t.c.visit_type == sa.bindparam("k_visit_type"))
            .values(held=sa.bindparam("held"), held_since=sa.bindparam("held_since"))
        )
        rows = [
            {"k_url": key[0], "k_visit_type": key[1], **hold_row(stats)}
            for key, stats in sorted(self._stats_of(conn, keys).items())
        ]
        for chunk in _chunks(rows, 1000):
            conn.execute(update, list(chunk))

    def origin_visit_stats_upsert(self, stats: Sequence[OriginVisitStats]) -> None:
        given = list(stats)
        for n, item in enumerate(given):
            if not isinstance(item, OriginVisitStats):
                raise InvalidInput(f"stats[{n}]", f"{type(item).__name__} is not visit stats")
        latest = {s.key: s for s in given}
        rows = [stats_row(latest[k]) for k in sorted(latest)]
        if not rows:
            return
        with self._write("upsert visit statistics") as conn:
            statement = self._stats_upsert(keep_stored=True)
            for chunk in _chunks(rows, 1000):
                conn.execute(statement, list(chunk))
            self._rehold(conn, sorted(latest))

    def _stats_of(
        self,
        conn: sa.Connection,
        keys: list[tuple[str, str]],
        *,
        lock: bool = False,
        visited: bool = False,
    ) -> dict[tuple[str, str], OriginVisitStats]:
        """The statistics of ``keys``; ``visited``: only of origins something
        happened to (a listed origin has a row from its first listing)."""
        found: dict[tuple[str, str], OriginVisitStats] = {}
        columns = sa.tuple_(stats_t.c.url, stats_t.c.visit_type)
        for chunk in _chunks(sorted(set(keys)), 300):
            query = sa.select(*STATS).where(columns.in_(list(chunk)))
            if visited:
                query = query.where(_SOMETHING_HAPPENED)
            query = query.order_by(stats_t.c.url, stats_t.c.visit_type)
            for row in conn.execute(self._lock(query) if lock else query):
                stats = stats_from_row(row._mapping)
                found[stats.key] = stats
        return found

    def origin_visit_stats_get(self, ids: Sequence[tuple[str, str]]) -> list[OriginVisitStats]:
        keys = _keys("ids", list(ids))
        with self._read("get visit statistics") as conn:
            found = self._stats_of(conn, keys, visited=True)
        return [found[k] for k in keys if k in found]

    def record_visit_statuses(self, messages: Sequence[VisitStatusMessage]) -> tuple[int, int]:
        given = list(messages)
        by_key: dict[tuple[str, str], list[VisitStatusMessage]] = defaultdict(list)
        for n, message in enumerate(given):
            if not isinstance(message, VisitStatusMessage):
                raise InvalidInput(f"messages[{n}]", f"{type(message).__name__} is no status")
            by_key[(message.origin, message.visit_type)].append(message)
        # a key whose statuses are all unfinished (created, ongoing) changes
        # nothing: no row is made or locked for it, as the reference's journal
        # client drops them before reading anything
        keys = sorted(k for k, found in by_key.items() if any(map(finished, found)))
        if not keys:
            return (0, len(given))
        changed_rows: list[dict[str, Any]] = []
        changed = 0
        with self._write("record visit statuses") as conn:
            # a row for each origin first (one with defaults is what no row
            # means), so that two feeds at once lock it rather than both insert
            defaults = [stats_row(OriginVisitStats(url=u, visit_type=t)) for u, t in keys]
            insert = self._upsert(stats_t).on_conflict_do_nothing()
            for chunk in _chunks(defaults, 1000):
                conn.execute(insert, list(chunk))
            current = self._stats_of(conn, keys, lock=True)
            positions = self._positions(conn, sorted({t for _, t in keys}))
            failing: list[tuple[str, str]] = []
            for key in keys:
                stats = current[key]
                moved = False
                for message in sorted(by_key[key], key=lambda m: m.date):
                    after = apply_status(stats, message, queue_position=positions.get(key[1]))
                    if after is not None:
                        stats, moved, changed = after, True, changed + 1
                if moved:
                    changed_rows.append({**stats_row(stats), **hold_row(stats)})
                    if disables(stats, self.disable_after_failures):
                        failing.append(key)
            statement = self._stats_upsert(keep_stored=False)
            for chunk in _chunks(changed_rows, 1000):
                conn.execute(statement, list(chunk))
            self._disable(conn, failing)
        return (changed, len(given) - changed)

    def _disable(self, conn: sa.Connection, keys: list[tuple[str, str]]) -> None:
        """Every listing of these origins disabled, and their statistics row
        with them (a lister listing one again enables it: sql_origins.py,
        ``_sum_listings``)."""
        urls_of: dict[str, list[str]] = defaultdict(list)
        for url, visit_type in keys:
            urls_of[visit_type].append(url)
        o = origin_t.c
        for visit_type, urls in sorted(urls_of.items()):
            for chunk in _chunks(sorted(urls), 1000):
                conn.execute(
                    sa.update(origin_t)
                    .where(o.visit_type == visit_type, o.url.in_(list(chunk)), o.enabled.is_(True))
                    .values(enabled=False)
                )
                conn.execute(
                    sa.update(stats_t)
                    .where(stats_t.c.visit_type == visit_type, stats_t.c.url.in_(list(chunk)))
                    .values(enabled=False)
                )

    def _positions(self, conn: sa.Connection, visit_types: list[str]) -> dict[str, datetime]:
        query = sa.select(position_t).where(position_t.c.visit_type.in_(visit_types))
        return {r.visit_type: r.position for r in conn.execute(query)}

    # -- metrics --------------------------------------------------------------

    def update_metrics(
        self, lister_id: str | None = None, *, now: datetime | None = None
    ) -> list[OriginMetrics]:
        at = _now(now)
        optional_name("lister_id", lister_id)
        s = stats_t.c
        enabled = _ENABLED

        def count(condition: Any) -> Any:
            return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)

        pending = enabled & (s.last_update > s.last_successful)
        due, window_over = s.due_at, self._window_over(at)
        due_now = enabled & (due <= at)
        gone = s.last_visit_status == "not_found"
        query = (
            sa.select(
                s.lister_id,
                s.visit_type,
                sa.func.count().label("origins_known"),
                count(enabled).label("origins_enabled"),
                # the reference's: enabled, never visited successfully (no
                # snapshot loaded, nor a loader's verdict): a failing one too
                count(enabled & s.last_successful.is_(None)).label("origins_never_visited"),
                count(enabled & s.last_visit.is_(None)).label("origins_never_attempted"),
                count(pending).label("origins_with_pending_changes"),
                count(enabled & (due > at)).label("origins_ok"),
                count(due_now & sa.or_(gone.is_(True), sa.not_(window_over))).label(
                    "origins_warning"
                ),
                count(due_now & window_over & sa.func.coalesce(gone, False).is_(False)).label(
                    "origins_error"
                ),
            )
            .where(s.lister_id.is_not(None))
            .group_by(s.lister_id, s.visit_type)
        )
        if lister_id is not None:
            query = query.where(s.lister_id == lister_id)
        # one pass over the rows every listed origin has, in a read (the
        # loops' writes go on); then the few rows of counts, written at once
        with self._read("count origins") as conn:
            self._maintenance(conn)
            found = [
                OriginMetrics(last_update=at, **{k: v for k, v in r._mapping.items()})
                for r in conn.execute(query)
            ]
        with self._write("update origin metrics") as conn:
            stale = sa.delete(metrics_t)
            if lister_id is not None:
                stale = stale.where(metrics_t.c.lister_id == lister_id)
            conn.execute(stale)
            if found:
                rows = [{c.name: getattr(m, c.name) for c in metrics_t.columns} for m in found]
                conn.execute(sa.insert(metrics_t), rows)
        return sorted(found, key=lambda m: (m.lister_id, m.visit_type))

    def _window_over(self, at: datetime) -> Any:
        """Whether the origin is late by its whole interval (2**offset hours)
        or more: an ERROR (visits/condition.py)."""
        due = stats_t.c.due_at
        offset = sa.func.coalesce(stats_t.c.next_position_offset, DEFAULT_OFFSET)
        hours = sa.literal(1).bitwise_lshift(
            sa.case((offset > MAX_OFFSET, MAX_OFFSET), else_=offset)
        )
        if self.engine.dialect.name == "sqlite":
            late = sa.func.julianday(sa.literal(at, UTCDateTime)) - sa.func.julianday(due)
            return late * 24.0 >= hours
        return due + sa.func.make_interval(0, 0, 0, 0, hours) <= at

    def get_metrics(
        self, lister_id: str | None = None, visit_type: str | None = None
    ) -> list[OriginMetrics]:
        optional_name("lister_id", lister_id)
        optional_name("visit_type", visit_type)
        query = sa.select(metrics_t).order_by(metrics_t.c.lister_id, metrics_t.c.visit_type)
        if lister_id is not None:
            query = query.where(metrics_t.c.lister_id == lister_id)
        if visit_type is not None:
            query = query.where(metrics_t.c.visit_type == visit_type)
        with self._read("get origin metrics") as conn:
            return [
                OriginMetrics(**{c.name: r._mapping[c.name] for c in metrics_t.columns})
                for r in conn.execute(query)
            ]
