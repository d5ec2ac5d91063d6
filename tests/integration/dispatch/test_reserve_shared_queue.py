"""The slots kept from long runs are counted per queue: two task types
routed to one Celery queue share its worker slots (issue 61)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from swh_like_scheduler.dispatch.reserve import Room, room_for_long
from swh_like_scheduler.dispatch.serve import by_queue
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore

T0 = datetime(2026, 3, 2, 2, 0, tzinfo=UTC)
M = timedelta(minutes=1)
H = timedelta(hours=1)
SLOTS = {"shared": 8, "alone": 8}


def _type(store: SQLAlchemyStore, name: str, queue: str) -> TaskType:
    made: TaskType = store.create_task_type(
        TaskType(type=name, backend_name=f"x.{name}", queue=queue)
    )
    return made


def _tasks(
    store: SQLAlchemyStore, kind: str, n: int, next_run: datetime, length: timedelta
) -> None:
    store.create_tasks(
        [
            Task(
                type=kind,
                args=(i,),
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=next_run,
                deadline=next_run,
                expected_duration=length,
            )
            for i in range(n)
        ],
        now=T0 - H,
    )


def test_long_runs_and_short_tasks_of_every_type_on_the_queue_are_counted(
    store: SQLAlchemyStore,
) -> None:
    """Worked by hand. The queue ``shared`` has 8 slots: 2 are kept
    (ceil(8 x 0.25)). ``dump`` (two-hour tasks) has 5 runs in flight and 4
    more ready; ``ping`` (tasks of a second) has one task due in 10 min, and
    no long run. For ``dump`` the short task due soon is the ping: room for
    8 - 2 - 5 = 1 more long run (counted per type, as before: no shorter
    dump due, no limit: ``None``). ``ping`` itself sees the same room, 1.
    ``other``, on its own queue ``alone`` with the same 8 slots and 5 long
    runs of its own, has no shorter task due on its queue: no limit (the
    ping on another queue does not count)."""
    dump, ping = _type(store, "dump", "shared"), _type(store, "ping", "shared")
    other = _type(store, "other", "alone")
    _tasks(store, "dump", 9, T0 - M, 2 * H)
    _tasks(store, "other", 5, T0 - M, 2 * H)
    _tasks(store, "ping", 1, T0 + 10 * M, timedelta(seconds=1))
    assert len(store.claim_ready_tasks("dump", now=T0, limit=5)) == 5
    assert len(store.claim_ready_tasks("other", now=T0, limit=5)) == 5
    sharing = by_queue(store.get_task_types())
    assert sorted(t.type for t in sharing["shared"]) == ["dump", "ping"]
    assert [t.type for t in sharing["alone"]] == ["other"]
    for task_type in (dump, ping):
        room = room_for_long(store, task_type, SLOTS.get, T0, sharing["shared"])
        # long this pass: what would hold a slot past the ping's deadline
        assert room == Room(1, 10 * M), task_type.type
    assert room_for_long(store, other, SLOTS.get, T0, sharing["alone"]).long_room is None
    # the ping dispatched and running still counts: it comes back
    later = T0 + 11 * M
    [claimed] = store.claim_ready_tasks("ping", now=later, limit=1)
    assert room_for_long(store, dump, SLOTS.get, later, sharing["shared"]).long_room == 1
    # with the ping gone (a one-shot done, say), nothing is kept
    assert store.delete_tasks([claimed.task_id]) == 1
    assert room_for_long(store, dump, SLOTS.get, later, sharing["shared"]).long_room is None
