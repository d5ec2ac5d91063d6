"""Which origins to visit next (:mod:`..visits.policy`): one claim statement
per policy, and the grab that marks what it chose as scheduled.

Several ``schedule-recurrent`` processes may grab visits of one visit type
at once: each grab holds the visit type's lock until it commits
(PostgreSQL: a transaction-level advisory lock; SQLite: its write
transaction), so the next grab sees the ``last_scheduled`` it wrote and no
origin is sent twice within the cooldown."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput, NotFound
from ..visits.model import ListedOrigin, aware, visit_type_name
from ..visits.policy import Cooldowns, Hold, VisitPolicy, visit_policy
from .sql_base import _chunks
from .sql_origins import MAX_PAGE, _now, optional_name, origin_from_row
from .sql_visit_stats import VisitStatsMethods
from .tables import listed_origin as origin_t
from .tables import lister as lister_t
from .tables import origin_visit_stats as stats_t
from .tables import visit_queue_position as position_t

logger = logging.getLogger(__name__)
o, s = origin_t.c, stats_t.c
#: as the partial indexes say it (SQLite matches an index's condition by its
#: terms: ``enabled = 1`` would not match ``enabled``)
_ENABLED = sa.text("origin_visit_stats.enabled")
#: as the index of ``first_visits_after_listing`` says it (store/tables.py)
_LISTING_ENABLED = sa.text("listed_origin.enabled")


ASC, DESC, ASC_NULLS_LAST = "asc", "desc", "asc nulls last"
#: most held origins a grab puts back in the policies' indexes
RELEASE_BATCH = 10_000
#: rows of its listing a ``first_visits_after_listing`` claim walks in its
#: index, per origin asked, before it reads the lister's origins whole (the
#: origins taken since the listing lie ahead of the others in that order:
#: deep into a listing's first visits, a walk would pass them all)
WALK_PER_ORIGIN = 20
#: share of a table's rows changed since it was last analysed beyond which a
#: ``first_visits_after_listing`` claim analyses it first (PostgreSQL)
STALE_STATISTICS = 0.2
#: the tables that claim joins
_JOINED = ("listed_origin", "origin_visit_stats")


def _ordered(key: Any, how: str) -> Any:
    if how == DESC:
        return key.desc()
    return key.asc().nulls_last() if how == ASC_NULLS_LAST else key.asc()


#: the keys of ix_listed_origin_first_visits after lister and visit type,
#: in its dated rows and in its undated ones (store/tables.py)
_DATED = [o.last_update, o.first_seen, o.url]
_UNDATED = [o.first_seen, o.url]


#: where the walks of a ``first_visits_after_listing`` claim end
#: (:meth:`GrabMethods._walk`): the conditions of its ready parts (the
#: lister's dated rows, then its undated ones), and those every part of the
#: claim gets (none: the walks read the whole listing)
Walk = tuple[list[list[Any]], list[Any]]


def _holds_over(now: datetime, cooldowns: Cooldowns) -> list[list[Any]]:
    """Per kind of hold, held by it and its long cooldown over (visits/policy.py,
    ``hold_of``): each a range of the holds' index."""
    return [[s.held == hold.value, s.held_since < now - hold.length(cooldowns)] for hold in Hold]


def _cooled(now: datetime, cooldowns: Cooldowns) -> list[Any]:
    """Out of every cooldown (:class:`Cooldowns`)."""
    sent = sa.or_(
        s.last_scheduled.is_(None),
        sa.and_(
            s.last_scheduled < now - cooldowns.scheduled,
            sa.or_(s.last_scheduled <= s.last_visit, s.last_scheduled < now - cooldowns.no_result),
        ),
    )
    status = s.last_visit_status
    failed = sa.or_(status.is_(None), status != "failed", s.last_visit < now - cooldowns.failed)
    missing = sa.or_(
        status.is_(None), status != "not_found", s.last_visit < now - cooldowns.not_found
    )
    return [sent, failed, missing]


