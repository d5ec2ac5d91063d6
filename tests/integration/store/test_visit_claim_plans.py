"""Each visit policy's claim reads its own partial index (store/tables.py),
on SQLite and PostgreSQL: a grab reads the first rows of one index, never
the whole table and a sort (the benchmark, ``python -m benchmarks visits``,
measures what that buys at 10M origins); ``first_visits_after_listing``'s
is on ``listed_origin``, one lister's origins in its listing's order."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.feedback import VisitStatusMessage
from swh_like_scheduler.visits.model import ListedOrigin
from swh_like_scheduler.visits.policy import Cooldowns, VisitPolicy

#: the index each policy must read
INDEXES = {
    VisitPolicy.OLDEST_SCHEDULED_FIRST: "ix_origin_visit_stats_scheduled",
    VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST: "ix_origin_visit_stats_never_visited",
    VisitPolicy.ALREADY_VISITED_ORDER_BY_LAG: "ix_origin_visit_stats_lag",
    VisitPolicy.ORIGINS_WITHOUT_LAST_UPDATE: "ix_origin_visit_stats_queue",
    VisitPolicy.STOP_AFTER_SUCCESS: "ix_origin_visit_stats_unvisited",
    VisitPolicy.DEADLINE: "ix_origin_visit_stats_due",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def listed(request: pytest.FixtureRequest, now: datetime) -> SQLAlchemyStore:
    if request.param == "sqlite":
        store = SQLAlchemyStore.from_url(request.getfixturevalue("sqlite_url"))
        request.addfinalizer(store.close)
    else:
        store = request.getfixturevalue("pg_store")
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    lister = str(store.get_or_create_lister("gitlab", now=now).id)
    store.record_listed_origins(
        [
            ListedOrigin(
                lister,
                f"https://forge.example/p{n}",
                "git",
                last_update=None if n % 3 == 0 else now - n * timedelta(minutes=1),
            )
            for n in range(300)
        ],
        now=now,
    )
    return store


def plan(
    store: SQLAlchemyStore,
    policy: VisitPolicy,
    now: datetime,
    lister_id: str | None = None,
    *,
    count: int = 1000,
    forced: bool = True,
) -> str:
    """The claim's plan; ``forced``: PostgreSQL told to read no table whole."""
    with store.engine.connect() as conn:
        query: Any = store._claim_query(
            conn,
            "git",
            count,
            policy,
            now=now,
            lister_id=lister_id,
            enabled=True,
            cooldowns=Cooldowns(),
        )
        compiled = query.compile(store.engine, compile_kwargs={"literal_binds": True})
        if store.engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").all()
            return "\n".join(str(r[-1]) for r in rows)
        if forced:  # a table of 300 rows is read faster whole: say what may be used
            conn.exec_driver_sql("SET enable_seqscan = off")
            conn.exec_driver_sql("SET enable_bitmapscan = off")
        rows = conn.exec_driver_sql(f"EXPLAIN {compiled}").all()
        return "\n".join(str(r[0]) for r in rows)


@pytest.mark.parametrize("policy", list(INDEXES), ids=lambda p: p.value)
def test_each_policy_reads_its_partial_index_without_a_sort(
    listed: SQLAlchemyStore, policy: VisitPolicy, now: datetime
) -> None:
    """The origins in no long cooldown: the first rows of the policy's
    index, in its order (no sort); the held ones whose cooldown is over: a
    range of the holds' index per kind of hold (a sort of those only)."""
    found = plan(listed, policy, now)
    assert INDEXES[policy] in found, found
    assert found.count("ix_origin_visit_stats_held") == 3, found
    assert "SCAN origin_visit_stats\n" not in found + "\n" and "Seq Scan" not in found, found
    if listed.engine.dialect.name == "postgresql":
        ready = found.split(f"using {INDEXES[policy]}")[0].rsplit("->", 2)[-2]
        assert "Sort" not in ready, found
        for hold in ("sent", "failed", "not_found"):
            assert f"held = '{hold}'::text) AND (held_since <" in found, found
    else:
        assert "(visit_type=? AND held=? AND held_since<?)" in found, found


