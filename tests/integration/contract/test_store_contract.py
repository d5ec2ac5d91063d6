"""The store contract: every test runs against SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from swh_like_scheduler.domain.exceptions import (
    Conflict,
    DuplicateTaskType,
    InvalidInput,
    InvalidTransition,
    KeyConflict,
    NotFound,
    UnknownTaskType,
)
from swh_like_scheduler.domain.model import (
    BlackoutPeriod,
    DispatchOrder,
    Priority,
    RunStatus,
    ScheduleKind,
    Task,
    TaskRun,
    TaskStatus,
    TaskType,
    run_backend_id,
)
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter
from swh_like_scheduler.store.sql_identity import run_namespace_of

H = timedelta(hours=1)
S = timedelta(seconds=1)


def make_task(
    now: datetime,
    *args: object,
    type: str = "sleep",
    offset: timedelta = timedelta(0),
    deadline: timedelta | None = None,
    **fields: object,
) -> Task:
    fields.setdefault("schedule_kind", ScheduleKind.ADAPTIVE)
    if fields["schedule_kind"] is ScheduleKind.ADAPTIVE:
        fields.setdefault("current_interval", H)
    return Task(
        type=type,
        args=args,
        next_run=now + offset,
        deadline=now + (deadline if deadline is not None else offset + H),
        **fields,  # type: ignore[arg-type]
    )


# -- task types -------------------------------------------------------------


def test_task_type_round_trip(store: SQLAlchemyStore, sleep_type: TaskType) -> None:
    assert store.get_task_type("sleep") == sleep_type
    assert store.get_task_types() == [sleep_type]
    assert store.get_task_type("nope") is None


def test_duplicate_task_type_is_refused(store: SQLAlchemyStore, sleep_type: TaskType) -> None:
    with pytest.raises(DuplicateTaskType) as info:
        store.create_task_type(sleep_type.updated(description="other"))
    assert info.value.field == "type"
    assert store.get_task_type("sleep") == sleep_type


def test_update_task_type_validates_before_writing(
    store: SQLAlchemyStore, sleep_type: TaskType
) -> None:
    updated = store.update_task_type("sleep", max_queue_length=5, num_retries=2)
    assert (updated.max_queue_length, updated.num_retries) == (5, 2)
    assert store.get_task_type("sleep") == updated
    with pytest.raises(InvalidInput) as info:
        store.update_task_type("sleep", max_queue_length=-1)
    assert info.value.field == "max_queue_length"
    assert store.get_task_type("sleep") == updated
    with pytest.raises(NotFound):
        store.update_task_type("unknown", max_queue_length=1)


def test_pause_and_resume_a_task_type(store: SQLAlchemyStore, sleep_type: TaskType) -> None:
    assert sleep_type.paused_at is None
    at = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))  # 12:00 UTC
    paused = store.pause_task_type("sleep", now=at)
    assert paused == sleep_type.updated(paused_at=at)
    assert paused.paused_at is not None and paused.paused_at.utcoffset() == timedelta(0)
    assert store.get_task_type("sleep") == paused
    assert store.get_task_types() == [paused]
    # pausing again keeps the first instant; other changes keep the pause
    assert store.pause_task_type("sleep", now=at + H).paused_at == at
    assert store.update_task_type("sleep", max_queue_length=5).paused_at == at
    with pytest.raises(InvalidInput) as info:
        store.update_task_type("sleep", paused_at=None)
    assert info.value.field == "paused_at"
    assert store.get_task_type("sleep") == paused.updated(max_queue_length=5)
    resumed = store.resume_task_type("sleep")
    assert resumed == sleep_type.updated(max_queue_length=5)
    assert store.get_task_type("sleep") == resumed
    assert store.resume_task_type("sleep") == resumed  # not paused: nothing changes


def test_pausing_an_unknown_type_is_refused(store: SQLAlchemyStore, now: datetime) -> None:
    with pytest.raises(UnknownTaskType) as info:
        store.pause_task_type("nope", now=now)
    assert info.value.name == "nope"
    with pytest.raises(UnknownTaskType):
        store.resume_task_type("nope")
    assert store.get_task_types() == []


def test_a_type_created_paused_stays_paused(store: SQLAlchemyStore, now: datetime) -> None:
    created = store.create_task_type(TaskType(type="held", backend_name="x.held", paused_at=now))
    assert store.get_task_type("held") == created and created.paused_at == now


# -- task creation ----------------------------------------------------------


def test_created_tasks_keep_every_field(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    original = Task(
        type="sleep",
        args=("https://example.org", 3),
        kwargs={"depth": 2, "tags": ["a", "é"]},
        schedule_kind=ScheduleKind.CRON,
        cron="30 2 * * *",
        cron_max_duration=timedelta(hours=6, microseconds=5),
        next_run=now,
        deadline=now + timedelta(hours=5),
        key="client-1",
        priority=Priority.HIGH,
        tz="Europe/Paris",
        blackout_periods=(BlackoutPeriod.parse({"start": "23:00", "end": "01:30"}),),
        dont_run_on_nodes=("node-a", "node-b"),
        max_allowed_duration=timedelta(hours=2),
        expected_duration=timedelta(minutes=3),
        retries_left=2,
    )
    [created] = store.create_tasks([original], now=now)
    assert created.id is not None
    [stored] = store.get_tasks([created.id])
    assert stored == created
    assert stored.updated(id=None, created_at=None, updated_at=None) == original
    assert stored.created_at == stored.updated_at == now
    assert store.get_task_by_key("client-1") == stored


def test_tasks_come_back_in_the_order_given(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    tasks = [make_task(now, n) for n in range(50)]
    created = store.create_tasks(tasks, now=now)
    assert [t.args for t in created] == [(n,) for n in range(50)]
    assert len({t.id for t in created}) == 50
    ids = [t.id or 0 for t in created]
    assert [t.id for t in store.get_tasks([*ids[::-1], 10**9])] == ids[::-1]


def test_unknown_type_writes_nothing(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    with pytest.raises(UnknownTaskType) as info:
        store.create_tasks([make_task(now, 1), make_task(now, 2, type="nope")], now=now)
    assert info.value.field == "type"
    assert store.count_tasks() == 0


def test_new_task_with_an_id_is_refused(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    with pytest.raises(InvalidInput):
        store.create_tasks([make_task(now, 1).updated(id=5)], now=now)


def test_arguments_over_the_size_limit_are_refused_and_nothing_is_written(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    big = make_task(now, 2).updated(kwargs={"blob": "x" * (store.max_argument_bytes or 0)})
    with pytest.raises(InvalidInput) as info:
        store.create_tasks([make_task(now, 1), big], now=now)
    assert info.value.field == "arguments" and "max_argument_bytes" in str(info.value)
    assert store.count_tasks() == 0


def test_arguments_limit_can_be_lifted(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    # (a remote store's limit is its server's)
    big = make_task(now, 2).updated(kwargs={"blob": "x" * (store.max_argument_bytes or 0)})
    store.max_argument_bytes = None  # no limit
    assert len(store.create_tasks([big], now=now)) == 1


def test_key_makes_creation_idempotent(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [first] = store.create_tasks([make_task(now, 1, key="k1")], now=now)
    [again] = store.create_tasks([make_task(now + H, 1, key="k1")], now=now + H)
    assert again == first
    with pytest.raises(KeyConflict) as info:
        store.create_tasks([make_task(now, 9), make_task(now, 2, key="k1")], now=now)
    assert info.value.field == "key"
    assert store.count_tasks() == 1


def test_key_repeated_in_one_batch(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    a, b = store.create_tasks([make_task(now, 1, key="k"), make_task(now, 1, key="k")], now=now)
    assert a.id == b.id
    with pytest.raises(KeyConflict):
        store.create_tasks([make_task(now, 1, key="x"), make_task(now, 2, key="x")], now=now)
    assert store.count_tasks() == 1


def test_identical_live_tasks_are_deduplicated(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    a, b, c = store.create_tasks(
        [
            make_task(now, "x", kwargs={"a": 1, "b": 2}),
            make_task(now, "x", kwargs={"b": 2, "a": 1}),
            make_task(now, "x", priority=Priority.HIGH),
        ],
        now=now,
    )
    assert a.id == b.id
    assert c.id != a.id
    [again] = store.create_tasks([make_task(now + H, "x", kwargs={"a": 1, "b": 2})], now=now)
    assert again.id == a.id
    assert store.count_tasks() == 2
    # a disabled task is no longer live: an identical one may be created
    store.disable_tasks([a.id or 0], now=now)
    [fresh] = store.create_tasks([make_task(now, "x", kwargs={"a": 1, "b": 2})], now=now)
    assert fresh.id != a.id
    # ... and the old one cannot come back while the new one is live
    with pytest.raises(Conflict):
        store.enable_tasks([a.id or 0], now=now)
    assert store.get_tasks([a.id or 0])[0].status is TaskStatus.DISABLED


def test_import_is_all_or_nothing(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    def stream(fail_at: int | None) -> Iterator[Task]:
        for n in range(2500):
            if n == fail_at:
                raise InvalidInput("args", "broken", line=n + 1)
            yield make_task(now, n % 2000)

    with pytest.raises(InvalidInput) as info:
        store.import_tasks(stream(2100), now=now, batch_size=1000)
    assert info.value.line == 2101
    assert store.count_tasks() == 0
    seen: list[tuple[int, int]] = []
    summary = store.import_tasks(
        stream(None), now=now, batch_size=1000, progress=lambda c, e: seen.append((c, e))
    )
    assert (summary.created, summary.existing) == (2000, 500)
    # after each batch (a remote store: once, when the server is done)
    assert seen[-1] == (2000, 500)
    if isinstance(store, SQLAlchemyStore):
        assert seen == [(1000, 0), (2000, 0), (2000, 500)]
    assert store.count_tasks() == 2000


# -- queries ----------------------------------------------------------------


def test_search_filters_and_pages(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    created = store.create_tasks(
        [
            make_task(
                now,
                n,
                key=f"site/{n}",
                priority=Priority.LOW if n % 2 else Priority.NORMAL,
                offset=n * H,
            )
            for n in range(10)
        ],
        now=now,
    )
    store.disable_tasks([created[0].id or 0], now=now)
    assert store.count_tasks() == 10
    odd = store.search_tasks(TaskFilter(priority=Priority.LOW))
    assert [t.args[0] for t in odd] == [1, 3, 5, 7, 9]
    waiting = TaskFilter(status=[TaskStatus.WAITING], next_run_before=now + 3 * H)
    assert [t.args[0] for t in store.search_tasks(waiting)] == [1, 2, 3]
    assert store.count_tasks(TaskFilter(key_prefix="site/1")) == 1
    assert store.count_tasks(TaskFilter(key_prefix="site_")) == 0
    pages, after = [], 0
    while page := store.search_tasks(after_id=after, limit=4):
        pages.append([t.args[0] for t in page])
        after = page[-1].id or 0
    assert pages == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert store.search_tasks(TaskFilter(type="other")) == []


def test_waiting_entries_page_a_class_in_dispatch_order(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    # deadlines 5h, 4h, 3h, 3h, 2h...: equal deadlines are ordered by id
    deadlines = [5, 4, 3, 3, 2, 6, 1]
    created = store.create_tasks(
        [make_task(now, n, offset=-H, deadline=d * H) for n, d in enumerate(deadlines)]
        + [make_task(now, "high", priority=Priority.HIGH)],
        now=now,
    )
    store.disable_tasks([created[5].id or 0], now=now)
    ids = [t.id or 0 for t in created]
    entries = store.waiting_entries("sleep", Priority.NORMAL)
    assert [e.id for e in entries] == [ids[6], ids[4], ids[2], ids[3], ids[1], ids[0]]
    first = entries[0]
    assert (first.next_run, first.deadline) == (now - H, now + H)
    assert [e.id for e in store.waiting_entries("sleep", Priority.HIGH)] == [ids[7]]
    assert store.waiting_entries("sleep", Priority.LOW) == []
    assert store.waiting_entries("other", Priority.NORMAL) == []
    # keyset pages, and a range between two keys
    pages, after = [], None
    while page := store.waiting_entries("sleep", Priority.NORMAL, after=after, limit=4):
        pages.append([e.id for e in page])
        after = page[-1].key
    assert pages == [[ids[6], ids[4], ids[2], ids[3]], [ids[1], ids[0]]]
    between = store.waiting_entries(
        "sleep", Priority.NORMAL, after=entries[1].key, until=entries[3].key
    )
    assert [e.id for e in between] == [ids[2], ids[3]]
    with pytest.raises(InvalidInput):
        store.waiting_entries("sleep", Priority.NORMAL, limit=0)


def test_pending_tasks_in_dispatch_order(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks(
        [
            make_task(now, "late-normal", offset=-H, deadline=2 * H),
            make_task(now, "urgent-normal", offset=-H, deadline=H),
            make_task(now, "low", offset=-2 * H, deadline=-H, priority=Priority.LOW),
            make_task(now, "high", offset=-H, deadline=5 * H, priority=Priority.HIGH),
            make_task(now, "not-ready", offset=H, deadline=-5 * H),
        ],
        now=now,
    )
    pending = store.list_pending("sleep", now=now)
    assert [t.args[0] for t in pending] == ["high", "urgent-normal", "late-normal", "low"]
    assert [t.args[0] for t in store.list_pending("sleep", now=now, limit=2)] == [
        "high",
        "urgent-normal",
    ]
    only_low = store.list_pending("sleep", now=now, priorities=[Priority.LOW])
    assert [t.args[0] for t in only_low] == ["low"]
    assert store.list_pending("other", now=now) == []


# -- claims -----------------------------------------------------------------


def test_claim_creates_runs_and_never_claims_twice(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    created = store.create_tasks(
        [make_task(now, n, offset=-H, deadline=timedelta(minutes=10 - n)) for n in range(10)],
        now=now,
    )
    first = store.claim_ready_tasks("sleep", now=now, limit=4)
    assert [c.args[0] for c in first] == [9, 8, 7, 6]
    by_id = {t.id: t for t in created}
    for claimed in first:
        task = store.get_tasks([claimed.task_id])[0]
        assert task.status is TaskStatus.SCHEDULED and task.updated_at == now
        assert claimed.slot == by_id[claimed.task_id].next_run
        assert claimed.deadline == by_id[claimed.task_id].deadline
        namespace = run_namespace_of(store.installation_id())
        assert claimed.backend_id == run_backend_id(claimed.task_id, claimed.slot, namespace)
        run = store.get_task_run(claimed.backend_id)
        assert run is not None
        assert (run.task_id, run.status, run.slot, run.scheduled, run.started) == (
            claimed.task_id,
            RunStatus.SCHEDULED,
            claimed.slot,
            now,
            None,
        )
    second = store.claim_ready_tasks("sleep", now=now, limit=100)
    assert len(second) == 6
    assert not {c.task_id for c in first} & {c.task_id for c in second}
    assert store.claim_ready_tasks("sleep", now=now, limit=100) == []
    statuses = {t.status for t in store.get_tasks([t.id or 0 for t in created])}
    assert statuses == {TaskStatus.SCHEDULED}


def test_dispatch_batches_tell_orphans_from_published_runs(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks([make_task(now, n, offset=-H) for n in range(5)], now=now)
    first = store.claim_ready_tasks("sleep", now=now, limit=3)
    second = store.claim_ready_tasks("sleep", now=now + S, limit=3)
    assert len({c.batch for c in first}) == 1 and len({c.batch for c in second}) == 1
    assert first[0].batch != second[0].batch and first[0].batch is not None
    assert store.claim_ready_tasks("sleep", now=now, limit=3) == []
    store.mark_published([first[0].batch], at=now + 2 * S)
    store.mark_published([first[0].batch], at=now + H)  # the first time stays
    assert store.unstarted_run_counts() == {"sleep": 3}
    assert store.unstarted_run_counts(task_types=["other"]) == {}
    # orphans: the unpublished claim only, once claimed before the bound
    assert store.reclaim_unstarted_runs(now=now + H, claimed_before=now) == []
    orphans = store.reclaim_unstarted_runs(now=now + H, claimed_before=now + H)
    assert sorted(c.task_id for _, c in orphans) == sorted(c.task_id for c in second)
    assert {c.batch for _, c in orphans} != {second[0].batch}
    # taken: an orphan again only if its new batch is not marked published
    assert store.reclaim_unstarted_runs(now=now + H, claimed_before=now + H) == []
    # published ones wait from their publication (now + 2 s), not their claim
    assert store.reclaim_unstarted_runs(now=now + H, published_before=now + S) == []
    lost = store.reclaim_unstarted_runs(now=now + H, published_before=now + 3 * S, limit=2)
    assert [c.task_id for _, c in lost] == [c.task_id for c in first[:2]]
    assert store.unstarted_run_counts() == {"sleep": 1}
    assert store.delete_old_batches(claimed_before=now + S) == 1  # the first claim's
    # a run whose batch is gone counts as published when it was scheduled
    assert store.unstarted_run_counts() == {"sleep": 1}
    lost = store.reclaim_unstarted_runs(now=now + 2 * H, published_before=now + S)
    assert [c.task_id for _, c in lost] == [first[2].task_id]


def test_claim_by_priority_class(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks(
        [
            make_task(now, "n", offset=-H, deadline=-H),
            make_task(now, "h", offset=-H, priority=Priority.HIGH),
        ],
        now=now,
    )
    assert [
        c.args[0]
        for c in store.claim_ready_tasks("sleep", now=now, limit=5, priorities=[Priority.HIGH])
    ] == ["h"]
    assert store.claim_ready_tasks("sleep", now=now, limit=0) == []
    assert [c.args[0] for c in store.claim_ready_tasks("sleep", now=now, limit=5)] == ["n"]


@pytest.mark.parametrize("limit", [12, 1])
def test_dispatch_orders(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, limit: int
) -> None:
    # task n became ready n+1 minutes ago; its deadline is (n - 6) * 10 min
    # from now: 0-5 are late, 6 is due now, 7-11 are ahead. With a limit of
    # 1 the PostgreSQL claim walks an index (more than 10 x the limit are
    # ready), with 12 it sorts the ready set: both must give the same order
    minute = timedelta(minutes=1)
    store.create_tasks(
        [
            make_task(now, n, offset=-(n + 1) * minute, deadline=(n - 6) * 10 * minute)
            for n in range(12)
        ]
        + [make_task(now, "high", offset=-minute, priority=Priority.HIGH, deadline=H)],
        now=now,
    )
    by_id = {t.id: t.args[0] for t in store.search_tasks(TaskFilter(type="sleep"))}
    expected = {
        DispatchOrder.DEADLINE: list(range(12)),
        DispatchOrder.FIFO: list(range(11, -1, -1)),
        # due (deadline within the margin of 30 min: 0-9), the longest
        # cycle (never run: from creation to deadline) first; then by deadline
        DispatchOrder.TRIAGE: [*range(9, -1, -1), 10, 11],
    }
    for order, normal in expected.items():
        ids = store.ready_task_ids("sleep", now=now, limit=limit, order=order)
        assert [by_id[i] for i in ids] == ["high", *normal][:limit], order
    shuffled = [by_id[i] for i in store.ready_task_ids("sleep", now=now, limit=13, order="random")]
    assert shuffled[0] == "high" and sorted(shuffled[1:]) == list(range(12))
    # reproducible at one instant, another order at another
    again = store.ready_task_ids("sleep", now=now, limit=13, order=DispatchOrder.RANDOM)
    assert [by_id[i] for i in again] == shuffled
    later = store.ready_task_ids("sleep", now=now + S, limit=13, order=DispatchOrder.RANDOM)
    assert [by_id[i] for i in later] != shuffled
    # claims take the same order, one chunk after another
    claimed: list[object] = []
    while batch := store.claim_ready_tasks(
        "sleep", now=now, limit=limit, order=DispatchOrder.TRIAGE
    ):
        claimed.extend(c.args[0] for c in batch)
    assert claimed == ["high", *expected[DispatchOrder.TRIAGE]]


@pytest.mark.parametrize("limit", [6, 1])
def test_triage_serves_the_due_tasks_whose_run_buys_the_longest_time_first(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, limit: int
) -> None:
    minute = timedelta(minutes=1)

    def task(name: str, deadline: timedelta, ended: timedelta | None, **fields: object) -> Task:
        last_end = now - ended if ended is not None else None
        return make_task(
            now, name, offset=-minute, deadline=deadline, last_good_end_at=last_end, **fields
        )

    store.create_tasks(
        [
            task("late, cycle 1 h 50", -10 * minute, 2 * H),
            task("late, cycle 23 h", -H, 24 * H),
            task("due in 10 min, cycle 3 h 10", 10 * minute, 3 * H),
            task("one-shot, due in 20 min", 20 * minute, None, schedule_kind=ScheduleKind.ONESHOT),
            task("not due, in 2 h", 2 * H, 240 * H),
            task("not due, in 1 h", H, None),
        ],
        now=now,
    )
    names = {t.id: t.args[0] for t in store.search_tasks(TaskFilter(type="sleep"))}
    expected = [
        "one-shot, due in 20 min",
        "late, cycle 23 h",
        "due in 10 min, cycle 3 h 10",
        "late, cycle 1 h 50",
        "not due, in 1 h",
        "not due, in 2 h",
    ]
    ids = store.ready_task_ids("sleep", now=now, limit=6, order=DispatchOrder.TRIAGE)
    assert [names[i] for i in ids] == expected
    claimed: list[object] = []
    while batch := store.claim_ready_tasks(
        "sleep", now=now, limit=limit, order=DispatchOrder.TRIAGE
    ):
        claimed.extend(c.args[0] for c in batch)
    assert claimed == expected


def test_ready_ids_then_claims_among_them_share_out_the_dispatch_order(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    created = store.create_tasks(
        [make_task(now, n, offset=-H, deadline=timedelta(minutes=10 - n)) for n in range(8)]
        + [
            make_task(now, "later", offset=H),
            make_task(now, "high", offset=-H, priority=Priority.HIGH),
        ],
        now=now,
    )
    args = {t.id: t.args[0] for t in created}
    ids = store.ready_task_ids("sleep", now=now, limit=6)
    # the order a claim would take: high class first, then by deadline
    assert [args[i] for i in ids] == ["high", 7, 6, 5, 4, 3]
    assert store.ready_task_ids("sleep", now=now, limit=6, priorities=[Priority.HIGH]) == ids[:1]
    assert store.ready_task_ids("sleep", now=now, limit=0) == []
    # a read claims nothing
    assert store.ready_task_ids("sleep", now=now, limit=6) == ids
    # two claims share the ids out; one taken meanwhile is skipped
    [taken] = store.claim_ready_tasks("sleep", now=now, limit=1, among=[ids[4]])
    first = store.claim_ready_tasks("sleep", now=now, limit=3, among=ids[:3])
    second = store.claim_ready_tasks("sleep", now=now, limit=3, among=ids[3:])
    assert [c.task_id for c in first] == ids[:3]
    assert [c.task_id for c in second] == [ids[3], ids[5]]
    assert taken.task_id == ids[4]
    for claimed in (*first, *second):
        assert store.get_task_run(claimed.backend_id) is not None
    # never more than the limit, never a task not ready, never an empty list
    rest = store.ready_task_ids("sleep", now=now, limit=10)
    assert [args[i] for i in rest] == [2, 1, 0]
    later = next(t.id for t in created if t.args[0] == "later")
    assert [
        c.args[0]
        for c in store.claim_ready_tasks("sleep", now=now, limit=2, among=[*rest, later or 0])
    ] == [2, 1]
    assert store.claim_ready_tasks("sleep", now=now, limit=5, among=[later or 0]) == []
    assert store.claim_ready_tasks("sleep", now=now, limit=5, among=[]) == []
    assert store.ready_task_ids("sleep", now=now, limit=10) == [rest[2]]


def test_backend_id_is_derived_from_task_and_slot(now: datetime) -> None:
    assert run_backend_id(1, now) == run_backend_id(1, now)
    assert run_backend_id(1, now) != run_backend_id(2, now)
    assert run_backend_id(1, now) != run_backend_id(1, now + timedelta(microseconds=1))


# -- status changes ---------------------------------------------------------


def test_disable_enable_cancel_respawn(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.update_task_type("sleep", num_retries=3)
    a, b, c = store.create_tasks([make_task(now, n, offset=-H) for n in range(3)], now=now)
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    assert claimed.task_id == a.id
    assert [t.id for t in store.disable_tasks([a.id or 0, b.id or 0], now=now)] == [a.id, b.id]
    assert store.disable_tasks([b.id or 0], now=now) == []
    assert [t.status for t in store.enable_tasks([b.id or 0], now=now)] == [TaskStatus.WAITING]
    cancelled = store.cancel_tasks([a.id or 0, c.id or 0, 10**9], now=now)
    assert [t.status for t in cancelled] == [TaskStatus.CANCELLED] * 2
    run = store.get_task_run(claimed.backend_id)
    assert run is not None and run.status is RunStatus.CANCELLED and run.ended == now
    later = now + 2 * H
    respawned = store.respawn_tasks([c.id or 0], next_run=later, now=now)
    assert [(t.status, t.next_run, t.deadline, t.retries_left) for t in respawned] == [
        (TaskStatus.WAITING, later, later, 3)
    ]


def test_respawn_leaves_tasks_with_an_open_run(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [a] = store.create_tasks([make_task(now, 1, offset=-H)], now=now)
    store.claim_ready_tasks("sleep", now=now, limit=1)
    assert store.respawn_tasks([a.id or 0], next_run=now, now=now) == []


def test_update_task_with_optimistic_check(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [a] = store.create_tasks([make_task(now, 1)], now=now)
    changed = a.updated(failure_count=2, updated_at=now + H)
    assert store.update_task(changed, expected_updated_at=now) == changed
    with pytest.raises(Conflict):
        store.update_task(changed.updated(failure_count=3), expected_updated_at=now)
    assert store.get_tasks([a.id or 0]) == [changed]
    with pytest.raises(NotFound):
        store.update_task(changed.updated(id=10**9))


# -- runs -------------------------------------------------------------------


def test_many_runs_start_at_once_as_one_by_one(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks([make_task(now, n, offset=-H) for n in range(3)], now=now)
    a, b, c = store.claim_ready_tasks("sleep", now=now, limit=3)
    store.start_task_run(c.backend_id, started=now, worker="w0")
    runs = store.start_task_runs(
        [
            (a.backend_id, now + H, "w1"),
            (b.backend_id, now + 2 * H, None),
            (a.backend_id, now + 3 * H, "w3"),  # a second start: the first counts
            (c.backend_id, now + H, "w1"),  # already started: unchanged
            ("unknown", now, "w1"),
        ]
    )
    assert set(runs) == {a.backend_id, b.backend_id, c.backend_id}
    assert (runs[a.backend_id].status, runs[a.backend_id].started) == (RunStatus.STARTED, now + H)
    assert (runs[a.backend_id].worker, runs[b.backend_id].worker) == ("w1", None)
    assert (runs[c.backend_id].started, runs[c.backend_id].worker) == (now, "w0")
    assert runs[b.backend_id] == store.get_task_run(b.backend_id)
    assert store.start_task_runs([]) == {}


def test_many_runs_end_at_once_as_one_by_one(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    from swh_like_scheduler.store.interface import RunEnd

    store.create_tasks([make_task(now, n, offset=-H) for n in range(2)], now=now)
    a, b = store.claim_ready_tasks("sleep", now=now, limit=2)
    seen: list[tuple[str, int | None]] = []

    def apply(task: Task, run: TaskRun) -> Task:
        seen.append((run.backend_id, task.failure_count))
        return task.updated(
            status=TaskStatus.WAITING, failure_count=task.failure_count + 1, last_end_at=run.ended
        )

    with pytest.raises(InvalidInput):  # a status that is not final: nothing written
        store.end_task_runs(
            [
                RunEnd(a.backend_id, RunStatus.EVENTFUL, now),
                RunEnd(b.backend_id, RunStatus.STARTED, now),
            ]
        )
    assert store.get_task_run(a.backend_id).status is RunStatus.SCHEDULED  # type: ignore[union-attr]
    ends = [
        RunEnd(a.backend_id, RunStatus.FAILED, now + H, error="boom"),
        RunEnd("unknown", RunStatus.EVENTFUL, now + H),
        RunEnd(a.backend_id, RunStatus.EVENTFUL, now + 2 * H),  # ended already: unchanged
        RunEnd(b.backend_id, RunStatus.EVENTFUL, now + 3 * H, result={"status": "eventful"}),
    ]
    runs = store.end_task_runs(ends, apply=apply)
    assert runs[1] is None
    assert runs[0] == runs[2] == store.get_task_run(a.backend_id)
    assert runs[0] is not None and (runs[0].status, runs[0].error) == (RunStatus.FAILED, "boom")
    assert runs[3] == store.get_task_run(b.backend_id)
    assert runs[3] is not None and runs[3].result == {"status": "eventful"}
    assert seen == [(a.backend_id, 0), (b.backend_id, 0)]
    by_id = {t.id: t for t in store.get_tasks([a.task_id, b.task_id])}
    assert (by_id[a.task_id].failure_count, by_id[a.task_id].updated_at) == (1, now + H)
    assert by_id[b.task_id].last_end_at == now + 3 * H
    assert store.end_task_runs(ends, apply=apply) == runs  # idempotent
    assert len(seen) == 2
    assert store.end_task_runs([]) == []


def test_run_lifecycle_is_idempotent(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    [a] = store.create_tasks([make_task(now, 1, offset=H)], now=now)
    run = store.schedule_task_run(a.id or 0, now=now)
    assert run.slot == a.next_run and run.status is RunStatus.SCHEDULED
    with pytest.raises(InvalidTransition):
        store.schedule_task_run(a.id or 0, now=now)
    with pytest.raises(NotFound):
        store.schedule_task_run(10**9, now=now)
    started = store.start_task_run(run.backend_id, started=now + H, worker="w1@host")
    assert started is not None and started.status is RunStatus.STARTED
    assert store.start_task_run(run.backend_id, started=now + 2 * H, worker="w2") == started

    def apply(task: Task, ended_run: TaskRun) -> Task:
        assert ended_run.status is RunStatus.EVENTFUL
        return task.updated(
            status=TaskStatus.WAITING,
            last_end_at=ended_run.ended,
            next_run=now + 5 * H,
            deadline=now + 6 * H,
        )

    ended = store.end_task_run(
        run.backend_id,
        status=RunStatus.EVENTFUL,
        ended=now + 2 * H,
        result={"status": "eventful"},
        apply=apply,
    )
    assert ended is not None and ended.result == {"status": "eventful"}
    task = store.get_tasks([a.id or 0])[0]
    assert (task.status, task.last_end_at, task.next_run) == (
        TaskStatus.WAITING,
        now + 2 * H,
        now + 5 * H,
    )
    assert task.updated_at == now + 2 * H

    def must_not_run(task: Task, run: TaskRun) -> Task:
        raise AssertionError("applied twice")

    again = store.end_task_run(
        run.backend_id, status=RunStatus.FAILED, ended=now + 3 * H, apply=must_not_run
    )
    assert again == ended
    assert store.get_task_runs(a.id or 0) == [ended]
    assert store.start_task_run("unknown", started=now) is None
    assert store.end_task_run("unknown", status=RunStatus.FAILED, ended=now) is None
    with pytest.raises(InvalidInput):
        store.end_task_run(run.backend_id, status=RunStatus.STARTED, ended=now)


def test_failed_apply_leaves_the_run_open(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    store.create_tasks([make_task(now, 1, offset=-H)], now=now)
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)

    def broken(task: Task, run: TaskRun) -> Task:
        raise RuntimeError("policy bug")

    with pytest.raises(RuntimeError):
        store.end_task_run(claimed.backend_id, status=RunStatus.EVENTFUL, ended=now, apply=broken)
    run = store.get_task_run(claimed.backend_id)
    assert run is not None and run.status is RunStatus.SCHEDULED


def test_runs_listed_newest_first(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    [a] = store.create_tasks([make_task(now, 1, offset=-H)], now=now)
    backend_ids = []
    for n in range(3):
        run = store.schedule_task_run(a.id or 0, now=now + n * H)
        backend_ids.append(run.backend_id)
        store.end_task_run(
            run.backend_id,
            status=RunStatus.UNEVENTFUL,
            ended=now + n * H,
            apply=lambda t, r, n=n: t.updated(
                status=TaskStatus.WAITING, next_run=now + (n + 1) * H
            ),
        )
    assert [r.backend_id for r in store.get_task_runs(a.id or 0)] == backend_ids[::-1]
    assert len(store.get_task_runs(a.id or 0, limit=2)) == 2


def test_runs_counted_and_filtered_by_status(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    """``count_task_runs`` counts every kept run of the task (not a page of
    them); ``get_task_runs(statuses=...)`` finds the latest failure behind
    newer good runs."""
    a, b = store.create_tasks([make_task(now, 1, offset=-H), make_task(now, 2)], now=now)
    ends = [
        (RunStatus.FAILED, "TypeError: first"),
        (RunStatus.TIMED_OUT, "stopped by its hard time limit"),
        (RunStatus.EVENTFUL, None),
        (RunStatus.UNEVENTFUL, None),
    ]
    for n, (status, error) in enumerate(ends):
        run = store.schedule_task_run(a.id or 0, now=now + n * H)
        store.end_task_run(run.backend_id, status=status, ended=now + n * H, error=error)
        [task] = store.get_tasks([a.id or 0])  # the task as an outcome leaves it
        store.update_task(task.updated(status=TaskStatus.WAITING, next_run=now + (n + 1) * H))
    assert store.count_task_runs(a.id or 0) == 4
    assert store.count_task_runs(b.id or 0) == 0
    assert len(store.get_task_runs(a.id or 0, limit=2)) == 2
    failed = (RunStatus.FAILED, RunStatus.PERMFAILED, RunStatus.TIMED_OUT)
    [latest] = store.get_task_runs(a.id or 0, limit=1, statuses=failed)
    assert (latest.status, latest.error) == (RunStatus.TIMED_OUT, "stopped by its hard time limit")
    both = store.get_task_runs(a.id or 0, statuses=[RunStatus.FAILED, RunStatus.TIMED_OUT])
    assert [r.error for r in both] == ["stopped by its hard time limit", "TypeError: first"]
    assert store.get_task_runs(a.id or 0, statuses=[RunStatus.LOST]) == []


# -- retention --------------------------------------------------------------


def test_retention_deletes_only_old_finished_things(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime, local_only: None
) -> None:
    old, recent, oneshot_done, oneshot_live = store.create_tasks(
        [
            make_task(now, 1, offset=-H),
            make_task(now, 2, offset=-H),
            make_task(now, 3, schedule_kind=ScheduleKind.ONESHOT, offset=-H),
            make_task(now, 4, schedule_kind=ScheduleKind.ONESHOT, offset=H),
        ],
        now=now,
    )
    # (dispatched an hour ago: a run never ends before its dispatch)
    claims = {c.task_id: c for c in store.claim_ready_tasks("sleep", now=now - H, limit=10)}
    store.end_task_run(claims[old.id].backend_id, status=RunStatus.EVENTFUL, ended=now - H / 2)
    store.end_task_run(claims[recent.id].backend_id, status=RunStatus.EVENTFUL, ended=now + H)
    store.end_task_run(
        claims[oneshot_done.id].backend_id,
        status=RunStatus.EVENTFUL,
        ended=now,
        apply=lambda t, r: t.updated(status=TaskStatus.COMPLETED),
    )
    assert store.delete_old_runs(ended_before=now) == 1
    assert store.get_task_run(claims[old.id].backend_id) is None
    assert store.get_task_run(claims[recent.id].backend_id) is not None
    assert store.delete_finished_oneshot_tasks(updated_before=now + H) == 1
    remaining = {t.id for t in store.search_tasks()}
    assert remaining == {old.id, recent.id, oneshot_live.id}
    assert store.get_task_run(claims[oneshot_done.id].backend_id) is None


def test_retention_keeps_a_finished_oneshot_whose_run_goes_on(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [task] = store.create_tasks(
        [make_task(now, 1, schedule_kind=ScheduleKind.ONESHOT, offset=-H)], now=now
    )
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    store.start_task_run(claimed.backend_id, started=now, worker="w1")
    store.disable_tasks([task.id or 0], now=now)  # the run is left to finish
    assert store.delete_finished_oneshot_tasks(updated_before=now + 30 * H) == 0
    assert store.get_task_run(claimed.backend_id) is not None
    store.end_task_run(claimed.backend_id, status=RunStatus.EVENTFUL, ended=now + H)
    assert store.delete_finished_oneshot_tasks(updated_before=now + 30 * H) == 1
    assert store.get_task_run(claimed.backend_id) is None


def test_delete_tasks_removes_their_runs(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [a] = store.create_tasks([make_task(now, 1, offset=-H)], now=now)
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    assert store.delete_tasks([a.id or 0, 10**9]) == 1
    assert store.get_task_run(claimed.backend_id) is None


def test_next_ready_time(store: SQLAlchemyStore, sleep_type: TaskType, now: datetime) -> None:
    assert store.next_ready_time("sleep") is None
    store.create_tasks(
        [make_task(now, 1, offset=3 * H), make_task(now, 2, offset=2 * H, priority=Priority.LOW)],
        now=now,
    )
    assert store.next_ready_time("sleep") == now + 2 * H
    assert store.next_ready_time("sleep", priorities=[Priority.NORMAL]) == now + 3 * H
    store.claim_ready_tasks("sleep", now=now + 5 * H, limit=1, priorities=[Priority.LOW])
    assert store.next_ready_time("sleep") == now + 3 * H


def test_claims_respect_banned_nodes(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks(
        [
            make_task(now, "free", offset=-H, deadline=H),
            make_task(now, "not-a", offset=-H, deadline=2 * H, dont_run_on_nodes=("a",)),
            make_task(now, "not-a-b", offset=-H, deadline=3 * H, dont_run_on_nodes=("a", "b")),
        ],
        now=now,
    )
    # live nodes unknown: only the unconstrained task may be sent
    assert [c.args[0] for c in store.claim_ready_tasks("sleep", now=now, limit=9)] == ["free"]
    # only node "a" alive: nothing else may go anywhere
    assert store.claim_ready_tasks("sleep", now=now, limit=9, nodes=["a"]) == []
    claimed = store.claim_ready_tasks("sleep", now=now, limit=9, nodes=["a", "b"])
    assert [(c.args[0], c.dont_run_on_nodes) for c in claimed] == [("not-a", ("a",))]
    claimed = store.claim_ready_tasks("sleep", now=now, limit=9, nodes=["a", "b", "c"])
    assert [c.args[0] for c in claimed] == ["not-a-b"]


def test_nothing_of_a_paused_type_is_claimed_until_it_is_resumed(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    store.create_task_type(TaskType(type="other", backend_name="x.other"))
    created = store.create_tasks(
        [
            *(make_task(now, n, offset=-H) for n in range(3)),
            *(make_task(now, n, type="other", offset=-H) for n in range(2)),
        ],
        now=now,
    )
    store.pause_task_type("sleep", now=now)
    assert store.claim_ready_tasks("sleep", now=now, limit=10) == []
    ids = store.ready_task_ids("sleep", now=now, limit=10)  # a read: they are ready
    assert len(ids) == 3
    assert store.claim_ready_tasks("sleep", now=now, limit=10, among=ids) == []
    assert len(store.claim_ready_tasks("other", now=now, limit=10)) == 2  # others go on
    sleeping = store.get_tasks([t.id or 0 for t in created[:3]])
    assert {t.status for t in sleeping} == {TaskStatus.WAITING}
    assert all(store.get_task_runs(t.id or 0) == [] for t in created[:3])
    store.resume_task_type("sleep")
    assert sorted(c.args[0] for c in store.claim_ready_tasks("sleep", now=now, limit=10)) == [
        0,
        1,
        2,
    ]


def test_a_paused_type_records_no_room_and_expires_nothing(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    oneshot = {"schedule_kind": ScheduleKind.ONESHOT, "offset": -H, "max_delay": S}
    [early] = store.create_tasks([make_task(now, 1, deadline=-H + S, **oneshot)], now=now - 2 * H)
    store.record_room("sleep", at=now - 30 * S)  # a pass with room before the pause
    store.pause_task_type("sleep", now=now - 10 * S)
    store.record_room("sleep", at=now - S)  # not recorded: the type is paused
    assert store.expire_oneshot_tasks(now=now) == []
    assert store.get_tasks([early.id or 0])[0].status is TaskStatus.WAITING
    store.resume_task_type("sleep")
    [expiry] = store.expire_oneshot_tasks(now=now)  # the pass before the pause had room
    assert expiry.task.id == early.id
    assert expiry.run.history[0]["room_at"] == (now - 30 * S).isoformat()


def test_a_oneshot_expires_only_after_a_pass_with_room(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    [late, unbounded] = store.create_tasks(
        [
            make_task(
                now, 1, schedule_kind=ScheduleKind.ONESHOT, offset=-H, deadline=-H + S, max_delay=S
            ),
            make_task(now, 2, schedule_kind=ScheduleKind.ONESHOT, offset=-H, deadline=-H),
        ],
        now=now - 2 * H,
    )
    assert store.expire_oneshot_tasks(now=now) == []  # no pass had room since
    store.record_room("sleep", at=now - S, priorities=[Priority.NORMAL])
    [expiry] = store.expire_oneshot_tasks(now=now)
    assert expiry.task.id == late.id and expiry.task.status is TaskStatus.DISABLED
    assert expiry.run.error and "had room at" in expiry.run.error
    assert store.get_tasks([unbounded.id or 0])[0].status is TaskStatus.WAITING


def test_arguments_nested_too_deep_are_refused_and_nothing_is_written(
    store: SQLAlchemyStore, sleep_type: TaskType, now: datetime
) -> None:
    deep: object = "leaf"
    for _ in range(300):
        deep = {"x": deep}
    with pytest.raises(InvalidInput) as info:
        store.create_tasks([make_task(now, 1, kwargs={"n": deep}), make_task(now, 2)], now=now)
    assert info.value.field == "kwargs" and "32 levels" in info.value.message
    assert store.count_tasks() == 0
    shallow: object = "leaf"
    for _ in range(31):
        shallow = [shallow]
    [task] = store.create_tasks([make_task(now, 3, shallow)], now=now)
    assert task.args[1] == shallow
