"""The store contract of bulk actions on a filter (preview_bulk, apply_bulk):
SQLite, PostgreSQL, PostgreSQL with the Redis index, and over HTTP."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from test_store_contract import H, make_task

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import RunStatus, TaskStatus, TaskType
from swh_like_scheduler.store.values import BulkAction, BulkFilter, BulkReport


def every_window(store: Any, action: BulkAction, criteria: BulkFilter, **kw: Any) -> BulkReport:
    """apply_bulk (or preview_bulk with ``preview=True``) window after window."""
    method = store.preview_bulk if kw.pop("preview", False) else store.apply_bulk
    report = method(action, criteria, **kw)
    while report.next_after_id is not None:
        report = report.then(method(action, criteria, after_id=report.next_after_id, **kw))
    return report


def statuses(store: Any) -> dict[Any, TaskStatus]:
    return {t.args[0] if t.args else t.key: t.status for t in store.search_tasks(limit=1000)}


def other_type(store: Any, sleep_type: TaskType) -> TaskType:
    return store.create_task_type(sleep_type.updated(type="other"))


def test_preview_counts_and_apply_disables_what_matches(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    other_type(store, sleep_type)
    store.create_tasks(
        [make_task(now, n, key=f"site/{n}") for n in range(5)]
        + [make_task(now, 9, key="elsewhere/9")]
        + [make_task(now, 7, type="other", key="site/other")],
        now=now,
    )
    criteria = BulkFilter(type="sleep", key_prefix="site/")
    preview = store.preview_bulk(BulkAction.DISABLE, criteria, now=now)
    assert (preview.matched, preview.changed, preview.held, preview.next_after_id) == (
        5,
        0,
        0,
        None,
    )
    assert statuses(store) == dict.fromkeys([0, 1, 2, 3, 4, 9, 7], TaskStatus.WAITING)
    ids = [t.id for t in store.search_tasks(limit=100) if t.type == "sleep" and t.args[0] < 5]
    assert preview.sample == tuple(ids)

    done = store.apply_bulk(BulkAction.DISABLE, criteria, now=now + H)
    assert (done.matched, done.changed, done.held, done.sample) == (5, 5, 0, tuple(ids))
    assert sorted(done.changed_ids) == ids and done.types == ("sleep",)
    after = {t.args[0]: t for t in store.search_tasks(limit=100)}
    assert {n for n, t in after.items() if t.status is TaskStatus.DISABLED} == set(range(5))
    assert {after[n].updated_at for n in range(5)} == {now + H}
    # disabled already: nothing matches a second time
    again = store.apply_bulk(BulkAction.DISABLE, criteria, now=now)
    assert (again.matched, again.changed) == (0, 0)
    enabled = store.apply_bulk(BulkAction.ENABLE, criteria, now=now)
    assert enabled.changed == 5
    assert set(statuses(store).values()) == {TaskStatus.WAITING}


def test_windows_and_batches_cover_every_task_once(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks([make_task(now, n) for n in range(23)], now=now)
    criteria = BulkFilter(type="sleep")
    first = store.preview_bulk(BulkAction.CANCEL, criteria, now=now, scan=10)
    assert first.matched == 10 and first.next_after_id is not None
    preview = every_window(store, BulkAction.CANCEL, criteria, now=now, scan=10, preview=True)
    assert (preview.matched, preview.next_after_id, len(preview.sample)) == (23, None, 10)
    done = every_window(store, BulkAction.CANCEL, criteria, now=now, scan=10, batch_size=3)
    assert (done.matched, done.changed, done.held) == (23, 23, 0)
    assert set(statuses(store).values()) == {TaskStatus.CANCELLED}


def test_a_filter_by_ids_and_status(store: Any, sleep_type: TaskType, now: datetime) -> None:
    tasks = store.create_tasks([make_task(now, n) for n in range(6)], now=now)
    ids = [t.id for t in tasks]
    store.disable_tasks(ids[:2], now=now)
    criteria = BulkFilter(ids=(ids[1], ids[2], ids[4], 10**9), status=(TaskStatus.WAITING,))
    done = store.apply_bulk(BulkAction.CANCEL, criteria, now=now, batch_size=1)
    assert (done.matched, done.changed, done.next_after_id) == (2, 2, None)
    assert statuses(store) == {
        0: TaskStatus.DISABLED,
        1: TaskStatus.DISABLED,
        2: TaskStatus.CANCELLED,
        3: TaskStatus.WAITING,
        4: TaskStatus.CANCELLED,
        5: TaskStatus.WAITING,
    }


def test_a_filter_by_condition(store: Any, sleep_type: TaskType, now: datetime) -> None:
    # adaptive, interval 1 h: ERROR (never run) once can_start_by + 1 h has passed
    store.create_tasks(
        [make_task(now, "late", offset=-3 * H), make_task(now, "fresh", offset=timedelta(0))],
        now=now,
    )
    criteria = BulkFilter(condition=("error",))
    assert criteria.condition == ("ERROR",)
    preview = store.preview_bulk(BulkAction.DISABLE, criteria, now=now)
    assert preview.matched == 1
    # the condition is computed at the action's own instant
    assert store.preview_bulk(BulkAction.DISABLE, criteria, now=now + 3 * H).matched == 2
    done = store.apply_bulk(BulkAction.DISABLE, criteria, now=now)
    assert done.changed == 1
    assert statuses(store) == {"late": TaskStatus.DISABLED, "fresh": TaskStatus.WAITING}
    # a disabled task is in WARNING: enable the tasks in WARNING
    back = store.apply_bulk(BulkAction.ENABLE, BulkFilter(condition=("WARNING",)), now=now)
    assert back.changed == 1


def test_a_filter_by_arguments(store: Any, sleep_type: TaskType, now: datetime) -> None:
    store.create_tasks(
        [
            make_task(now, "a", kwargs={"url": "https://x", "depth": 5}),
            make_task(now, "b", kwargs={"url": "https://x", "depth": "5"}),
            make_task(now, "c", kwargs={"url": "https://y", "depth": 5}),
            make_task(now, "d", kwargs={"url": "https://x", "flag": True}),
        ],
        now=now,
    )

    def matched(*pairs: tuple[str, Any]) -> set[str]:
        criteria = BulkFilter(arguments=pairs)
        report = store.preview_bulk(BulkAction.DISABLE, criteria, now=now)
        found = {t.id: t.args[0] for t in store.search_tasks(limit=100)}
        assert report.matched == len(report.sample)
        return {found[i] for i in report.sample}

    assert matched(("url", "https://x")) == {"a", "b", "d"}
    assert matched(("url", "https://x"), ("depth", 5)) == {"a"}
    assert matched(("depth", "5")) == {"b"}
    assert matched(("depth", 5.0)) == {"a", "c"}
    assert matched(("flag", 1)) == set()  # true is not 1
    assert matched(("0", "c")) == {"c"}
    assert matched(("1", "c")) == set()  # no second positional argument
    done = store.apply_bulk(
        BulkAction.DELETE, BulkFilter(arguments=(("url", "https://y"),)), now=now
    )
    assert done.changed == 1 and set(statuses(store)) == {"a", "b", "d"}


def test_cancel_ends_dispatched_runs_and_names_them(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    store.create_tasks([make_task(now, n, offset=-H) for n in range(3)], now=now)
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    done = store.apply_bulk(BulkAction.CANCEL, BulkFilter(type="sleep"), now=now + H)
    assert (done.changed, done.revoke) == (3, (claimed.backend_id,))
    run = store.get_task_run(claimed.backend_id)
    assert run is not None and (run.status, run.ended) == (RunStatus.CANCELLED, now + H)
    assert set(statuses(store).values()) == {TaskStatus.CANCELLED}


def test_delete_holds_tasks_with_an_open_run(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    tasks = store.create_tasks([make_task(now, n, offset=-H) for n in range(3)], now=now)
    [claimed] = store.claim_ready_tasks("sleep", now=now, limit=1)
    preview = store.preview_bulk(BulkAction.DELETE, BulkFilter(everything=True), now=now)
    assert (preview.matched, preview.held) == (3, 1)
    done = store.apply_bulk(BulkAction.DELETE, BulkFilter(everything=True), now=now)
    assert (done.matched, done.changed, done.held) == (3, 2, 1)
    assert [t.id for t in store.search_tasks(limit=10)] == [claimed.task_id]
    assert store.get_task_run(claimed.backend_id) is not None
    # once cancelled (its run ended before it started), it goes
    store.apply_bulk(BulkAction.CANCEL, BulkFilter(ids=(claimed.task_id,)), now=now)
    done = store.apply_bulk(BulkAction.DELETE, BulkFilter(type="sleep"), now=now)
    assert (done.changed, done.held) == (1, 0)
    assert store.get_tasks([t.id for t in tasks]) == []


def test_enable_holds_a_task_identical_to_a_live_one(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    a, b = store.create_tasks([make_task(now, "same"), make_task(now, "alone")], now=now)
    store.disable_tasks([a.id, b.id], now=now)
    [twin] = store.create_tasks([make_task(now, "same")], now=now)
    assert twin.id not in (a.id, b.id)
    done = store.apply_bulk(BulkAction.ENABLE, BulkFilter(type="sleep"), now=now)
    assert (done.matched, done.changed, done.held) == (2, 1, 1)
    assert {t.id: t.status for t in store.get_tasks([a.id, b.id])} == {
        a.id: TaskStatus.DISABLED,
        b.id: TaskStatus.WAITING,
    }


def test_bad_filters_and_bounds_are_refused(
    store: Any, sleep_type: TaskType, now: datetime
) -> None:
    for values, field in [
        ({}, "filter"),
        ({"condition": ("BAD",)}, "condition"),
        ({"status": ("sleeping",)}, "status"),
        ({"arguments": (("not a name", 1),)}, "arguments"),
        ({"key_prefix": ""}, "key_prefix"),
        ({"ids": (0,)}, "ids"),
        ({"type": "no spaces"}, "type"),
    ]:
        with pytest.raises(InvalidInput) as info:
            BulkFilter(**values)
        assert info.value.field == field
    assert BulkFilter(everything=True).is_empty()
    [task] = store.create_tasks([make_task(now, 1)], now=now)
    for kwargs, field in [({"scan": 0}, "scan"), ({"batch_size": 10**6}, "batch_size")]:
        with pytest.raises(InvalidInput) as info:
            store.apply_bulk(BulkAction.DISABLE, BulkFilter(type="sleep"), now=now, **kwargs)
        assert info.value.field == field
    with pytest.raises(InvalidInput) as info:
        store.apply_bulk("explode", BulkFilter(type="sleep"), now=now)
    assert info.value.field == "action"
    assert store.get_tasks([task.id])[0].status is TaskStatus.WAITING
