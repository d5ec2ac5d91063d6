"""Contract: which ready tasks a runner pass left behind (so that it records
no room for their class), and the instants room is recorded at."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import Priority, ScheduleKind, Task, TaskType

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
H = timedelta(hours=1)


def oneshot(store: Any, n: int, *, written: datetime, **fields: Any) -> Task:
    values: dict[str, Any] = {"next_run": T0 - H, "deadline": T0 - H, "max_delay": S}
    values.update(fields)
    [task] = store.create_tasks(
        [Task(type="room", args=(n,), schedule_kind=ScheduleKind.ONESHOT, **values)], now=written
    )
    return task


@pytest.fixture
def room_type(store: Any) -> TaskType:
    made: TaskType = store.create_task_type(TaskType(type="room", backend_name="x.room"))
    return made


def test_nothing_is_left_behind_when_no_task_is_ready(store: Any, room_type: TaskType) -> None:
    assert store.ready_left_behind("room", at=T0) == []
    oneshot(store, 1, written=T0 - H, next_run=T0 + S, deadline=T0 + S)  # not ready yet
    assert store.ready_left_behind("room", at=T0) == []
    assert store.ready_left_behind("unknown", at=T0) == []


def test_a_ready_task_written_before_the_pass_began_is_left_behind_in_its_class(
    store: Any, room_type: TaskType
) -> None:
    oneshot(store, 1, written=T0 - H, priority=Priority.LOW)
    assert store.ready_left_behind("room", at=T0) == [Priority.LOW]
    assert store.ready_left_behind("room", at=T0, priorities=[Priority.HIGH]) == []
    oneshot(store, 2, written=T0 - H, priority=Priority.HIGH)
    assert store.ready_left_behind("room", at=T0) == [Priority.HIGH, Priority.LOW]
    served = [Priority.NORMAL, Priority.HIGH]
    assert store.ready_left_behind("room", at=T0, priorities=served) == [Priority.HIGH]
    # the pass began before they were written (created): it may never have seen them
    assert store.ready_left_behind("room", at=T0 - 2 * H) == []


def test_tasks_written_after_the_pass_began_or_claimed_are_not_left_behind(
    store: Any, room_type: TaskType
) -> None:
    late = oneshot(store, 1, written=T0 + S)  # created while the pass ran
    assert store.ready_left_behind("room", at=T0) == []
    assert store.ready_left_behind("room", at=T0 + 2 * S) == [Priority.NORMAL]
    [claimed] = store.claim_ready_tasks("room", now=T0 + 2 * S, limit=10)
    assert claimed.task_id == late.id
    assert store.ready_left_behind("room", at=T0 + 2 * S) == []


def test_a_task_no_live_node_may_run_is_not_left_behind(store: Any, room_type: TaskType) -> None:
    oneshot(store, 1, written=T0 - H, dont_run_on_nodes=("node-x",))
    assert store.ready_left_behind("room", at=T0) == []  # live nodes unknown
    assert store.ready_left_behind("room", at=T0, nodes=["node-x"]) == []
    assert store.ready_left_behind("room", at=T0, nodes=["node-x", "node-y"]) == [Priority.NORMAL]


#: the store names the field; the remote client's wire refuses a naive instant first
NAIVE = r"^at: .* has no time zone|an instant needs a UTC offset"


def test_instants_without_a_time_zone_are_refused(store: Any, room_type: TaskType) -> None:
    naive = datetime(2026, 3, 2, 12, 0)
    with pytest.raises(InvalidInput, match=NAIVE):
        store.ready_left_behind("room", at=naive)
    with pytest.raises(InvalidInput, match=NAIVE):
        store.record_room("room", at=naive)