class GrabMethods(VisitStatsMethods):
    """``peek_next_visits`` and ``grab_next_visits`` of :class:`SchedulerStore`."""

    def _policy_query(
        self,
        conn: sa.Connection,
        policy: VisitPolicy,
        *,
        now: datetime,
        lister_id: str | None,
    ) -> tuple[list[Any], list[tuple[Any, str]]]:
        """The policy's own conditions and order, over the statistics row
        every listed origin has (each pair matches one partial index of
        store/tables.py: a claim reads the first rows of that index);
        ``first_visits_after_listing`` orders by the lister's own listing
        (its forge date and first sighting of the origin), the order of
        its index on ``listed_origin``."""
        if policy is VisitPolicy.OLDEST_SCHEDULED_FIRST:
            return [], [(s.scheduled_order, ASC)]
        if policy is VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST:
            # (a success without a snapshot id is one: a loader's own verdict)
            return [s.last_successful.is_(None), s.last_update.is_not(None)], [(s.last_update, ASC)]
        if policy is VisitPolicy.ALREADY_VISITED_ORDER_BY_LAG:
            return [s.last_update > s.last_successful], [(s.lag, DESC)]
        if policy is VisitPolicy.ORIGINS_WITHOUT_LAST_UPDATE:
            return [s.last_update.is_(None)], [(s.queue_order, ASC)]
        if policy is VisitPolicy.STOP_AFTER_SUCCESS:
            return [s.last_successful.is_(None)], [(s.scheduled_order, ASC)]
        if policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING:
            if lister_id is None:
                raise InvalidInput("lister_id", f"policy {policy.value} needs a lister")
            finished = conn.scalar(
                sa.select(lister_t.c.last_listing_finished_at).where(lister_t.c.id == lister_id)
            )
            if finished is None and not conn.scalar(
                sa.select(sa.literal(1)).where(lister_t.c.id == lister_id)
            ):
                raise NotFound(f"no lister {lister_id!r}")
            since = [s.last_scheduled.is_(None)]
            if finished is not None:
                since.append(s.last_scheduled < finished)
            return [sa.or_(*since)], [(o.last_update, ASC_NULLS_LAST), (o.first_seen, ASC)]
        return [s.due_at <= now], [(s.due_at, ASC)]  # the promise's due (visits/condition.py)

    def _claim_query(
        self,
        conn: sa.Connection,
        visit_type: str,
        count: int,
        policy: VisitPolicy,
        *,
        now: datetime,
        lister_id: str | None,
        enabled: bool,
        cooldowns: Cooldowns,
        walk: Walk | None = None,
        whole: bool = False,
    ) -> sa.Select[Any]:
        """The urls (and queue positions) the policy picks, in its order:
        the first rows of the policy's index (origins in no long cooldown),
        merged with the held origins whose cooldown is over (a range of the
        holds' index per kind of hold: few, once grabs release them,
        :meth:`_release`). ``first_visits_after_listing`` reads the lister's
        rows of ``listed_origin`` in its index's order instead, each looked
        up in the statistics by key: its dated origins, then its undated
        ones (SQLite's indexes put nulls first), as far as ``walk`` says
        (:meth:`_walk`); ``whole``: the lister's origins read whole and
        sorted (when the walk was not enough)."""
        conditions, keys = self._policy_query(conn, policy, now=now, lister_id=lister_id)
        first_visits = policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING
        whole = first_visits and (whole or not enabled)  # (the index: enabled rows)
        common: list[Any] = [s.visit_type == visit_type, s.first_seen.is_not(None)]
        common += [*_cooled(now, cooldowns), *conditions]
        if enabled:
            common.append(_ENABLED)
        tie, ready = s.url, [[s.held.is_(None)]]
        if first_visits:
            common += [o.lister_id == lister_id, o.visit_type == visit_type, o.url == s.url]
            if enabled:
                common.append(_LISTING_ENABLED)
            tie = o.url
            if not whole:
                splits, everywhere = walk or self._walk(conn, lister_id, visit_type, count)
                ready = [[s.held.is_(None), *where] for where in splits]
                common += everywhere
        elif lister_id is not None:
            listed = [o.lister_id == lister_id, o.url == s.url, o.visit_type == s.visit_type]
            if enabled:
                listed.append(o.enabled.is_(True))
            common.append(sa.exists().where(*listed))
        labelled = [key.label(f"k{n}") for n, (key, _) in enumerate(keys)]

        def part(*where: Any, split: bool = False) -> sa.Subquery:
            # (a split part's first key is all null or none: plain order)
            order = [
                _ordered(key, ASC if split and how == ASC_NULLS_LAST else how) for key, how in keys
            ]
            chosen = sa.select(s.url, s.next_visit_queue_position, *labelled).where(*common, *where)
            if whole:  # every one first (OFFSET 0: not walked in order), then sorted
                every = chosen.offset(0).subquery()
                order = [_ordered(every.c[f"k{n}"], how) for n, (_, how) in enumerate(keys)]
                return sa.select(every).order_by(*order, every.c.url).limit(count).subquery()
            return chosen.order_by(*order, tie).limit(count).subquery()

        parts = [part(*where, split=first_visits and not whole) for where in ready]
        parts += [part(*over) for over in _holds_over(now, cooldowns)]
        both = sa.union_all(*(sa.select(p) for p in parts)).subquery()
        order = [_ordered(both.c[f"k{n}"], how) for n, (_, how) in enumerate(keys)]
        rank = sa.func.row_number().over(order_by=[*order, both.c.url])
        return (
            sa.select(both.c.url, both.c.next_visit_queue_position, rank.label("rank"))
            .order_by(*order, both.c.url)
            .limit(count)
        )

    def _walk(
        self, conn: sa.Connection, lister_id: str | None, visit_type: str, count: int
    ) -> Walk:
        """How far a ``first_visits_after_listing`` claim of ``count`` reads
        the lister's rows in its index: ``WALK_PER_ORIGIN * count`` rows of
        its dated ones, else of its undated ones after all the dated ones.
        Every part of the claim stops there (the held origins too), so that
        the claim picks the first ones in the policy's order, or fewer
        (then :meth:`_next_visits` reads the listing whole)."""
        dated, undated = o.last_update.is_not(None), o.last_update.is_(None)
        keys = [o.last_update, o.first_seen, o.url]  # (the index's order)

        def end(where: Any, columns: list[Any]) -> Any:
            row = conn.execute(
                sa.select(*keys)
                .where(
                    o.lister_id == lister_id, o.visit_type == visit_type, _LISTING_ENABLED, where
                )
                .order_by(*keys)
                .offset(WALK_PER_ORIGIN * max(count, 1) - 1)
                .limit(1)
            ).first()
            if row is None:  # fewer rows: the walk reads them all
                return None
            at = [sa.bindparam(None, row._mapping[c.name], type_=c.type) for c in columns]
            return sa.tuple_(*columns) <= sa.tuple_(*at)

        ending = end(dated, keys)
        if ending is not None:
            return [[]], [dated, ending]  # (the undated ones come after)
        ending = end(undated, keys[1:])
        if ending is not None:
            return [[dated], [undated, ending]], [sa.or_(dated, ending)]
        return [[dated], [undated]], []

    def _release(
        self, conn: sa.Connection, visit_type: str, now: datetime, cooldowns: Cooldowns
    ) -> None:
        """Origins whose long cooldown is over go back to the policies'
        indexes (a bounded batch per grab: the claim reads the others from
        the holds' index meanwhile)."""
        for over in _holds_over(now, cooldowns):
            batch = sa.select(s.url).where(s.visit_type == visit_type, *over).limit(RELEASE_BATCH)
            conn.execute(
                sa.update(stats_t)
                .where(s.visit_type == visit_type, s.url.in_(batch.scalar_subquery()))
                .values(held=None, held_since=None)
            )

    def _next_visits(
        self,
        conn: sa.Connection,
        visit_type: str,
        count: int,
        policy: VisitPolicy,
        *,
        now: datetime,
        lister_id: str | None,
        enabled: bool,
        cooldowns: Cooldowns,
    ) -> list[tuple[ListedOrigin, datetime | None]]:
        """The origins the policy picks and their queue positions; a
        ``first_visits_after_listing`` claim whose walk ended before it
        found ``count`` reads the lister's origins whole instead."""
        walk = None
        if policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING:
            self._planner_statistics(conn)
        if policy is VisitPolicy.FIRST_VISITS_AFTER_LISTING and enabled:
            walk = self._walk(conn, lister_id, visit_type, count)

        def claim(whole: bool) -> list[tuple[ListedOrigin, datetime | None]]:
            query = self._claim_query(
                conn,
                visit_type,
                count,
                policy,
                now=now,
                lister_id=lister_id,
                enabled=enabled,
                cooldowns=cooldowns,
                walk=walk,
                whole=whole,
            )
            return self._listed(conn, query, visit_type, lister_id, enabled)

        found = claim(False)
        if walk is not None and walk[1] and len(found) < count:
            found = claim(True)
        return found

    def _planner_statistics(self, conn: sa.Connection) -> None:
        """Analyse the tables a ``first_visits_after_listing`` claim joins
        when either was never analysed or changed by more than
        :data:`STALE_STATISTICS` of its rows since. This policy runs right
        after a listing, before autovacuum has looked at the new rows;
        without statistics PostgreSQL guessed one row per lister and joined
        each listed origin to every statistics row of its visit type (a
        grab of 1,000 over a fresh listing of 10,005 origins passed the
        30 s statement timeout; 0.09 s once analysed). ``ANALYZE`` reads a
        sample (30,000 rows), blocks no reader or writer, and is skipped
        with a warning for a role that does not own the tables."""
        if not self._capabilities.planner_statistics:
            return
        stale = conn.execute(
            sa.text(
                "SELECT c.relname FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " LEFT JOIN pg_stat_user_tables t ON t.relid = c.oid"
                " WHERE n.nspname = current_schema() AND c.relname IN :names"
                " AND (c.reltuples < 0 OR t.n_mod_since_analyze"
                " > :share * greatest(c.reltuples, t.n_live_tup) + 1000)"
            ).bindparams(sa.bindparam("names", expanding=True)),
            {"names": list(_JOINED), "share": STALE_STATISTICS},
        ).scalars()
        for table in sorted(stale):
            logger.info("analysing %s before a first_visits_after_listing claim", table)
            conn.execute(sa.text(f'ANALYZE "{table}"'))

    def _listed(
        self,
        conn: sa.Connection,
        query: sa.Select[Any],
        visit_type: str,
        lister_id: str | None,
        enabled: bool,
    ) -> list[tuple[ListedOrigin, datetime | None]]:
        """The claim's urls as listed origins, in its order."""
        chosen = query.subquery()
        # one listing of each url (an origin listed by two listers is sent
        # once): the given lister's, else an enabling one, the first by id
        listed = [o.url == chosen.c.url, o.visit_type == visit_type]
        if lister_id is not None:
            listed.append(o.lister_id == lister_id)
        if enabled:
            listed.append(o.enabled.is_(True))
        rows = conn.execute(
            sa.select(chosen.c.next_visit_queue_position.label("queue_position"), origin_t)
            .select_from(chosen.join(origin_t, sa.and_(*listed)))
            .order_by(chosen.c.rank, sa.case((o.enabled.is_(True), 0), else_=1), o.lister_id)
        )
        found: dict[str, tuple[ListedOrigin, datetime | None]] = {}
        for row in rows:
            if row.url not in found:
                found[row.url] = (origin_from_row(row._mapping), row.queue_position)
        return list(found.values())

    def _grab_arguments(
        self,
        visit_type: str,
        count: int,
        policy: Any,
        cooldowns: Cooldowns | None,
        lister_id: str | None,
        enabled: bool,
    ) -> tuple[str, VisitPolicy, Cooldowns]:
        visit_type_name("visit_type", visit_type)
        optional_name("lister_id", lister_id)
        if not isinstance(enabled, bool):
            raise InvalidInput("enabled", f"{enabled!r} is not true or false")
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_PAGE:
            raise InvalidInput(
                "count", f"{count!r} is not a number of visits from 0 to {MAX_PAGE:,}"
            )
        if cooldowns is not None and not isinstance(cooldowns, Cooldowns):
            raise InvalidInput("cooldowns", f"{type(cooldowns).__name__} is not cooldowns")
        return visit_type, visit_policy("policy", policy), cooldowns or Cooldowns()

    def peek_next_visits(
        self,
        visit_type: str,
        count: int,
        policy: VisitPolicy | str,
        *,
        now: datetime | None = None,
        lister_id: str | None = None,
        enabled: bool = True,
        cooldowns: Cooldowns | None = None,
        lister_name: str | None = None,
        lister_instance_name: str | None = None,
    ) -> list[ListedOrigin]:
        visit_type, chosen, cools = self._grab_arguments(
            visit_type, count, policy, cooldowns, lister_id, enabled
        )
        if lister_name is not None or lister_instance_name is not None:
            named = self._lister_by_name(lister_name, lister_instance_name)
            if named is None or (lister_id is not None and named != lister_id):
                return []  # no such lister, or not the one lister_id names
            lister_id = named
        at = _now(now)
        with self._read("peek next visits") as conn:
            found = self._next_visits(
                conn,
                visit_type,
                count,
                chosen,
                now=at,
                lister_id=lister_id,
                enabled=enabled,
                cooldowns=cools,
            )
        return [origin for origin, _ in found]

    def grab_next_visits(
        self,
        visit_type: str,
        count: int,
        policy: VisitPolicy | str,
        *,
        now: datetime | None = None,
        lister_id: str | None = None,
        enabled: bool = True,
        cooldowns: Cooldowns | None = None,
        lister_name: str | None = None,
        lister_instance_name: str | None = None,
    ) -> list[ListedOrigin]:
        visit_type, chosen, cools = self._grab_arguments(
            visit_type, count, policy, cooldowns, lister_id, enabled
        )
        if lister_name is not None or lister_instance_name is not None:
            named = self._lister_by_name(lister_name, lister_instance_name)
            if named is None or (lister_id is not None and named != lister_id):
                return []  # no such lister, or not the one lister_id names
            lister_id = named
        at = _now(now)
        with self.transaction() as tx:
            tx._serialise("grab next visits", f"visits:{visit_type}")
            with tx._write("grab next visits") as conn:
                tx._release(conn, visit_type, at, cools)
                found = tx._next_visits(
                    conn,
                    visit_type,
                    count,
                    chosen,
                    now=at,
                    lister_id=lister_id,
                    enabled=enabled,
                    cooldowns=cools,
                )
                tx._mark_scheduled(conn, visit_type, [origin for origin, _ in found], at)
                if chosen is VisitPolicy.ORIGINS_WITHOUT_LAST_UPDATE:
                    taken = [p for _, p in found if p is not None]
                    tx._advance_queue(conn, visit_type, taken, at if found else None)
        return [origin for origin, _ in found]

    def _lister_by_name(self, name: str | None, instance_name: str | None) -> str | None:
        """The id of the one lister ``name`` and ``instance_name`` name (either
        may be left out), ``None`` when none does; several: refused."""
        where = []
        for field, value, column in (
            ("lister_name", name, lister_t.c.name),
            ("lister_instance_name", instance_name, lister_t.c.instance_name),
        ):
            if value is not None:
                if not isinstance(value, str):
                    raise InvalidInput(field, f"{value!r} is not a name")
                where.append(column == value)
        query = sa.select(lister_t.c.id, lister_t.c.instance_name).where(*where).limit(6)
        with self._read("find a lister by name") as conn:
            found = conn.execute(query.order_by(lister_t.c.instance_name)).all()
        if len(found) > 1:
            instances = ", ".join(repr(row.instance_name) for row in found[:5])
            raise InvalidInput(
                "lister_instance_name",
                f"lister {name!r} has several instances ({instances}...): a grab is for "
                "one lister, name its instance too",
            )
        return found[0].id if found else None

    def visit_scheduler_queue_position_get(self) -> dict[str, datetime]:
        query = sa.select(position_t).order_by(position_t.c.visit_type)
        with self._read("read the queue positions") as conn:
            return {row.visit_type: row.position for row in conn.execute(query)}

    def visit_scheduler_queue_position_set(self, visit_type: str, position: datetime) -> None:
        visit_type_name("visit_type", visit_type)
        at = aware("position", position)
        if at is None:
            raise InvalidInput("position", "a queue position is an instant, not null")
        insert = self._upsert(position_t).values(visit_type=visit_type, position=at)
        with self._write("set a queue position") as conn:
            conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[position_t.c.visit_type], set_={"position": at}
                )
            )

    def _mark_scheduled(
        self, conn: sa.Connection, visit_type: str, origins: list[ListedOrigin], at: datetime
    ) -> None:
        """Sent at ``at``: held until a status comes (the rows exist: every
        listed origin has one, and a claim reads nothing else)."""
        urls = sorted(x.url for x in origins)  # one lock order
        mark = sa.update(stats_t).values(last_scheduled=at, held=Hold.SENT.value, held_since=at)
        for chunk in _chunks(urls, 1000):
            conn.execute(mark.where(s.visit_type == visit_type, s.url.in_(list(chunk))))

    def _advance_queue(
        self,
        conn: sa.Connection,
        visit_type: str,
        positions: list[datetime],
        start: datetime | None = None,
    ) -> None:
        """The visit type's queue moves to the furthest position just taken.
        Origins taken without a position of their own (never visited) start
        a queue that has none at ``start``, the grab's instant (the
        reference's starts at 0, its first second)."""
        if not positions:
            if start is not None:
                first = self._upsert(position_t).values(visit_type=visit_type, position=start)
                conn.execute(first.on_conflict_do_nothing(index_elements=[position_t.c.visit_type]))
            return
        furthest = max(positions)
        insert = self._upsert(position_t).values(visit_type=visit_type, position=furthest)
        conn.execute(
            insert.on_conflict_do_update(
                index_elements=[position_t.c.visit_type],
                set_={
                    "position": sa.case(
                        (position_t.c.position < furthest, furthest),
                        else_=position_t.c.position,
                    )
                },
            )
        )
