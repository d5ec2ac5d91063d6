"""``Task.updated``: the policy's changes are checked, the rest carried over."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskStatus

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def task() -> Task:
    return Task(
        type="crawl",
        args=(1, "x"),
        kwargs={"url": "https://example.org"},
        schedule_kind=ScheduleKind.ADAPTIVE,
        current_interval=timedelta(hours=2),
        next_run=T0,
        deadline=T0 + timedelta(hours=2),
    )


def test_the_policys_changes_keep_the_arguments_digest_and_are_checked() -> None:
    before = task()
    after = before.updated(
        next_run=T0 + timedelta(hours=1), status="scheduled", failure_count=1, retries_left=2
    )
    assert after.status is TaskStatus.SCHEDULED and after.failure_count == 1
    assert after.arguments_hash == before.arguments_hash and after.args == before.args
    assert before.next_run == T0  # the original is untouched
    rebuilt = Task(**{**_init(before), **{k: getattr(after, k) for k in _init(after)}})
    assert after == rebuilt and after.arguments_hash == rebuilt.arguments_hash
    with pytest.raises(InvalidInput, match="next_run"):
        before.updated(next_run=datetime(2026, 3, 2))  # naive
    with pytest.raises(InvalidInput, match="retries_left"):
        before.updated(retries_left=-1)
    with pytest.raises(InvalidInput, match="current_interval"):
        before.updated(current_interval=timedelta(0))
    with pytest.raises(InvalidInput, match="period"):
        before.updated(schedule_kind=ScheduleKind.PERIODIC)  # a periodic task needs one
    with pytest.raises(TypeError, match="colour"):
        before.updated(colour="red")


def test_changing_the_arguments_hashes_them_again() -> None:
    before = task()
    after = before.updated(args=(2,))
    assert after.arguments_hash != before.arguments_hash
    assert after.arguments_hash == Task(**{**_init(before), "args": (2,)}).arguments_hash


def _init(t: Task) -> dict[str, object]:
    return {k: v for k, v in t.__dict__.items() if not k.startswith("_")}


@pytest.mark.parametrize(
    "change",
    [
        {"last_end_at": datetime(2026, 3, 2)},  # naive
        {"max_expected_duration": timedelta(0)},  # must be longer than zero
        {"cooldown": timedelta(seconds=-1)},  # negative
        {"catch_up_grace": timedelta(0)},
        {"catch_up": "sometimes"},
        {"status": "sleeping"},
        {"priority": "urgentest"},
        {"retries_left": -2},
        {"period": timedelta(hours=1)},  # not a parameter of adaptive tasks
        {"current_interval": None},  # required by adaptive tasks
    ],
)
def test_a_change_is_refused_as_at_creation(change: dict[str, object]) -> None:
    before = task()
    with pytest.raises((InvalidInput, ValueError)):
        Task(**{**_init(before), **change})  # type: ignore[arg-type]
    with pytest.raises((InvalidInput, ValueError)):
        before.updated(**change)


def test_changed_values_are_converted_as_at_creation() -> None:
    after = task().updated(status="disabled", priority="high", catch_up="skip")
    assert after.status is TaskStatus.DISABLED
    assert after == Task(**{**_init(task()), **_init(after)})  # type: ignore[arg-type]
    assert type(after.priority).__name__ == "Priority" and type(after.catch_up).__name__ == (
        "CatchUp"
    )
