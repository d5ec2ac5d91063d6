"""The condition ledger and the stored census (CensusStore) with the census
step (health.census.refresh): on SQLite, PostgreSQL, through the Redis
index's wrapper and the remote client. The yardstick is the full read
(conditions.census), which assesses every task with the policy: after each
change and each move of the clock, the ledger's counts and problem order
must be that read's, while the step assesses only what changed."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskType
from swh_like_scheduler.health import conditions
from swh_like_scheduler.health.census import CENSUS_LOCK, refresh
from swh_like_scheduler.store.values import ProblemQuery

H = timedelta(hours=1)


def _type(name: str, **fields: Any) -> TaskType:
    return TaskType(
        type=name,
        backend_name=f"swh_like_workers.{name}",
        default_interval=H,
        min_interval=timedelta(minutes=10),
        max_interval=timedelta(days=1),
        backoff_factor=2.0,
        **fields,
    )


def _adaptive(now: datetime, n: int, *, type: str, offset: timedelta, **fields: Any) -> Task:
    return Task(
        type=type,
        args=(n,),
        key=f"{type}-{n}",
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=H,
        next_run=now + offset,
        deadline=now + offset + H,
        **fields,
    )


def _world(store: Any, now: datetime) -> list[Task]:
    store.create_task_type(_type("fetch"))
    store.create_task_type(_type("load", max_allowed_duration=timedelta(minutes=30)))
    tasks = []
    for n in range(12):
        # from long overdue to not due for hours: every level in both types
        offset = timedelta(hours=-6 + n)
        # two that cannot finish in time at their usual length: WARNING
        slow = {"expected_duration": 2 * H} if n in (6, 7) else {}
        tasks.append(_adaptive(now, n, type="fetch" if n % 2 else "load", offset=offset, **slow))
    tasks.append(
        Task(
            type="fetch",
            args=("once",),
            key="fetch-once",
            schedule_kind=ScheduleKind.ONESHOT,
            priority=Priority.HIGH,
            next_run=now - 3 * H,
            deadline=now - 2 * H,
        )
    )
    return store.create_tasks(tasks, now=now - 7 * H)


def _full_read(store: Any, now: datetime) -> tuple[dict[str, dict[str, int]], list[int]]:
    found = conditions.census(store, now)
    return found.counts, [p.id for p in found.problems]


def _ledger(store: Any) -> tuple[dict[str, dict[str, int]], list[int]]:
    counted = store.latest_census()
    assert counted is not None
    problems, total = store.problem_page(ProblemQuery(), limit=1000)
    assert total == len(problems) == counted.not_ok
    return counted.conditions, [p.id for p in problems]


def _agree(store: Any, now: datetime, holder: str = "test") -> int:
    step = refresh(store, now, holder=holder)
    assert step.census is not None, step.skipped
    assert step.census.at == now
    counts, problems = _full_read(store, now)
    assert _ledger(store) == (counts, problems)
    return step.assessed


def test_the_ledger_counts_what_a_full_read_counts(store: Any, now: datetime) -> None:
    tasks = _world(store, now)
    assert _agree(store, now) == len(tasks)
    counts, _ = _full_read(store, now)
    # the world is not trivial: some of each level
    assert {lv for per in counts.values() for lv, n in per.items() if n} == {
        "OK",
        "WARNING",
        "ERROR",
    }
    # nothing changed: nothing assessed again
    assert _agree(store, now) == 0
    # the clock alone moves levels: only the tasks whose level may move are assessed
    later = now + 150 * timedelta(minutes=1)
    moved = _agree(store, later)
    assert 0 < moved < len(tasks)
    # changes of every kind, each seen
    ids = [t.id for t in tasks if t.id is not None]
    store.disable_tasks([ids[0], ids[1]], now=later)
    store.delete_tasks([ids[2]])
    claimed = store.claim_ready_tasks("fetch", now=later, limit=2)
    assert claimed
    assert _agree(store, later) >= 4
    # a type's setting: its tasks are assessed again, with the new setting
    store.pause_task_type("load", now=later)
    assert _agree(store, later + timedelta(minutes=1)) >= 5
    # a task no longer watched leaves the ledger
    store.cancel_tasks([ids[3]], now=later)
    _agree(store, later + timedelta(minutes=2))
    assert ids[3] not in _ledger(store)[1]


def test_what_no_index_shows_is_found_by_the_rolling_sweep(store: Any, now: datetime) -> None:
    engine = getattr(store, "engine", None)
    if engine is None:
        pytest.skip("writes behind the store's back need the database itself")
    tasks = _world(store, now)
    assert refresh(store, now, holder="t").census is not None
    # a change written with a clock far behind (its updated_at is older than
    # the last census): the indexed scans cannot see it, the sweep does
    victim = tasks[-2].id
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE task SET failure_count = 3, updated_at = :at WHERE id = :id"),
            {"at": (now - 5 * H).strftime("%Y-%m-%d %H:%M:%S.%f"), "id": victim},
        )
        # and a task deleted behind the store's back: its row (no foreign
        # key) is an orphan the sweep drops
        conn.execute(sa.text("DELETE FROM task WHERE id = :id"), {"id": tasks[-3].id})
    later = now + timedelta(seconds=1)
    _agree(store, later)
    assert tasks[-3].id not in _ledger(store)[1]


def test_a_step_stops_at_its_budget_and_the_next_goes_on(store: Any, now: datetime) -> None:
    tasks = _world(store, now)
    ticks = iter(range(0, 10_000, 100))  # each look at the clock: 100 s later
    first = refresh(store, now, holder="t", budget=1.0, batch=5, monotonic=lambda: next(ticks))
    assert first.census is None and first.skipped == "budget"
    assert 0 < first.assessed < len(tasks)
    assert store.latest_census() is None  # no census from a partial ledger
    second = refresh(store, now, holder="t")
    assert second.census is not None
    assert first.assessed + second.assessed == len(tasks)
    assert _ledger(store) == _full_read(store, now)


def test_one_process_counts_at_a_time(store: Any, now: datetime) -> None:
    _world(store, now)
    assert store.acquire_lock(CENSUS_LOCK, holder="other", ttl=timedelta(minutes=1)).held
    step = refresh(store, now, holder="me")
    assert step.census is None and "other" in (step.skipped or "")
    store.release_lock(CENSUS_LOCK, holder="other")
    assert refresh(store, now, holder="me").census is not None
    # a fresh census is read, not counted again
    assert refresh(store, now, holder="me", fresh_for=timedelta(minutes=1)).skipped == "fresh"


def test_problems_are_filtered_and_paged_in_the_store(store: Any, now: datetime) -> None:
    tasks = _world(store, now)
    store.disable_tasks([t.id for t in tasks[:2]], now=now)  # WARNING, with no finish-by
    assert refresh(store, now, holder="t").census is not None
    everything, total = store.problem_page(ProblemQuery(), limit=100)
    assert total == len(everything) > 2
    assert any(p.finish_by is None for p in everything)  # last of their level
    # pages in the same order
    first, _ = store.problem_page(ProblemQuery(), offset=0, limit=2)
    rest, _ = store.problem_page(ProblemQuery(), offset=2, limit=100)
    assert [p.id for p in first + rest] == [p.id for p in everything]
    # every page, near the start or read backwards from the end, is the
    # same slice of the one order; a total the caller knows is not counted
    ids = [p.id for p in everything]
    for limit in (1, 2, 3):
        for offset in range(total + 1):
            page, counted = store.problem_page(ProblemQuery(), offset=offset, limit=limit)
            assert counted == total
            assert [p.id for p in page] == ids[offset : offset + limit], (offset, limit)
            known, said = store.problem_page(
                ProblemQuery(), offset=offset, limit=limit, known_total=total
            )
            assert said == total and known == page
    assert store.problem_page(ProblemQuery(), limit=0, known_total=7) == ([], 7)
    errors, n_errors = store.problem_page(ProblemQuery(level="ERROR"), limit=100)
    assert n_errors == len(errors) and {p.level for p in errors} == {"ERROR"}
    at_least, _ = store.problem_page(ProblemQuery(level="WARNING", at_least=True), limit=100)
    assert len(at_least) == total
    loads, _ = store.problem_page(ProblemQuery(type="load"), limit=100)
    assert loads and {p.type for p in loads} == {"load"}
    once, _ = store.problem_page(ProblemQuery(q="ONCE"), limit=100)
    assert [p.kind for p in once] == ["oneshot"] and once[0].priority == "high"
    # the free text is literal: LIKE's wildcards match themselves only
    assert store.problem_page(ProblemQuery(q="%"), limit=100) == ([], 0)
    assert store.problem_page(ProblemQuery(q="_"), limit=100)[1] == 0
    with pytest.raises(InvalidInput) as refused:
        store.problem_page(ProblemQuery(level="BAD"))
    assert refused.value.field == "level"


def test_the_history_is_kept_thinned_and_bounded(store: Any, now: datetime) -> None:
    keep = timedelta(hours=4)  # a sample per minute at most
    for second in range(0, 600, 20):  # every 20 s for 10 minutes
        store.save_census(
            at=now + timedelta(seconds=second),
            conditions={"fetch": {"OK": second, "WARNING": 0, "ERROR": 1}},
            tasks={("fetch", "waiting"): second},
            assessed=1,
            took=0.1,
            keep=keep,
        )
    history = store.census_history(now - H)
    instants = [c.at for c in history]
    assert instants == sorted(instants)
    assert instants[-1] == now + timedelta(seconds=580)  # the latest is always kept
    kept = instants[:-1]  # the latest may follow its predecessor closely
    assert all(b - a >= timedelta(minutes=1) for a, b in itertools.pairwise(kept))
    assert 9 <= len(history) <= 12
    latest = store.latest_census()
    assert latest is not None and latest.conditions["fetch"]["OK"] == 580
    assert latest.tasks == {("fetch", "waiting"): 580} and latest.not_ok == 1
    # older than ``keep``: gone
    store.save_census(
        at=now + keep + timedelta(minutes=5),
        conditions={},
        tasks={},
        assessed=0,
        took=0.0,
        keep=keep,
    )
    assert store.census_history(now - H)[0].at > now
