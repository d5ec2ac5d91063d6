"""runner.room: a pass records room at the instant it began, only for the
classes in which it left no ready task behind (a stand-in store)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from swh_like_scheduler.dispatch.room import record_room
from swh_like_scheduler.domain.exceptions import StoreUnavailable
from swh_like_scheduler.domain.model import Priority, TaskType
from swh_like_scheduler.store import SchedulerStore

BEGAN = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
TYPE = TaskType(type="t", backend_name="x.t")
HIGH, NORMAL, LOW = Priority.HIGH, Priority.NORMAL, Priority.LOW


class Store:
    """What ``record_room`` asks of a store, answered from ``left``."""

    def __init__(self, left: Sequence[Priority], fail: bool = False) -> None:
        self.left = list(left)
        self.fail = fail
        self.asked: list[dict[str, Any]] = []
        self.recorded: list[tuple[str, datetime, list[Priority]]] = []

    def ready_left_behind(self, task_type: str, **kwargs: Any) -> list[Priority]:
        if self.fail:
            raise StoreUnavailable("the database is away")
        self.asked.append({"task_type": task_type, **kwargs})
        return [p for p in self.left if p in kwargs["priorities"]]

    def record_room(self, task_type: str, *, at: datetime, priorities: list[Priority]) -> None:
        self.recorded.append((task_type, at, list(priorities)))


def run(store: Store, priorities: Sequence[Priority] | None, nodes: Any = None) -> list[Priority]:
    return record_room(
        cast(SchedulerStore, store), TYPE, began=BEGAN, priorities=priorities, nodes=nodes
    )


def test_room_is_recorded_at_the_start_for_every_class_when_nothing_is_left() -> None:
    store = Store([])
    assert run(store, None, nodes=["node-a"]) == [HIGH, NORMAL, LOW]
    assert store.asked == [
        {"task_type": "t", "at": BEGAN, "priorities": [HIGH, NORMAL, LOW], "nodes": ["node-a"]}
    ]
    assert store.recorded == [("t", BEGAN, [HIGH, NORMAL, LOW])]


def test_a_class_with_a_task_left_behind_gets_no_room() -> None:
    store = Store([HIGH])
    assert run(store, None) == [NORMAL, LOW]
    assert store.recorded == [("t", BEGAN, [NORMAL, LOW])]


def test_nothing_is_recorded_when_every_served_class_left_one_behind() -> None:
    store = Store([HIGH, LOW])
    assert run(store, [LOW, HIGH]) == []
    assert store.asked[0]["priorities"] == [HIGH, LOW]  # dispatch order
    assert store.recorded == []  # (no classes would have meant every class)


def test_no_classes_given_serve_every_class_as_the_claims_do() -> None:
    store = Store([NORMAL])
    assert run(store, []) == [HIGH, LOW]
    assert store.recorded == [("t", BEGAN, [HIGH, LOW])]


def test_a_store_that_cannot_answer_records_nothing_and_the_pass_goes_on() -> None:
    store = Store([], fail=True)
    assert run(store, None) == []
    assert store.recorded == []


def test_a_pass_that_could_leave_nothing_behind_records_every_class_without_asking() -> None:
    store = Store([HIGH])  # (the store would say HIGH: it is not asked)
    roomy = record_room(
        cast(SchedulerStore, store), TYPE, began=BEGAN, priorities=None, nodes=None, may_leave=False
    )
    assert roomy == [HIGH, NORMAL, LOW]
    assert store.asked == []
    assert store.recorded == [("t", BEGAN, [HIGH, NORMAL, LOW])]
