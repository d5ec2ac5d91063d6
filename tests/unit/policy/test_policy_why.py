"""The words of "why": an error's headline, the retry outlook of a
recurring task through its cycles, the failures in a stale task's
condition."""

from __future__ import annotations

from policy_helpers import DAY, HOUR, at, make_task, make_type

from swh_like_scheduler.domain.model import TaskStatus
from swh_like_scheduler.domain.text import headline
from swh_like_scheduler.policy import Reason, explain, start_times
from swh_like_scheduler.policy.explain import retry_outlook


def test_headline_of_an_error() -> None:
    assert headline(None) == "" and headline(" \n ") == ""
    assert headline("ValueError: bad") == "ValueError: bad"
    assert headline("first\nsecond") == "first \u2026"
    traceback = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'url'\n"
    assert headline(traceback) == "KeyError: 'url' \u2026"
    assert headline("x" * 100, 10) == "x" * 9 + "\u2026"
    assert headline("abc\ndef", 5) == "abc \u2026"
    assert headline("abcd\ndef", 5) == "abcd\u2026"


def test_a_recurring_task_goes_through_cycles_of_retries() -> None:
    """num_retries 2: failures 1 and 2 are followed by retries, failure 3
    sends the task back to its schedule, failure 4 starts a new cycle."""
    task_type = make_type(num_retries=2)

    def outlook(failures: int):  # type: ignore[no-untyped-def]
        task = make_task(
            period=DAY,
            last_good_start_at=at(-30),
            last_good_end_at=at(-29),
            last_start_at=at(-1),
            last_end_at=at(0),
            failure_count=failures,
        )
        return retry_outlook(task, task_type, start_times(task, task_type, at(0)))

    healthy = outlook(0)
    assert healthy.state == "none" and healthy.next_attempt is None
    assert (
        healthy.detail
        == "no failure pending; up to 2 retries after a failure, the first 5m after it"
    )
    first, second, third, fourth = (outlook(n) for n in (1, 2, 3, 4))
    assert (first.state, first.retry, first.retries_left) == ("retrying", 1, 1)
    assert first.detail.endswith("; 1 more retry if it fails")
    assert second.detail.endswith("; if it fails, back to its normal schedule")
    assert third.state == "exhausted" and third.next_attempt == at(-1) + DAY
    assert third.detail == (
        "the 2 retries of this cycle were used up (3 consecutive failures); back to the "
        f"normal schedule, next run from {(at(-1) + DAY).isoformat()}; a new failure starts "
        "a new cycle of 2 retries"
    )
    assert (fourth.state, fourth.retry) == ("retrying", 1)


def test_a_stale_task_says_its_runs_since_the_last_good_one_failed() -> None:
    task = make_task(
        period=DAY,
        last_good_start_at=at(-50),
        last_good_end_at=at(-49),
        last_start_at=at(-2),
        last_end_at=at(-2),
        failure_count=3,
    )
    report = explain(task, make_type(), at(0)).condition
    assert report.reason is Reason.STALE
    assert report.detail.endswith("The 3 runs since the last good one failed.")
    disabled = explain(task.updated(status=TaskStatus.DISABLED), make_type(), at(0))
    assert disabled.condition.reason is Reason.GAVE_UP
    assert disabled.retry is not None and disabled.retry.state == "gave_up"
    assert "a permanent failure" in disabled.retry.detail
    assert not [line for line in disabled.lines() if line.startswith("Last failure:")]
    never = make_task(period=HOUR, next_run=at(-5), created_at=at(-6), failure_count=2,
                      last_start_at=at(-3), last_end_at=at(-3))  # fmt: skip
    text = explain(never, make_type(), at(0)).condition.detail
    assert text.startswith("The task never ran successfully: the last 2 runs failed (the latest")