def _ready_parts(store: SQLAlchemyStore, found: str) -> list[str]:
    """The parts of a claim's plan that walk ix_listed_origin_first_visits,
    each checked: in the index's order (no sort), each origin looked up in
    the statistics by key."""
    if store.engine.dialect.name == "postgresql":
        index = "Index Only Scan using ix_listed_origin_first_visits"
        ready = [p for p in found.split("Subquery Scan")[1:] if index in p]
        for part in ready:
            assert "Sort" not in part, found
            assert "Index Scan using pk_origin_visit_stats" in part, found
            assert "Index Cond: ((url = listed_origin" in part, found
        return ready
    index = "SEARCH listed_origin USING INDEX ix_listed_origin_first_visits"
    ready = [p.split("\nSCAN ")[0] for p in found.split("CO-ROUTINE")[1:] if index in p]
    for inside in ready:  # (each part's own statement)
        assert "TEMP B-TREE" not in inside, found
        assert "SEARCH origin_visit_stats USING INDEX" in inside, found
        assert "(url=? AND visit_type=?)" in inside, found
    return ready


def test_first_visits_after_listing_reads_its_listers_index_without_a_sort(
    listed: SQLAlchemyStore, now: datetime
) -> None:
    """One lister's origins in its listing's order: the first rows of its
    index on ``listed_origin`` (its dated origins, then its undated ones:
    two ranges), each looked up in the statistics by key; the held ones
    whose cooldown is over from the holds' index, as for every policy.
    Planned as is (no table forbidden), the statistics counted, a claim of
    11 of 300: at 1M origins it read the whole statistics table and sorted
    it (1.5 to 2.4 s a grab of 1,000)."""
    lister = str(listed.get_or_create_lister("gitlab", now=now).id)
    with listed.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")
    first = VisitPolicy.FIRST_VISITS_AFTER_LISTING
    assert {*INDEXES, first} == set(VisitPolicy)  # every policy's plan is checked
    # 11 asked: a walk of 220 rows, more than the lister's 200 dated ones
    found = plan(listed, first, now, lister, count=11, forced=False)
    assert found.count("ix_origin_visit_stats_held") == 3, found
    for table in ("origin_visit_stats", "listed_origin"):
        assert f"SCAN {table}\n" not in found + "\n", found
    assert "Seq Scan" not in found, found
    ready = _ready_parts(listed, found)
    assert len(ready) == 2, found
    if listed.engine.dialect.name == "postgresql":
        assert "(last_update IS NOT NULL))" in ready[0], found
        assert "(last_update IS NULL))" in ready[1], found
    else:
        assert "visit_type=? AND last_update>?)" in ready[0], found
        assert "visit_type=? AND last_update=?)" in ready[1], found
    # 5 asked: a walk of 100 of the dated ones, every part ending there
    found = plan(listed, first, now, lister, count=5, forced=False)
    [part] = _ready_parts(listed, found)
    assert found.count("ix_origin_visit_stats_held") == 3, found
    if listed.engine.dialect.name == "postgresql":
        assert "(last_update IS NOT NULL) AND (ROW(last_update, first_seen, url) <=" in part
        assert found.count("ROW(last_update, first_seen, url) <=") == 4, found
    else:
        assert "last_update>? AND (last_update,first_seen,url)<" in part, found


