"""Listers and listed origins (:class:`~.role_origins.OriginStore`, first
half): one Core code path for PostgreSQL and SQLite, upserts with the
dialect's ``INSERT … ON CONFLICT``."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput, NotFound, StaleUpdate
from ..visits.model import (
    ListedOrigin,
    ListedOriginPage,
    Lister,
    OriginVisitStats,
    aware,
    origin_scheme,
    origin_url,
    visit_task_type,
)
from .sql_base import SQLBase, _chunks
from .tables import listed_origin as origin_t
from .tables import lister as lister_t
from .tables import origin_visit_stats as stats_t
from .tables import task_type as type_t

#: most rows one page of listed origins holds (the API's read bound)
MAX_PAGE = 10_000


def lister_from_row(row: Mapping[Any, Any]) -> Lister:
    return Lister(**{c.name: row[c.name] for c in lister_t.columns})


def origin_from_row(row: Mapping[Any, Any]) -> ListedOrigin:
    return ListedOrigin.stored({c.name: row[c.name] for c in origin_t.columns})


def encode_token(origin: ListedOrigin) -> str:
    raw = json.dumps([origin.lister_id, origin.url, origin.visit_type]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str) -> tuple[str, str, str]:
    """The key a page token names; :class:`InvalidInput` (``page_token``)
    for anything :func:`encode_token` did not make."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        key = None
    if not (isinstance(key, list) and len(key) == 3 and all(isinstance(k, str) for k in key)):
        raise InvalidInput("page_token", f"{token[:80]!r} is not a page token from this store")
    return key[0], key[1], key[2]


def optional_name(where: str, value: object) -> str | None:
    """``value`` if it is ``None`` or a text (a lister id, a visit type as a
    filter): anything else is refused naming ``where``."""
    if value is not None and (not isinstance(value, str) or len(value) > 4096):
        raise InvalidInput(where, f"{value!r} is not a name or an id")
    return value


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    found = aware("now", now)
    assert found is not None
    return found


def _by_first(keys: list[tuple[str, str, str]]) -> dict[tuple[str, str], list[str]]:
    """Listed-origin keys grouped by lister and visit type: their urls."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for lister_id, url, visit_type in keys:
        grouped.setdefault((lister_id, visit_type), []).append(url)
    return grouped


def _first_visit_waiting(lister_id: str, finished: datetime) -> sa.Select[Any]:
    """One enabled origin of the lister not scheduled since ``finished``
    (its statistics row says so; an origin without one waits too): the
    lister's rows by its key, each looked up in the statistics by key."""
    o, st = origin_t.c, stats_t.c
    joined = origin_t.outerjoin(stats_t, sa.and_(st.url == o.url, st.visit_type == o.visit_type))
    return (
        sa.select(o.url)
        .select_from(joined)
        .where(
            o.lister_id == lister_id,
            o.enabled.is_(True),
            sa.or_(st.last_scheduled.is_(None), st.last_scheduled < finished),
        )
        .limit(1)
    )


