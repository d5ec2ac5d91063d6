"""Messages and reprs built here equal the ones Celery builds (no broker needed)."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Celery
from celery.utils.saferepr import saferepr
from hypothesis import given, settings
from hypothesis import strategies as st

from swh_like_scheduler.broker import Message
from swh_like_scheduler.broker.argsrepr import safe_repr
from swh_like_scheduler.broker.taskmsg import TaskMessageBuilder, reference_message
from swh_like_scheduler.domain.exceptions import InvalidInput

_APP = Celery("taskmsg-tests", broker="memory://", set_as_current=False)

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(values, st.sampled_from([None, 8, 40, 1024]), st.integers(0, 4))
def test_safe_repr_equals_celery_saferepr(value: Any, maxlen: int | None, levels: int) -> None:
    assert safe_repr(value, maxlen, levels) == saferepr(value, maxlen, maxlevels=levels)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(values, max_size=4).map(tuple),
    st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=4),
    st.text(min_size=1, max_size=20),
)
def test_built_messages_equal_celery_messages(
    args: tuple[Any, ...], kwargs: dict[str, Any], task_id: str
) -> None:
    builder = TaskMessageBuilder(_APP)
    message = Message(task_id, "some.task", "q", args, kwargs)
    assert builder.build(message) == reference_message(_APP, message)


def test_time_limits_are_carried_as_celery_carries_them() -> None:
    message = Message("id", "t", "q", (1,), {}, None, (70.0, 60.0))
    built = TaskMessageBuilder(_APP).build(message)
    assert built == reference_message(_APP, message)
    assert built[0]["timelimit"] == [70.0, 60.0]


def test_long_arguments_are_cut_as_celery_cuts_them() -> None:
    message = Message("id", "t", "q", ("x" * 5000, list(range(2000))), {"k": "y" * 3000})
    assert TaskMessageBuilder(_APP).build(message) == reference_message(_APP, message)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("task_id", {"task_id": ""}),
        ("task_name", {"task_name": None}),
        ("queue", {"queue": ""}),
        ("args", {"args": "abc"}),
        ("kwargs", {"kwargs": [1]}),
        ("priority", {"priority": 256}),
        ("priority", {"priority": True}),
        ("time_limits", {"time_limits": (10.0,)}),
        ("time_limits", {"time_limits": (10.0, -1.0)}),
        ("time_limits", {"time_limits": (10.0, 20.0)}),
        ("time_limits", {"time_limits": ("1h", None)}),
    ],
)
def test_invalid_messages_are_refused(field: str, kwargs: dict[str, Any]) -> None:
    values = {"task_id": "id", "task_name": "t", "queue": "q"} | kwargs
    with pytest.raises(InvalidInput) as info:
        Message(**values)
    assert info.value.field == field


def test_list_args_become_a_tuple() -> None:
    assert Message("id", "t", "q", [1, 2]).args == (1, 2)  # type: ignore[arg-type]
