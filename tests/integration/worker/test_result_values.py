"""What the ``task-result`` event carries, and a direct call (no worker)."""

from __future__ import annotations

import ast
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from celery import Celery
from celery.utils.saferepr import saferepr
from hypothesis import given, settings
from hypothesis import strategies as st

from swh_like_scheduler.domain.model import RunStatus
from swh_like_scheduler.listener.events import parse_event
from swh_like_scheduler.worker import RESULT_EVENT, ResultEventTask, event_result
from swh_like_scheduler.worker.result_event import carried_whole


def status_seen_by_the_listener(carried: Any) -> RunStatus | None:
    event = {"type": RESULT_EVENT, "uuid": "x", "timestamp": 1.0, "result": carried}
    parsed = parse_event(json.loads(json.dumps(event)))  # as it crosses the broker
    assert parsed is not None
    return parsed.status


@pytest.mark.parametrize(
    ("value", "status"),
    [
        ({"status": "uneventful", "n": 1}, RunStatus.UNEVENTFUL),
        ({"pad": "x" * 5000, "status": "uneventful"}, RunStatus.UNEVENTFUL),
        ({"status": "permfailed", "at": datetime(2026, 1, 1, tzinfo=UTC)}, RunStatus.PERMFAILED),
        ({"status": "bogus", "pad": "x" * 5000}, RunStatus.FAILED),  # a worker bug, named
        (set(), RunStatus.UNEVENTFUL),
        ({b"bytes"}, RunStatus.EVENTFUL),
        (["x"] * 5000, RunStatus.EVENTFUL),
        (None, RunStatus.UNEVENTFUL),
        (0, RunStatus.UNEVENTFUL),
        ("done", RunStatus.EVENTFUL),
    ],
)
def test_the_carried_value_keeps_the_status(value: Any, status: RunStatus) -> None:
    carried = event_result(value, 1024)
    assert len(json.dumps(carried)) <= 2100
    assert status_seen_by_the_listener(carried) is status


def test_small_json_values_are_sent_as_they_are() -> None:
    value = {"status": "eventful", "pages": [1, 2, 3]}
    assert event_result(value, 1024) is value
    assert event_result({"pad": "x" * 2000, "status": "eventful"}, 1024) == {
        "status": "eventful",
        "truncated": True,
    }
    carried = event_result({"status": "eventful", "at": datetime(2026, 1, 1, tzinfo=UTC)}, 1024)
    assert carried["status"] == "eventful" and "datetime" in carried["repr"]


def test_called_directly_it_just_runs() -> None:
    app = Celery("direct", set_as_current=False)

    @app.task(base=ResultEventTask, bind=True, name="tests.direct", shared=False)
    def direct(self: ResultEventTask, n: int) -> dict[str, Any]:
        return {"status": "eventful", "n": n, "called_directly": self.request.called_directly}

    assert direct(3) == {"status": "eventful", "n": 3, "called_directly": True}


@pytest.mark.parametrize(
    ("value", "whole"),
    [
        ({"status": "eventful"}, True),
        ({"status": "uneventful", "n": 3, "ok": True, "none": None}, True),
        ("done", True),
        ({"pad": "x" * 3000, "status": "uneventful"}, False),  # cut at the limit
        ({"when": __import__("datetime").date(2026, 1, 1)}, False),  # not a literal
        ({"nan": float("nan")}, False),  # does not read back equal
    ],
)
def test_a_second_event_only_when_task_succeeded_cannot_carry_the_value(
    value: Any, whole: bool
) -> None:
    assert carried_whole(value, 1024) is whole


scalars = st.one_of(st.text(max_size=700), st.integers(), st.booleans(), st.none())


# saferepr leaves a backslash as it is: reading "'\\8'" back is an invalid escape
@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
@settings(max_examples=300, deadline=None)
@given(st.one_of(scalars, st.dictionaries(st.text(max_size=40), scalars, max_size=6)))
def test_the_quick_answer_for_plain_values_is_the_long_one(value: Any) -> None:
    """Text, numbers, booleans and mappings of them are answered without
    Celery's saferepr: the answer is the one saferepr and literal_eval give."""
    text = saferepr(value, maxlen=1024)
    try:
        expected = len(text) < 1024 and ast.literal_eval(text) == value
    except (ValueError, SyntaxError):
        expected = False
    assert carried_whole(value, 1024) is expected
