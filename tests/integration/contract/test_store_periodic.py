"""The default cooldown of a periodic task (issue 31): whatever the way in
(the store itself, the remote store over HTTP, an import), a periodic task
created without a cooldown is stored with the default one; an explicit 0 is
kept; a task stored before there was a default keeps what it has."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from swh_like_scheduler.domain.exceptions import KeyConflict
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskType
from swh_like_scheduler.policy import default_cooldown
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.tables import task as task_t

H = timedelta(hours=1)


def periodic(now: datetime, *args: object, **fields: object) -> Task:
    return Task(
        type="sleep",
        args=args,
        schedule_kind=ScheduleKind.PERIODIC,
        period=H,
        next_run=now,
        deadline=now + H,
        **fields,  # type: ignore[arg-type]
    )


def test_a_periodic_task_without_a_cooldown_gets_the_default(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    plain, expected, zero, given = store.create_tasks(
        [
            periodic(now, 1),
            periodic(now, 2, expected_duration=timedelta(minutes=5)),
            periodic(now, 3, cooldown=timedelta(0)),
            periodic(now, 4, cooldown=timedelta(minutes=10)),
        ],
        now=now,
    )
    assert plain.cooldown == timedelta(minutes=54) == default_cooldown(H)
    assert expected.cooldown == timedelta(minutes=44)
    assert zero.cooldown == timedelta(0)
    assert given.cooldown == timedelta(minutes=10)
    stored = store.get_tasks([t.id or 0 for t in (plain, expected, zero, given)])
    assert [t.cooldown for t in stored] == [
        timedelta(minutes=54),
        timedelta(minutes=44),
        timedelta(0),
        timedelta(minutes=10),
    ]
    # the other kinds have no cooldown at all
    [adaptive] = store.create_tasks(
        [
            Task(
                type="sleep",
                args=(5,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                current_interval=H,
                next_run=now,
                deadline=now + H,
            )
        ],
        now=now,
    )
    assert adaptive.cooldown is None


def test_an_import_gets_the_default_too(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    summary = store.import_tasks(
        [periodic(now, 1), periodic(now, 2, cooldown=timedelta(0))], now=now
    )
    assert summary.created == 2
    found = store.search_tasks()
    assert sorted((t.args, t.cooldown) for t in found) == [
        ((1,), timedelta(minutes=54)),
        ((2,), timedelta(0)),
    ]


def test_a_key_asked_again_without_a_cooldown_is_the_same_task(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [first] = store.create_tasks([periodic(now, 1, key="k")], now=now)
    [again] = store.create_tasks([periodic(now, 1, key="k")], now=now + H)
    assert again == first
    # the default, given explicitly, is the same definition; another is not
    [same] = store.create_tasks([periodic(now, 1, key="k", cooldown=default_cooldown(H))], now=now)
    assert same.id == first.id
    for other in (timedelta(0), timedelta(minutes=5)):
        with pytest.raises(KeyConflict):
            store.create_tasks([periodic(now, 1, key="k", cooldown=other)], now=now)
    assert store.count_tasks() == 1


def test_asked_again_once_its_runs_moved_the_default_it_is_the_same_task(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    """The default cooldown follows the run time (issue 46): asking again
    without a cooldown is still the task it is, whatever value that gave."""
    [first] = store.create_tasks([periodic(now, 1, key="k")], now=now)
    assert first.cooldown_is_default
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    store.start_task_run(claimed.backend_id, started=now, worker="w")
    store.end_task_run(
        claimed.backend_id,
        status=RunStatus.EVENTFUL,
        ended=now + timedelta(minutes=6),
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    [ran] = store.get_tasks([first.id or 0])
    assert ran.cooldown == timedelta(minutes=42) and ran.cooldown_is_default
    [again] = store.create_tasks([periodic(now, 1, key="k")], now=now + H)
    assert again.id == first.id and again.cooldown == timedelta(minutes=42)
    # a cooldown given is another definition, even the first default
    for other in (default_cooldown(H), timedelta(minutes=5)):
        with pytest.raises(KeyConflict):
            store.create_tasks([periodic(now, 1, key="k", cooldown=other)], now=now)


def test_a_task_stored_before_the_default_keeps_what_it_has(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    if not isinstance(getattr(store, "engine", None), sa.Engine):
        pytest.skip("the rows of a remote store are its server's")
    [old] = store.create_tasks([periodic(now, 1, key="old", cooldown=timedelta(0))], now=now)
    # as a row written before the default: no cooldown at all
    with store.engine.begin() as conn:
        conn.execute(sa.update(task_t).where(task_t.c.id == old.id).values(cooldown=None))
    [stored] = store.get_tasks([old.id or 0])
    assert stored.cooldown is None
    # asking for it again (the same script, after the upgrade) finds it unchanged
    [again] = store.create_tasks([periodic(now, 1, key="old")], now=now + H)
    assert again.id == old.id and again.cooldown is None
    assert store.get_tasks([old.id or 0])[0].cooldown is None
