"""The worker slots a runner keeps from long runs (pure rules), and the pool
sizes it reads from the workers' ``inspect stats`` replies."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swh_like_scheduler.dispatch.reserve import long_room, reserved_slots
from swh_like_scheduler.dispatch.routing import pool_size


@pytest.mark.parametrize(
    ("slots", "reserved"), [(0, 0), (1, 0), (2, 1), (3, 1), (4, 1), (5, 2), (8, 2), (18, 5)]
)
def test_a_quarter_of_the_slots_rounded_up_is_kept_and_never_all_of_them(
    slots: int, reserved: int
) -> None:
    assert reserved_slots(slots) == reserved


def test_nothing_is_kept_when_the_slots_are_unknown_single_or_no_short_task_is_due() -> None:
    assert long_room(None, 0, True) is None
    assert long_room(1, 0, True) is None
    assert long_room(8, 0, False) is None
    assert long_room(8, 7, False) is None


def test_long_runs_get_the_slots_left_less_those_in_flight() -> None:
    assert long_room(8, 0, True) == 6
    assert long_room(8, 5, True) == 1
    assert long_room(8, 6, True) == 0
    # more in flight than allowed (slots shrank, or the runs began before a
    # shorter task fell due): none more, never a negative room
    assert long_room(8, 8, True) == 0


@given(
    slots=st.integers(min_value=2, max_value=10_000),
    in_flight=st.integers(min_value=0, max_value=10_000),
    share=st.floats(min_value=0.0, max_value=1.0),
)
def test_long_runs_always_keep_a_slot_and_short_tasks_always_keep_one(
    slots: int, in_flight: int, share: float
) -> None:
    reserved = reserved_slots(slots, share)
    assert 1 <= reserved <= slots - 1
    room = long_room(slots, in_flight, True, share)
    assert room is not None
    assert room == max(0, slots - reserved - in_flight)
    if in_flight == 0:
        assert room >= 1  # long tasks are delayed, never starved


@pytest.mark.parametrize(
    ("reply", "size"),
    [
        ({"pool": {"max-concurrency": 4, "processes": [1, 2, 3, 4]}}, 4),
        ({"pool": {"max-concurrency": 1}}, 1),
        ({"pool": {}}, None),
        ({"pool": {"max-concurrency": 0}}, None),
        ({"pool": {"max-concurrency": True}}, None),
        ({"pool": {"max-concurrency": "4"}}, None),
        ({"pool": "prefork"}, None),
        ({}, None),
        (None, None),
        ("garbage", None),
    ],
)
def test_a_pool_size_is_read_only_from_a_well_formed_reply(reply: Any, size: int | None) -> None:
    assert pool_size(reply) == size
