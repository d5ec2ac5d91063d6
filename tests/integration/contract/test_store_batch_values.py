"""A batch of run starts and ends stores exactly what one-by-one writes
store: every value type (microsecond instants, intervals, floats, JSON
results and their ``None``, text), only the columns an outcome changes, for
runs of several tasks at once (on PostgreSQL, one statement per batch:
:mod:`swh_like_scheduler.store.sql_batch`)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from test_store_contract import H, make_task

from swh_like_scheduler.domain.model import RunStatus, Task, TaskRun, TaskStatus, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.interface import RunEnd

US = timedelta(microseconds=1)


def test_a_batch_of_ends_stores_every_value_exactly(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    created = store.create_tasks(
        [
            make_task(now, n, offset=-H, kwargs={"url": f"https://x/{n}", "é": [n, None]})
            for n in range(5)
        ],
        now=now,
    )
    claims = store.claim_ready_tasks("sleep", now=now, limit=5)
    assert len(claims) == 5
    started = {c.backend_id: now + n * 7 * US for n, c in enumerate(claims)}
    runs = store.start_task_runs(
        [(b, at, f"w{n}@host 'quoted' \"é\"") for n, (b, at) in enumerate(started.items())]
    )
    assert [runs[b].started for b in started] == list(started.values())
    results: list[object] = [None, {"status": "eventful", "n": [1.5, None, "ü"]}, "text", 3, []]
    ends = [
        RunEnd(
            c.backend_id,
            RunStatus.FAILED if n == 0 else RunStatus.EVENTFUL,
            now + timedelta(seconds=n, microseconds=123_457),
            results[n],
            'boom: it\'s "bad"\n' if n == 0 else None,
        )
        for n, c in enumerate(claims)
    ]

    def apply(task: Task, run: TaskRun) -> Task:
        assert run.ended is not None and run.started is not None
        return task.updated(
            status=TaskStatus.WAITING,
            next_run=run.ended + timedelta(days=1, microseconds=1),
            deadline=run.ended + timedelta(days=2),
            current_interval=timedelta(days=-1, seconds=86_399, microseconds=999_999) + H,
            average_good_duration=run.ended - run.started,
            failure_count=task.failure_count + (run.status is RunStatus.FAILED),
            last_end_at=run.ended,
            last_start_at=run.started,
        )

    ended = store.end_task_runs(ends, apply=apply)
    for end, run in zip(ends, ended, strict=True):
        stored = store.get_task_run(end.backend_id)
        assert run is not None and stored == run
        assert (stored.status, stored.ended, stored.error) == (end.status, end.ended, end.error)
        assert stored.result == end.result
        assert stored.progress == (1.0 if end.status.is_good else None)
    by_id = {t.id: t for t in store.get_tasks([t.id or 0 for t in created])}
    for claim, end in zip(claims, ends, strict=True):
        task = by_id[claim.task_id]
        original = next(t for t in created if t.id == claim.task_id)
        assert (task.next_run, task.deadline) == (
            end.ended + timedelta(days=1, microseconds=1),
            end.ended + timedelta(days=2),
        )
        assert task.current_interval == timedelta(seconds=3599, microseconds=999_999)
        assert task.average_good_duration == end.ended - started[claim.backend_id]
        assert (task.status, task.updated_at, task.last_end_at) == (
            TaskStatus.WAITING,
            end.ended,
            end.ended,
        )
        assert task.failure_count == (1 if end.status is RunStatus.FAILED else 0)
        # what the outcome did not change is as it was
        assert (task.args, task.kwargs, task.arguments_hash) == (
            original.args,
            original.kwargs,
            original.arguments_hash,
        )
        assert task.created_at == original.created_at


def test_a_batch_of_starts_leaves_runs_not_scheduled_alone(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks([make_task(now, n, offset=-H) for n in range(4)], now=now)
    claims = store.claim_ready_tasks("sleep", now=now, limit=4)
    first = store.start_task_runs([(c.backend_id, now, "a") for c in claims[:2]])
    again = store.start_task_runs([(c.backend_id, now + H, "b") for c in reversed(claims)])
    for c in claims[:2]:
        assert (again[c.backend_id].started, again[c.backend_id].worker) == (now, "a")
        assert again[c.backend_id] == first[c.backend_id]
    for c in claims[2:]:
        assert (again[c.backend_id].started, again[c.backend_id].worker) == (now + H, "b")


def _sleep_type(store: SQLAlchemyStore) -> TaskType:
    """The ``sleep`` type on a store given no fixture's type (PostgreSQL only tests)."""
    return store.create_task_type(
        TaskType(
            type="sleep",
            backend_name="sleep",
            default_interval=H,
            min_interval=H / 6,
            max_interval=24 * H,
            backoff_factor=2.0,
        )
    )