class OriginMethods(SQLBase):
    """Listers and listed origins of :class:`SchedulerStore`."""

    # -- listers --------------------------------------------------------------

    def get_or_create_lister(
        self,
        name: str,
        instance_name: str = "",
        first_visits_queue_prefix: str | None = None,
        *,
        now: datetime | None = None,
    ) -> Lister:
        at = _now(now)
        wanted = Lister(
            name=name,
            instance_name=instance_name,
            first_visits_queue_prefix=first_visits_queue_prefix,
        )
        row = {
            "id": uuid.uuid4().hex,
            "name": wanted.name,
            "instance_name": wanted.instance_name,
            "current_state": {},
            "created": at,
            "updated": at,
            "first_visits_queue_prefix": wanted.first_visits_queue_prefix,
        }
        where = (lister_t.c.name == wanted.name) & (lister_t.c.instance_name == instance_name)
        with self._write("get or create a lister") as conn:
            conn.execute(self._upsert(lister_t).values(row).on_conflict_do_nothing())
            found = conn.execute(sa.select(lister_t).where(where)).one()
        return lister_from_row(found._mapping)

    def get_listers(self, with_first_visits_to_schedule: bool = False) -> list[Lister]:
        if not isinstance(with_first_visits_to_schedule, bool):
            raise InvalidInput(
                "with_first_visits_to_schedule",
                f"{with_first_visits_to_schedule!r} is not true or false",
            )
        query = sa.select(lister_t).order_by(lister_t.c.name, lister_t.c.instance_name)
        if with_first_visits_to_schedule:
            c = lister_t.c
            query = query.where(
                c.last_listing_finished_at.is_not(None),
                c.first_visits_queue_prefix.is_not(None),
                c.first_visits_scheduled_at.is_(None),
            )
        with self._read("list listers") as conn:
            return [lister_from_row(r._mapping) for r in conn.execute(query)]

    def get_lister(self, name: str, instance_name: str | None = None) -> Lister | None:
        if not isinstance(name, str):
            raise InvalidInput("name", f"{name!r} is not a lister name")
        if instance_name is not None and not isinstance(instance_name, str):
            raise InvalidInput("instance_name", f"{instance_name!r} is not an instance name")
        query = sa.select(lister_t).where(
            lister_t.c.name == name, lister_t.c.instance_name == (instance_name or "")
        )
        with self._read("get a lister") as conn:
            found = conn.execute(query).first()
        return None if found is None else lister_from_row(found._mapping)

    def get_listers_by_id(self, lister_ids: Sequence[str]) -> list[Lister]:
        if isinstance(lister_ids, str | bytes) or not isinstance(lister_ids, Sequence):
            raise InvalidInput("lister_ids", f"{type(lister_ids).__name__} is not a list of ids")
        wanted = sorted(
            {optional_name(f"lister_ids[{n}]", v) or "" for n, v in enumerate(lister_ids)}
        )
        if len(wanted) > MAX_PAGE:
            raise InvalidInput("lister_ids", f"names at most {MAX_PAGE:,} listers per call")
        found: list[Lister] = []
        with self._read("get listers by id") as conn:
            for chunk in _chunks(wanted, 1000):
                query = sa.select(lister_t).where(lister_t.c.id.in_(list(chunk)))
                found.extend(lister_from_row(r._mapping) for r in conn.execute(query))
        return sorted(found, key=lambda x: (x.name, x.instance_name))

    def get_visit_types_for_listed_origins(self, lister_id: str) -> list[str]:
        if not isinstance(lister_id, str) or len(lister_id) > 4096:
            raise InvalidInput("lister_id", f"{lister_id!r} is not a lister id")
        query = (
            sa.select(origin_t.c.visit_type)
            .where(origin_t.c.lister_id == lister_id)
            .distinct()
            .order_by(origin_t.c.visit_type)
        )
        with self._read("get a lister's visit types") as conn:
            return list(conn.scalars(query))

    def update_lister(self, lister: Lister, *, now: datetime | None = None) -> Lister:
        if not isinstance(lister, Lister):
            raise InvalidInput("lister", f"{type(lister).__name__} is not a lister")
        if lister.id is None:
            raise InvalidInput("id", "a lister to update needs its id (get_or_create_lister)")
        at = _now(now)
        with self._write("update a lister") as conn:
            stored = conn.execute(
                self._lock(sa.select(lister_t).where(lister_t.c.id == lister.id))
            ).first()
            if stored is None:
                raise NotFound(f"no lister {lister.id!r}")
            if stored.updated != lister.updated:
                given = lister.updated.isoformat() if lister.updated else "none"
                raise StaleUpdate(
                    "updated",
                    f"lister {lister.name!r} was updated at {stored.updated.isoformat()} "
                    f"since this copy was read (its token: {given}); read it again",
                )
            # a token must change even when two updates share an instant
            updated = at if at > stored.updated else stored.updated + timedelta(microseconds=1)
            values = {
                "current_state": dict(lister.current_state),
                "updated": updated,
                "last_listing_finished_at": lister.last_listing_finished_at,
                "first_visits_queue_prefix": lister.first_visits_queue_prefix,
                "first_visits_scheduled_at": lister.first_visits_scheduled_at,
            }
            conn.execute(sa.update(lister_t).where(lister_t.c.id == lister.id).values(values))
            found = conn.execute(sa.select(lister_t).where(lister_t.c.id == lister.id)).one()
        return lister_from_row(found._mapping)

    def mark_first_visits_scheduled(
        self, lister_id: str, *, now: datetime | None = None
    ) -> Lister | None:
        if not isinstance(lister_id, str) or len(lister_id) > 4096:
            raise InvalidInput("lister_id", f"{lister_id!r} is not a lister id")
        at = _now(now)
        c = lister_t.c
        with self._write("mark a lister's first visits scheduled") as conn:
            stored = conn.execute(self._lock(sa.select(lister_t).where(c.id == lister_id))).first()
            if stored is None:
                raise NotFound(f"no lister {lister_id!r}")
            finished = stored.last_listing_finished_at
            if (
                finished is None
                or stored.first_visits_queue_prefix is None
                or stored.first_visits_scheduled_at is not None
            ):
                return None  # not waiting for its first visits
            if conn.execute(_first_visit_waiting(lister_id, finished)).first() is not None:
                return None
            # a new token as update_lister gives: a lister's copy read before
            # is stale, so it cannot write the mark back to null unseen
            updated = at if at > stored.updated else stored.updated + timedelta(microseconds=1)
            values = {"first_visits_scheduled_at": at, "updated": updated}
            conn.execute(sa.update(lister_t).where(c.id == lister_id).values(values))
            found = conn.execute(sa.select(lister_t).where(c.id == lister_id)).one()
        return lister_from_row(found._mapping)

    # -- listed origins ---------------------------------------------------------

    def _check_origins(self, conn: sa.Connection, origins: Sequence[ListedOrigin]) -> None:
        listers = sorted({o.lister_id for o in origins})
        known = set(conn.scalars(sa.select(lister_t.c.id).where(lister_t.c.id.in_(listers))))
        for origin in origins:
            if origin.lister_id not in known:
                raise InvalidInput(
                    "lister_id",
                    f"no lister {origin.lister_id!r} (get_or_create_lister gives the id)",
                )
        wanted = sorted({visit_task_type(o.visit_type) for o in origins})
        types = set(conn.scalars(sa.select(type_t.c.type).where(type_t.c.type.in_(wanted))))
        for origin in origins:
            if visit_task_type(origin.visit_type) not in types:
                raise InvalidInput(
                    "visit_type",
                    f"{origin.visit_type!r} is not a known visit type: no task type "
                    f"{visit_task_type(origin.visit_type)!r} is registered to run its "
                    "visits (swh scheduler task-type register)",
                )

    def record_listed_origins(
        self, origins: Sequence[ListedOrigin], *, now: datetime | None = None
    ) -> list[ListedOrigin]:
        at = _now(now)
        given = list(origins)
        if not given:
            return []
        for n, origin in enumerate(given):
            if not isinstance(origin, ListedOrigin):
                raise InvalidInput(f"origins[{n}]", f"{type(origin).__name__} is not an origin")
            origin_scheme(f"origins[{n}].url", origin.url, self.origin_schemes)
            if origin.forked_from_url is not None:
                where = f"origins[{n}].forked_from_url"
                origin_scheme(where, origin.forked_from_url, self.origin_schemes)
        latest = {o.key: o for o in given}  # an origin given twice: the last counts
        rows = [
            {
                "lister_id": o.lister_id,
                "url": o.url,
                "visit_type": o.visit_type,
                "extra_loader_arguments": dict(o.extra_loader_arguments),
                "enabled": o.enabled,
                "first_seen": at,
                "last_seen": at,
                "last_update": o.last_update,
                "is_fork": o.is_fork,
                "forked_from_url": o.forked_from_url,
            }
            for o in sorted(latest.values(), key=lambda o: o.key)  # one lock order
        ]
        kept = {"lister_id", "url", "visit_type", "first_seen"}
        with self._write("record listed origins") as conn:
            self._check_origins(conn, given)
            insert = self._upsert(origin_t)
            changing = {c.name: insert.excluded[c.name] for c in origin_t.columns}
            statement = insert.on_conflict_do_update(
                index_elements=[origin_t.c.lister_id, origin_t.c.url, origin_t.c.visit_type],
                set_={k: v for k, v in changing.items() if k not in kept},
            )
            for chunk in _chunks(rows, 1000):
                conn.execute(statement, list(chunk))
            self._sum_listings(conn, sorted({(o.url, o.visit_type) for o in latest.values()}))
            stored = self._origins_by_key(conn, list(latest))
        return [stored[o.key] for o in given]

    def _sum_listings(self, conn: sa.Connection, keys: list[tuple[str, str]]) -> None:
        """What the listers say of each origin, summed on its statistics row
        (made if need be): whether any enables it, its first sighting, the
        latest forge date, and the lister whose metrics count it (an enabling
        one, the first by id). The policies and the metrics read nothing
        else of a listing."""
        o = origin_t.c
        blank = OriginVisitStats(url="https://a.b", visit_type="t")  # a new row's counters
        insert = self._upsert(stats_t)
        statement = insert.on_conflict_do_update(
            index_elements=[stats_t.c.url, stats_t.c.visit_type],
            set_={
                k: insert.excluded[k] for k in ("enabled", "first_seen", "last_update", "lister_id")
            },
        )
        urls_of: dict[str, list[str]] = {}
        for url, visit_type in keys:
            urls_of.setdefault(visit_type, []).append(url)
        for visit_type, chunk in (
            (t, chunk) for t, urls in sorted(urls_of.items()) for chunk in _chunks(urls, 1000)
        ):
            query = (
                sa.select(
                    o.url,
                    o.visit_type,
                    sa.func.max(sa.case((o.enabled.is_(True), 1), else_=0)).label("enabled"),
                    sa.func.min(o.first_seen).label("first_seen"),
                    sa.func.max(o.last_update).label("last_update"),
                    sa.func.coalesce(
                        sa.func.min(sa.case((o.enabled.is_(True), o.lister_id))),
                        sa.func.min(o.lister_id),
                    ).label("lister_id"),
                )
                .where(o.visit_type == visit_type, o.url.in_(list(chunk)))
                .group_by(o.url, o.visit_type)
                .order_by(o.url, o.visit_type)
            )
            rows = [
                {
                    **row._asdict(),
                    "enabled": bool(row.enabled),
                    "next_position_offset": blank.next_position_offset,
                    "successive_visits": blank.successive_visits,
                }
                for row in conn.execute(query)
            ]
            if rows:
                conn.execute(statement, rows)

    def _origins_by_key(
        self, conn: sa.Connection, keys: list[tuple[str, str, str]]
    ) -> dict[tuple[str, str, str], ListedOrigin]:
        found: dict[tuple[str, str, str], ListedOrigin] = {}
        o = origin_t.c
        for (lister_id, visit_type), urls in _by_first(keys).items():
            for chunk in _chunks(urls, 1000):  # (a list of pairs is no index range)
                query = sa.select(origin_t).where(
                    o.lister_id == lister_id, o.visit_type == visit_type, o.url.in_(list(chunk))
                )
                for row in conn.execute(query):
                    origin = origin_from_row(row._mapping)
                    found[origin.key] = origin
        return found

    def get_listed_origins(
        self,
        lister_id: str | None = None,
        url: str | None = None,
        urls: Sequence[str] | None = None,
        enabled: bool | None = True,
        limit: int = 1000,
        page_token: str | None = None,
    ) -> ListedOriginPage:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("limit", f"{limit!r} is not a page size from 1 to {MAX_PAGE:,}")
        optional_name("lister_id", lister_id)
        if enabled is not None and not isinstance(enabled, bool):
            raise InvalidInput("enabled", f"{enabled!r} is not true, false or null")
        query = sa.select(origin_t)
        if lister_id is not None:
            query = query.where(origin_t.c.lister_id == lister_id)
        if url is not None:
            query = query.where(origin_t.c.url == origin_url("url", url))
        if urls is not None:
            wanted = [origin_url("urls", u) for u in urls]
            if len(wanted) > MAX_PAGE:
                raise InvalidInput("urls", f"names at most {MAX_PAGE:,} urls per call")
            query = query.where(origin_t.c.url.in_(wanted))
        if enabled is not None:
            query = query.where(origin_t.c.enabled.is_(bool(enabled)))
        if page_token is not None:
            after = decode_token(page_token)
            key = sa.tuple_(origin_t.c.lister_id, origin_t.c.url, origin_t.c.visit_type)
            query = query.where(key > sa.tuple_(*(sa.literal(k) for k in after)))
        query = query.order_by(origin_t.c.lister_id, origin_t.c.url, origin_t.c.visit_type)
        with self._read("get listed origins") as conn:
            found = [origin_from_row(r._mapping) for r in conn.execute(query.limit(limit + 1))]
        more = len(found) > limit
        page = tuple(found[:limit])
        return ListedOriginPage(page, encode_token(page[-1]) if more else None)
