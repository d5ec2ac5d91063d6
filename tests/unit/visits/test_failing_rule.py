"""The rule that disables a failing origin (visits/feedback.py, ``disables``)
and its setting (``[visits] disable_after_failures``), as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.visits.feedback import VisitStatusMessage, apply_status, disables
from swh_like_scheduler.visits.model import DISABLE_AFTER_FAILURES, OriginVisitStats
from swh_like_scheduler.visits.policy import visit_settings

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
URL = "https://forge.example/a"


def after(*statuses: str) -> OriginVisitStats:
    stats = OriginVisitStats(url=URL, visit_type="git")
    for n, state in enumerate(statuses):
        snapshot = f"{n + 1:040x}" if state == "full" else None
        message = VisitStatusMessage(URL, "git", T0 + timedelta(hours=n), state, snapshot)  # type: ignore[arg-type]
        moved = apply_status(stats, message)
        assert moved is not None
        stats = moved
    return stats


@pytest.mark.parametrize(
    ("statuses", "threshold", "expected"),
    [
        (("failed",) * 3, 3, True),
        (("failed",) * 2, 3, False),
        (("not_found",) * 3, 3, True),
        (("failed", "failed", "not_found"), 3, False),  # one outcome in a row
        (("failed", "full", "failed", "failed"), 3, False),
        (("full",) * 5, 3, False),
        (("failed",), 1, True),
        (("failed",) * 10, 0, False),  # 0: never
    ],
)
def test_disables_after_the_threshold_of_one_failing_outcome_in_a_row(
    statuses: tuple[str, ...], threshold: int, expected: bool
) -> None:
    assert disables(after(*statuses), threshold) is expected


def test_the_setting_defaults_to_the_references_three_and_is_checked() -> None:
    assert DISABLE_AFTER_FAILURES == 3
    assert visit_settings(None).disable_after_failures == 3
    assert visit_settings({"disable_after_failures": 0}).disable_after_failures == 0
    assert visit_settings({"disable_after_failures": 5}).disable_after_failures == 5
    for bad in (-1, True, "3", 2.5, 10**7):
        with pytest.raises(InvalidInput) as refused:
            visit_settings({"disable_after_failures": bad})
        assert refused.value.field == "visits.disable_after_failures"
