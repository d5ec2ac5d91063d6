"""Jobs by key in the store (SQLite and PostgreSQL): create, replace, delete."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import RunStatus, TaskStatus, TaskType
from swh_like_scheduler.intake.jobs import Callback, Job, idempotency_key, job_from_input, task_key
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
SEED_BODY = {
    "key": "training-invitations-42",
    "schedules": [
        "2020-12-24T14:00:00Z",
        "2020-12-25T14:00:00Z",
        "2020-12-26T14:00:00Z",
        "2020-12-27T08:00:00Z",
    ],
    "callback": {
        "type": "rabbitmq",
        "data": {"queue": "training.invitations.notifications", "payload": {"id": "42"}},
    },
}


@pytest.fixture
def callback_types(store: SQLAlchemyStore) -> None:
    store.create_task_type(TaskType(type="notify", backend_name="notify", num_retries=2))
    store.create_task_type(TaskType(type="webhook", backend_name="webhook"))


def states(view: object) -> dict[str, str]:
    return {i["at"]: i["state"] for i in view.to_dict()["instants"]}  # type: ignore[attr-defined]


def test_the_seed_body_makes_one_oneshot_task_per_instant(
    store: SQLAlchemyStore, callback_types: None, now: datetime
) -> None:
    job = job_from_input("training-invitations-42", SEED_BODY)
    view = store.put_job(job, now=now)
    assert len(view.added) == 4 and not view.removed and not view.kept
    assert set(states(view).values()) == {"pending"}
    first = view.instants[0].task
    assert first.type == "notify" and first.schedule_kind == "oneshot"
    assert first.key == "training-invitations-42@2020-12-24T14:00:00+00:00"
    assert first.kwargs == {
        "queue": "training.invitations.notifications",
        "payload": {"id": "42"},
        "key": first.key,
    }
    assert first.retries_left == 2  # the type's retry policy
    # the same body again changes nothing
    again = store.put_job(job, now=now)
    assert len(again.kept) == 4 and not again.added
    assert store.count_tasks() == 4


def test_a_replacement_adds_removes_and_keeps(
    store: SQLAlchemyStore, callback_types: None, now: datetime
) -> None:
    at = [now + i * H for i in range(1, 4)]
    job = Job("reminder", tuple(at), Callback("rabbitmq", {"queue": "q", "payload": {}}))
    store.put_job(job, now=now)
    # the first instant runs (claimed: dispatched), then the job changes
    (claimed,) = store.claim_ready_tasks("notify", now=at[0], limit=10)
    store.start_task_run(claimed.backend_id, worker="w", started=at[0])
    store.end_task_run(
        claimed.backend_id,
        status=RunStatus.EVENTFUL,
        ended=at[0],
        # the listener's outcome policy (what a remote store's server applies)
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    later = now + 10 * H
    changed = Job(
        "reminder",
        (at[0], at[2], later),
        Callback("rabbitmq", {"queue": "q2", "payload": {"v": 2}}),
    )
    view = store.put_job(changed, now=at[0])
    assert view.added == (later,) and view.removed == (at[1],) and view.kept == (at[0], at[2])
    assert states(view) == {
        at[0].isoformat(): "done",
        at[1].isoformat(): "cancelled",
        at[2].isoformat(): "pending",
        later.isoformat(): "pending",
    }
    by_at = {i.at: i.task for i in view.instants}
    assert by_at[at[0]].kwargs["queue"] == "q"  # it ran: it stays as it was
    assert by_at[at[2]].kwargs == {
        "queue": "q2",
        "payload": {"v": 2},
        "key": task_key("reminder", at[2]),
    }
    # nothing runs twice: only the two pending instants are ever claimed again
    claimed_later = store.claim_ready_tasks("notify", now=later + H, limit=10)
    assert sorted(c.task_id for c in claimed_later) == sorted([by_at[at[2]].id, by_at[later].id])
    # an instant given back after its removal is scheduled again
    back = store.put_job(Job("reminder", (at[1],), changed.callback), now=at[0])
    assert states(back)[at[1].isoformat()] == "pending"


def test_delete_cancels_what_has_not_run_and_revokes_queued_messages(
    store: SQLAlchemyStore, callback_types: None, now: datetime
) -> None:
    assert store.delete_job("nope", now=now) is None
    assert store.get_job("nope") is None
    at = (now + H, now + 2 * H)
    store.put_job(Job("j", at, Callback("rabbitmq", {"queue": "q"})), now=now)
    (claimed,) = store.claim_ready_tasks("notify", now=at[0], limit=1)  # dispatched
    view = store.delete_job("j", now=at[0])
    assert view is not None and set(view.removed) == set(at)
    assert view.cancelled_runs == (claimed.backend_id,)
    assert all(i.task.status is TaskStatus.CANCELLED for i in view.instants)
    assert store.claim_ready_tasks("notify", now=at[1] + H, limit=10) == []
    assert store.get_job("j") is not None  # the history stays


def test_an_instant_whose_run_started_is_not_cancelled(
    store: SQLAlchemyStore, callback_types: None, now: datetime
) -> None:
    """A replacement or a delete that drops an instant whose run the start
    guard has started leaves it running (its callback is being made) and
    says so; a dispatched instant not started is cancelled, and the guard
    then refuses its run."""
    at = (now + H, now + 2 * H, now + 3 * H)
    callback = Callback("rabbitmq", {"queue": "q"})
    store.put_job(Job("j", at, callback), now=now)
    first, second = store.claim_ready_tasks("notify", now=at[1], limit=10)
    grant = store.guard_start(first.backend_id, node="n", name="w", tag="t1")
    assert grant.granted
    view = store.put_job(Job("j", (at[2],), callback), now=at[1])
    assert view.removed == (at[1],) and view.cancelled_runs == (second.backend_id,)
    assert states(view) == {
        at[0].isoformat(): "running",
        at[1].isoformat(): "cancelled",
        at[2].isoformat(): "pending",
    }
    refused = store.guard_start(second.backend_id, node="n", name="w", tag="t2")
    assert not refused.granted and refused.reason == "finished_run"
    deleted = store.delete_job("j", now=at[1])
    assert deleted is not None and deleted.removed == (at[2],)
    assert states(deleted)[at[0].isoformat()] == "running"
    store.end_task_run(
        first.backend_id,
        status=RunStatus.EVENTFUL,
        ended=at[1],
        apply=outcome_applier(TaskTypeCache(store), random.Random(0)),
    )
    done = store.get_job("j")
    assert done is not None and states(done)[at[0].isoformat()] == "done"


@pytest.mark.postgresql
def test_an_instant_dispatched_after_the_job_was_read_is_cancelled_with_its_run(
    pg_store: SQLAlchemyStore, now: datetime
) -> None:
    """A runner claims a waiting instant between the replacement's read of
    the job and its cancellation: the cancellation reads the status again
    and ends the new run too (the guard then refuses it)."""
    pg_store.create_task_type(TaskType(type="notify", backend_name="notify"))
    callback = Callback("rabbitmq", {"queue": "q"})
    pg_store.put_job(Job("late", (now + H,), callback), now=now)
    read = pg_store._job_tasks("late")  # what the replacement read: waiting
    (task,) = read.values()
    assert task.status is TaskStatus.WAITING
    (claimed,) = pg_store.claim_ready_tasks("notify", now=now + H, limit=1)
    with pg_store.transaction() as tx:
        cancelled = tx._cancel_unstarted([task], now + H)
    assert [t.id for t in cancelled] == [task.id]
    assert cancelled[0].status is TaskStatus.CANCELLED
    (run,) = pg_store.get_task_runs(task.id or 0, limit=1)
    assert run.backend_id == claimed.backend_id and run.status is RunStatus.CANCELLED
    refused = pg_store.guard_start(claimed.backend_id, node="n", name="w", tag="t")
    assert not refused.granted


@pytest.mark.postgresql
def test_a_replacement_racing_the_start_guard_never_cancels_a_started_run(
    pg_store: SQLAlchemyStore, postgres_url: str, now: datetime
) -> None:
    """Workers start the runs of a job's dispatched instants while a client
    drops them all: each instant ends either cancelled with its run refused,
    or running with its run started, never cancelled with a run under way."""
    pg_store.create_task_type(TaskType(type="webhook", backend_name="webhook"))
    callback = Callback("http", {"url": "http://127.0.0.1:9/hook", "payload": {}})
    instants = tuple(now + timedelta(seconds=n) for n in range(1, 41))
    pg_store.put_job(Job("race", instants, callback), now=now)
    claimed = pg_store.claim_ready_tasks("webhook", now=instants[-1], limit=100)
    assert len(claimed) == len(instants)
    later = (now + timedelta(days=1),)
    guards = [SQLAlchemyStore.from_url(postgres_url) for _ in range(4)]
    try:

        def start(n: int, backend_id: str) -> bool:
            store = guards[n % len(guards)]
            return store.guard_start(backend_id, node="n", name="w", tag=f"t{n}").granted

        def replace() -> None:
            pg_store.put_job(Job("race", later, callback), now=instants[-1])

        with ThreadPoolExecutor(max_workers=5) as pool:
            starts = [pool.submit(start, n, c.backend_id) for n, c in enumerate(claimed[::2])]
            put = pool.submit(replace)
            starts += [
                pool.submit(start, n, c.backend_id) for n, c in enumerate(claimed[1::2], 100)
            ]
            put.result()
            granted = {
                c.backend_id: f.result()
                for c, f in zip(claimed[::2] + claimed[1::2], starts, strict=True)
            }
    finally:
        for store in guards:
            store.close()
    view = pg_store.get_job("race")
    assert view is not None
    for instant in view.instants[: len(instants)]:
        run = instant.last_run
        assert run is not None
        if instant.task.status is TaskStatus.CANCELLED:
            assert run.status is RunStatus.CANCELLED and not granted[run.backend_id]
        else:
            assert run.status is RunStatus.STARTED and granted[run.backend_id]
            assert instant.state == "running"


def test_http_callbacks_carry_an_idempotency_key(
    store: SQLAlchemyStore, callback_types: None, now: datetime
) -> None:
    body = {
        "schedules": [(now + H).isoformat()],
        "callback": {"type": "http", "data": {"url": "http://example.test/hook", "payload": {}}},
    }
    view = store.put_job(job_from_input("hook", body), now=now)
    kwargs = view.instants[0].task.kwargs
    assert kwargs["idempotency_key"] == idempotency_key("hook", now + H)
    assert view.instants[0].task.type == "webhook"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**SEED_BODY, "key": "other"}, "key"),
        ({**SEED_BODY, "schedules": "2020-12-24T14:00:00Z"}, "schedules"),
        ({**SEED_BODY, "schedules": ["tomorrow"]}, "schedules.0"),
        ({**SEED_BODY, "callback": {"type": "smtp", "data": {}}}, "callback.type"),
        (
            {**SEED_BODY, "callback": {"type": "rabbitmq", "data": {"queue": ""}}},
            "callback.data.queue",
        ),
        (
            {**SEED_BODY, "callback": {"type": "http", "data": {"url": "ftp://x"}}},
            "callback.data.url",
        ),
        ({**SEED_BODY, "when": 1}, "when"),
    ],
)
def test_bad_job_bodies_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        job_from_input("training-invitations-42", body)
    assert caught.value.field == field


def test_an_unregistered_callback_type_writes_nothing(
    store: SQLAlchemyStore, now: datetime
) -> None:
    with pytest.raises(InvalidInput, match="task-type register") as caught:
        store.put_job(job_from_input("training-invitations-42", SEED_BODY), now=now)
    assert caught.value.field == "callback.type"
    assert store.count_tasks() == 0


@pytest.mark.postgresql
def test_concurrent_puts_of_one_key_end_with_one_body(
    pg_store: SQLAlchemyStore, postgres_url: str, now: datetime
) -> None:
    """50 clients replace one job at once, each with its own instants: the
    job ends with exactly the instants of one of them (the changes ran one
    after the other); 20 identical PUTs at once (a retrying client) all
    succeed."""
    pg_store.create_task_type(TaskType(type="notify", backend_name="notify"))
    callback = Callback("rabbitmq", {"queue": "q", "payload": {}})
    rng = random.Random(7)
    bodies = [
        tuple(now + timedelta(days=1, minutes=rng.randrange(100_000)) for _ in range(3))
        for _ in range(50)
    ]
    stores = [SQLAlchemyStore.from_url(postgres_url) for _ in range(10)]
    try:

        def put(n: int, instants: tuple[datetime, ...]) -> None:
            stores[n % len(stores)].put_job(Job("race", instants, callback), now=now)

        with ThreadPoolExecutor(max_workers=10) as pool:
            for future in [pool.submit(put, n, b) for n, b in enumerate(bodies)]:
                future.result()
        view = pg_store.get_job("race")
        assert view is not None
        live = {i.at for i in view.instants if i.task.status is not TaskStatus.CANCELLED}
        assert live in [{t.replace(microsecond=0) for t in b} for b in bodies], sorted(live)
        assert len(live) == 3
        # identical PUTs at once: every one succeeds, the job holds that body
        same = bodies[0]
        with ThreadPoolExecutor(max_workers=10) as pool:
            for future in [pool.submit(put, n, same) for n in range(20)]:
                future.result()  # no Conflict
        view = pg_store.get_job("race")
        assert view is not None
        live = {i.at for i in view.instants if i.task.status is not TaskStatus.CANCELLED}
        assert live == {t.replace(microsecond=0) for t in same}
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize(
    ("instant", "why"),
    [
        ("2026-12-24T14:00:00", "no time zone"),
        ("2026-12-24T14:00:00.5Z", "fraction of a second"),
        ("2026-12-24T14:00:00.000001+01:00", "fraction of a second"),
    ],
)
def test_job_instants_say_their_zone_and_are_whole_seconds(instant: str, why: str) -> None:
    body = {**SEED_BODY, "schedules": ["2026-12-24T13:00:00Z", instant]}
    with pytest.raises(InvalidInput) as info:
        job_from_input(str(SEED_BODY["key"]), body)
    assert info.value.field == "schedules.1" and why in info.value.message
    job = job_from_input(
        str(SEED_BODY["key"]), {**SEED_BODY, "schedules": ["2026-12-24T15:00:00+01:00"]}
    )
    assert [t.isoformat() for t in job.schedules] == ["2026-12-24T14:00:00+00:00"]