@pytest.mark.postgresql
def test_on_postgresql_a_batch_is_one_statement_per_table(
    pg_store: SQLAlchemyStore, now: datetime
) -> None:
    import sqlalchemy as sa

    from swh_like_scheduler.recording import TaskTypeCache, outcome_applier

    store = pg_store
    _sleep_type(store)
    store.create_tasks([make_task(now, n, offset=-H) for n in range(40)], now=now)
    claims = store.claim_ready_tasks("sleep", now=now, limit=40)
    executed: list[tuple[str, bool]] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        executed.append((" ".join(statement.split()[:3]), executemany))

    sa.event.listen(store.engine, "before_cursor_execute", seen)
    try:
        store.start_task_runs([(c.backend_id, now, "w") for c in claims])
        apply = outcome_applier(TaskTypeCache(store), __import__("random").Random(0))
        ended = store.end_task_runs(
            [RunEnd(c.backend_id, RunStatus.EVENTFUL, now + H) for c in claims], apply=apply
        )
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", seen)
    assert all(r is not None and r.status is RunStatus.EVENTFUL for r in ended)
    updates = [s for s in executed if s[0].startswith("UPDATE")]
    assert updates == [
        ("UPDATE task_run SET", False),  # the starts
        ("UPDATE task_run SET", False),  # the ends
        ("UPDATE task SET", False),  # the tasks after their outcomes
    ]
    assert all(t.status is TaskStatus.WAITING for t in store.get_tasks([c.task_id for c in claims]))


@pytest.mark.postgresql
def test_on_postgresql_values_json_cannot_hold_come_back_the_same(
    pg_store: SQLAlchemyStore, now: datetime
) -> None:
    import math

    import sqlalchemy as sa

    from swh_like_scheduler.domain.exceptions import InvalidInput
    from swh_like_scheduler.store.sql_batch import update_rows
    from swh_like_scheduler.store.tables import worker

    names = ["nan", "inf", "-inf", "tiny"]
    values = [math.nan, math.inf, -math.inf, 5e-324]
    with pg_store.engine.begin() as conn:
        conn.execute(
            sa.insert(worker),
            [{"hostname": n, "last_heartbeat_at": now, "online": True} for n in names],
        )
        rows = [
            {"hostname": n, "freq": v, "last_heartbeat_at": now + n_ * US}
            for n_, (n, v) in enumerate(zip(names, values, strict=True))
        ]
        single = sa.update(worker).where(worker.c.hostname == sa.bindparam("hostname_"))
        assert (
            update_rows(
                conn, worker, "hostname", rows, ("freq", "last_heartbeat_at"), single=single
            )
            == 4
        )
        found = dict(conn.execute(sa.select(worker.c.hostname, worker.c.freq)).all())
        instants = dict(
            conn.execute(sa.select(worker.c.hostname, worker.c.last_heartbeat_at)).all()
        )
    assert math.isnan(found["nan"])
    assert [found[n] for n in names[1:]] == values[1:]
    assert [instants[n] for n in names] == [now + i * US for i in range(4)]
    naive = [{"hostname": "nan", "freq": 1.0, "last_heartbeat_at": now.replace(tzinfo=None)}]
    with pg_store.engine.begin() as conn, pytest.raises(InvalidInput) as info:
        update_rows(conn, worker, "hostname", naive, ("freq", "last_heartbeat_at"), single=single)
    assert info.value.field == "last_heartbeat_at"


@pytest.mark.postgresql
def test_on_postgresql_a_batch_of_events_costs_the_same_statements_whatever_its_size(
    pg_store: SQLAlchemyStore, now: datetime
) -> None:
    """The listener's round trips per batch are constant: a batch of 50
    events and one of 500 send the same statements, with the same texts
    (the reads by id are ``= ANY(array)``, not an ``IN`` list as long as the
    batch, so each text is prepared once)."""
    import random

    import sqlalchemy as sa

    from swh_like_scheduler.listener import Action, EventHandler

    store = pg_store
    _sleep_type(store)
    store.create_tasks([make_task(now, n, offset=-H) for n in range(275)], now=now)
    claims = store.claim_ready_tasks("sleep", now=now, limit=275)
    assert len(claims) == 275
    handler = EventHandler(store, rng=random.Random(0))
    handler.task_types.prime()
    at = now.timestamp()

    def events(part: list) -> list[dict[str, object]]:  # type: ignore[type-arg]
        out: list[dict[str, object]] = []
        for c in part:
            common = {"uuid": c.backend_id, "hostname": "w@h"}
            out.append({"type": "task-started", "timestamp": at, **common})
            result = "{'status': 'eventful'}"
            out.append({"type": "task-succeeded", "timestamp": at + 1, "result": result, **common})
        return out

    def statements(batch: list[dict[str, object]]) -> list[str]:
        executed: list[str] = []

        def seen(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
            executed.append(statement)

        sa.event.listen(store.engine, "before_cursor_execute", seen)
        try:
            summary = handler.handle_batch(batch)
        finally:
            sa.event.remove(store.engine, "before_cursor_execute", seen)
        assert summary[Action.STARTED] == summary[Action.ENDED] == len(batch) // 2
        return executed

    small, large = statements(events(claims[:25])), statements(events(claims[25:]))
    assert len(small) == len(large) and small == large
    assert not any(" IN " in s for s in small)
