"""The url the loader visits is the url the origin shows (issue 60): a
listed origin's loader arguments cannot set the scheduler's keys, its urls
take the schemes a loader visits (a setting), its loader arguments follow
a task's arguments' JSON rules; and the visit message puts the origin's
url over any stored argument of that name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.recurrent.scheduler import visit_message
from swh_like_scheduler.visits.model import (
    ORIGIN_SCHEMES,
    SCHEDULER_KEYS,
    ListedOrigin,
    origin_scheme,
    origin_schemes,
)
from swh_like_scheduler.visits.policy import visit_settings


def origin(**fields: Any) -> ListedOrigin:
    return ListedOrigin(
        **{"lister_id": "l1", "url": "https://gitlab.com/a/b", "visit_type": "git", **fields}
    )


@pytest.mark.parametrize("key", SCHEDULER_KEYS)
def test_loader_arguments_cannot_set_the_schedulers_keys(key: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        origin(extra_loader_arguments={"branch": "main", key: "file:///etc/shadow"})
    assert refused.value.field == f"extra_loader_arguments.{key}"
    assert "set by the scheduler" in refused.value.message


def test_a_stored_argument_named_url_does_not_reach_the_loader() -> None:
    """An origin recorded before the rule, read back as stored: the
    message's url is still the origin's."""
    stored = ListedOrigin.stored(
        {
            "lister_id": "l1",
            "url": "https://gitlab.com/a/b",
            "visit_type": "git",
            "extra_loader_arguments": {"url": "file:///etc/shadow", "branch": "main"},
        }
    )
    task_type = TaskType(
        type="load-git", backend_name="loader.git", default_interval=timedelta(days=1)
    )
    message = visit_message(task_type, stored)
    assert message.kwargs == {"url": "https://gitlab.com/a/b", "branch": "main"}


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"a": float("nan")}, "NaN and infinities"),
        ({"a": [1, float("inf")]}, "NaN and infinities"),
        ({"a": 2**63}, "outside signed 64 bits"),
        ({"a": -(2**63) - 1}, "outside signed 64 bits"),
        ({"a": "\ud800"}, "lone surrogate"),
        ({"\ud800": 1}, "lone surrogate"),
        ({"a": {1, 2}}, "not a JSON value"),
    ],
)
def test_loader_arguments_follow_the_json_rules(arguments: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        origin(extra_loader_arguments=arguments)
    assert refused.value.field == "extra_loader_arguments" and fragment in refused.value.message


def test_loader_arguments_nest_as_deep_as_a_tasks() -> None:
    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value

    origin(extra_loader_arguments={"a": nested(31)})
    with pytest.raises(InvalidInput, match="more than 32 levels"):
        origin(extra_loader_arguments={"a": nested(32)})
    assert origin(extra_loader_arguments={"a": 2**63 - 1}).extra_loader_arguments == {
        "a": 2**63 - 1
    }


@pytest.mark.parametrize(
    "url",
    ["file:///etc/shadow", "javascript://x", "data://x", "vbscript://x", "gopher://x", "about://x"],
)
def test_schemes_no_loader_visits_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        origin_scheme("url", url, ORIGIN_SCHEMES)
    assert refused.value.field == "url" and "origin_schemes" in refused.value.message


@pytest.mark.parametrize(
    "url",
    ["https://x/y", "HTTP://x/y", "git://x/y", "svn://x", "svn+ssh://x", "hg://x", "deb://D/p"],
)
def test_the_schemes_loaders_visit_pass(url: str) -> None:
    assert origin_scheme("url", url, ORIGIN_SCHEMES) == url


def test_the_schemes_are_a_setting() -> None:
    assert visit_settings(None).origin_schemes == ORIGIN_SCHEMES
    chosen = visit_settings({"origin_schemes": ["HTTPS", "file"]}).origin_schemes
    assert chosen == {"https", "file"}
    assert origin_scheme("url", "file:///srv/mirror", chosen)
    for bad in ("https", [], ["https", ""], ["https", "not a scheme"], [3]):
        with pytest.raises(InvalidInput) as refused:
            origin_schemes("visits.origin_schemes", bad)
        assert refused.value.field == "visits.origin_schemes"
