"""The monitor's steal settings published for the workers, and a task's
fencing token read back (self-fencing, DESIGN.md §5 invariant 7): on every
store, local and remote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from swh_like_scheduler.domain.fencing import LeaseTerms
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType

S = timedelta(seconds=1)


def test_no_terms_until_a_monitor_publishes_them(store: Any) -> None:
    assert store.lease_terms() is None


def test_published_terms_are_read_back_and_rewritten_only_when_they_change(
    store: Any,
) -> None:
    first = store.publish_lease_terms(ping_timeout=30 * S, grace=30 * S, holder="m1")
    assert isinstance(first, LeaseTerms)
    assert (first.ping_timeout, first.grace, first.holder) == (30 * S, 30 * S, "m1")
    assert first.published_at is not None and first.published_at.tzinfo is not None
    assert first.bound == 22.5  # three quarters of the ping timeout
    assert store.lease_terms() == first
    # the same settings again: nothing written (the instant stays)
    assert store.publish_lease_terms(ping_timeout=30 * S, grace=30 * S, holder="m1") == first
    # another monitor, other settings: replaced
    second = store.publish_lease_terms(ping_timeout=2.5 * S, grace=1.5 * S, holder="m2")
    assert (second.ping_timeout, second.grace, second.holder) == (2.5 * S, 1.5 * S, "m2")
    assert second.published_at is not None and second.published_at >= first.published_at
    assert store.lease_terms() == second


def test_the_fencing_token_is_read_by_task(store: Any) -> None:
    store.create_task_type(
        TaskType(type="fenced", backend_name="tests.fenced", default_interval=3600 * S)
    )
    now = datetime.now(UTC) - timedelta(minutes=1)
    [task] = store.create_tasks(
        [
            Task(
                type="fenced",
                next_run=now,
                deadline=now + S,
                schedule_kind=ScheduleKind.ONESHOT,
            )
        ],
        now=now,
    )
    assert store.current_fence(task.id) == 0
    run = store.schedule_task_run(task.id, now=now)
    grant = store.guard_start(run.backend_id, node="n", name="w", tag="t")
    assert grant.granted and store.current_fence(task.id) == grant.fence == 1
    assert store.current_fence(task.id + 1000) is None