def test_first_visits_deep_into_a_listing_read_it_whole_once_the_walk_is_not_enough(
    listed: SQLAlchemyStore, now: datetime
) -> None:
    """The origins taken since the listing lie ahead in the index's order: a
    claim walks ``WALK_PER_ORIGIN`` rows of it per origin asked, and reads
    the lister's origins whole when that found too few (the same origins,
    in the same order, as a claim whose walk covers the whole listing)."""
    lister = str(listed.get_or_create_lister("gitlab", now=now).id)
    first = VisitPolicy.FIRST_VISITS_AFTER_LISTING

    def peek(count: int) -> list[str]:
        found = listed.peek_next_visits("git", count, first, now=now, lister_id=lister)
        return [o.url for o in found]

    everything = peek(300)
    assert len(everything) == 300  # never scheduled: all of them
    taken = listed.grab_next_visits("git", 150, first, now=now, lister_id=lister)
    assert [o.url for o in taken] == everything[:150]
    assert peek(300) == everything[150:]
    # a walk of 100 rows, all taken: read whole; of 60 (3 asked): 40 found
    assert peek(5) == everything[150:155]
    assert peek(3) == everything[150:153]
    assert [o.url for o in listed.grab_next_visits("git", 5, first, now=now, lister_id=lister)] == (
        everything[150:155]
    )
    # a lister of 10 dated origins and 50 undated: 2 asked walk all the
    # dated ones and 40 undated ones
    other = str(listed.get_or_create_lister("gitea", now=now).id)
    listed.record_listed_origins(
        [
            ListedOrigin(
                other,
                f"https://other.example/q{n}",
                "git",
                last_update=now - n * timedelta(minutes=1) if n < 10 else None,
            )
            for n in range(60)
        ],
        now=now,
    )
    theirs = [o.url for o in listed.peek_next_visits("git", 100, first, now=now, lister_id=other)]
    assert len(theirs) == 60
    listed.grab_next_visits("git", 48, first, now=now, lister_id=other)
    two = listed.peek_next_visits("git", 2, first, now=now, lister_id=other)
    assert [o.url for o in two] == theirs[48:50]  # the 39th and 40th undated
    listed.grab_next_visits("git", 2, first, now=now, lister_id=other)
    two = listed.peek_next_visits("git", 2, first, now=now, lister_id=other)
    assert [o.url for o in two] == theirs[50:52]  # read whole


def test_a_listed_origin_has_its_row_and_no_statistics_yet(
    listed: SQLAlchemyStore, now: datetime
) -> None:
    """Every listed origin has a row the policies read, but statistics are
    only what visits and schedulings wrote."""
    with listed.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM origin_visit_stats")).scalar()
    assert rows == 300
    assert listed.origin_visit_stats_get([("https://forge.example/p1", "git")]) == []
    [grabbed] = listed.grab_next_visits("git", 1, VisitPolicy.OLDEST_SCHEDULED_FIRST, now=now)
    [stats] = listed.origin_visit_stats_get([(grabbed.url, "git")])
    assert stats.last_scheduled == now


def holds(store: SQLAlchemyStore) -> dict[str, str]:
    with store.engine.connect() as conn:
        query = "SELECT url, held FROM origin_visit_stats WHERE held IS NOT NULL"
        return {url: held for url, held in conn.execute(sa.text(query))}


def test_held_origins_leave_the_indexes_and_a_grab_puts_them_back_once_over(
    listed: SQLAlchemyStore, now: datetime
) -> None:
    failing = [f"https://forge.example/p{n}" for n in (1, 2, 4)]
    listed.record_visit_statuses(
        [VisitStatusMessage(u, "git", now, "failed") for u in failing]  # type: ignore[arg-type]
    )
    assert holds(listed) == {u: "failed" for u in failing}
    policy = VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST
    [first] = listed.grab_next_visits("git", 1, policy, now=now + timedelta(days=13))
    assert holds(listed) == {**{u: "failed" for u in failing}, first.url: "sent"}
    # over at 14 days: put back by the next grab (which takes another origin)
    [second] = listed.grab_next_visits("git", 1, policy, now=now + timedelta(days=15))
    assert holds(listed) == {first.url: "sent", second.url: "sent"}
    # held or not, a peek sees the same: the cooldowns decide, the hold only
    # says where to look
    ready = listed.peek_next_visits("git", 300, policy, now=now + timedelta(days=15))
    assert set(failing) <= {o.url for o in ready}
    assert {first.url, second.url}.isdisjoint(o.url for o in ready)
    back = listed.peek_next_visits("git", 300, policy, now=now + timedelta(days=23))
    assert {first.url, second.url} <= {o.url for o in back}  # 7 days without a status
