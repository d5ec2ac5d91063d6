"""The policies' settings (visits/policy.py): the mix per visit type, the
cooldowns, and how a number of visits is split by weight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.visits.model import LastVisitStatus, OriginVisitStats
from swh_like_scheduler.visits.policy import (
    DEFAULT_MIX,
    Cooldowns,
    Hold,
    VisitPolicy,
    hold_of,
    shares,
    visit_settings,
)

LAG = VisitPolicy.ALREADY_VISITED_ORDER_BY_LAG
NEVER = VisitPolicy.NEVER_VISITED_OLDEST_UPDATE_FIRST
UNDATED = VisitPolicy.ORIGINS_WITHOUT_LAST_UPDATE


def test_shares_follow_the_weights_by_largest_remainder() -> None:
    assert shares(10, {LAG: 50, NEVER: 50}) == {LAG: 5, NEVER: 5}
    assert shares(1, {LAG: 50, NEVER: 50}) == {LAG: 1, NEVER: 0}  # a tie: the mix's order
    assert shares(10, {LAG: 1, NEVER: 2}) == {LAG: 3, NEVER: 7}
    assert shares(0, {LAG: 1}) == {LAG: 0}


@given(
    st.integers(0, 10_000),
    st.lists(st.integers(1, 1000), min_size=1, max_size=len(VisitPolicy)),
)
def test_shares_always_sum_to_the_count_and_stay_near_the_weights(
    count: int, weights: list[int]
) -> None:
    mix = dict(zip(list(VisitPolicy), weights, strict=False))
    given_out = shares(count, mix)
    assert sum(given_out.values()) == count
    total = sum(mix.values())
    for policy, weight in mix.items():
        assert abs(given_out[policy] - count * weight / total) < 1


def test_settings_read_the_mix_per_visit_type_and_the_cooldowns() -> None:
    settings = visit_settings(
        {
            "cooldown_failed": "3 days",
            "policies": {"git": {"deadline": 3, "origins_without_last_update": 1}},
        }
    )
    assert settings.cooldowns.failed == timedelta(days=3)
    assert settings.cooldowns.not_found == timedelta(days=31)  # the default
    assert settings.mix("git") == {VisitPolicy.DEADLINE: 3, UNDATED: 1}
    assert settings.mix("hg") == DEFAULT_MIX
    defaulted = visit_settings({"policies": {"default": {"deadline": 1}}})
    assert defaulted.mix("hg") == {VisitPolicy.DEADLINE: 1}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"cooldown_failed": "soon"}, "cooldown_failed"),
        ({"cooldown": "1h"}, "visits.cooldown"),
        ({"policies": {"git": {"newest_first": 1}}}, "visits.policies.git.newest_first"),
        ({"policies": {"git": {"deadline": 0}}}, "visits.policies.git.deadline"),
        ({"policies": {"git": {"deadline": True}}}, "visits.policies.git.deadline"),
        ({"policies": {"git": {}}}, "visits.policies.git"),
        (
            {"policies": {"git": {"first_visits_after_listing": 1}}},
            "visits.policies.git.first_visits_after_listing",
        ),
    ],
)
def test_bad_settings_are_refused_by_key(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        visit_settings(raw)
    assert refused.value.field == field


T0 = datetime(2026, 3, 1, tzinfo=UTC)
H = timedelta(hours=1)


def _stats(**fields: Any) -> OriginVisitStats:
    return OriginVisitStats(url="https://forge.example/a", visit_type="git", **fields)


@pytest.mark.parametrize(
    ("fields", "hold"),
    [
        ({}, None),
        ({"last_scheduled": T0}, (Hold.SENT, T0)),
        # a status since the send: whatever the visit said
        ({"last_scheduled": T0, "last_visit": T0 + H, "last_visit_status": "successful"}, None),
        (
            {"last_scheduled": T0, "last_visit": T0 + H, "last_visit_status": "failed"},
            (Hold.FAILED, T0 + H),
        ),
        ({"last_visit": T0, "last_visit_status": "not_found"}, (Hold.NOT_FOUND, T0)),
        # sent again after a failure: held by the send, from the send
        (
            {"last_scheduled": T0 + H, "last_visit": T0, "last_visit_status": "failed"},
            (Hold.SENT, T0 + H),
        ),
        # sent at the very date of the last visit: that visit was its answer
        ({"last_scheduled": T0, "last_visit": T0, "last_visit_status": "successful"}, None),
    ],
)
def test_hold_of_says_which_long_cooldown_and_since_when(
    fields: dict[str, Any], hold: tuple[Hold, datetime] | None
) -> None:
    if "last_visit_status" in fields:
        fields = {**fields, "last_visit_status": LastVisitStatus(fields["last_visit_status"])}
    assert hold_of(_stats(**fields)) == hold


def test_a_hold_lasts_the_cooldown_of_its_kind() -> None:
    cooldowns = Cooldowns(no_result=timedelta(days=2), failed=timedelta(days=3))
    assert Hold.SENT.length(cooldowns) == timedelta(days=2)
    assert Hold.FAILED.length(cooldowns) == timedelta(days=3)
    assert Hold.NOT_FOUND.length(cooldowns) == timedelta(days=31)
