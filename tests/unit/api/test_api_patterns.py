"""The patterns the OpenAPI document shows for text fields promise only
what the server accepts: every text a pattern matches (as a generator such
as schemathesis draws it, Python's regex rules) passes the validation the
command line and the importer share. And what they leave out is refused by
the API with a message naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from swh_like_scheduler.api.routes_bulk import ARGUMENT, BulkIn
from swh_like_scheduler.api.routes_jobs import HEADER_NAME, HEADER_VALUE, QUEUE, URL, JobIn
from swh_like_scheduler.api.schemas import (
    CRON,
    INSTANT,
    MAX_ID,
    ZONED_INSTANT,
    Identifier,
    TaskIn,
    TaskTypeIn,
    TimeOfDay,
    duration_pattern,
    ecma,
)
from swh_like_scheduler.domain import validation
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.intake.builders import task_from_input
from swh_like_scheduler.intake.jobs import Callback, job_from_input
from swh_like_scheduler.store.values import BulkFilter

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SEARCH = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def _drawn(pattern: str) -> st.SearchStrategy[str]:
    """Texts ``pattern`` matches as JSON Schema reads it (as schemathesis draws them)."""
    return st.from_regex(ecma(pattern))


def _pattern(annotated: object) -> str:
    """The pattern an ``Annotated[str, Matching(...)]`` type shows."""
    return next(m.pattern for m in annotated.__metadata__ if hasattr(m, "pattern"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("positive", [False, True])
@SEARCH
@given(data=st.data())
def test_every_duration_text_of_the_pattern_is_a_duration(
    positive: bool, data: st.DataObject
) -> None:
    text = data.draw(_drawn(duration_pattern(positive)))
    parsed = validation.parse_duration("period", text, positive=positive)
    assert parsed <= validation.MAX_DURATION
    assert parsed > timedelta(0) or not positive


@SEARCH
@given(text=_drawn(INSTANT), zone=st.sampled_from(["UTC", "Pacific/Kiritimati", "Etc/GMT+12"]))
def test_every_instant_of_the_pattern_is_accepted_in_any_zone(text: str, zone: str) -> None:
    validation.parse_datetime("next_run", text, zone)


@SEARCH
@given(text=_drawn(ZONED_INSTANT))
def test_every_job_instant_of_the_pattern_is_accepted(text: str) -> None:
    callback = {"type": "rabbitmq", "data": {"queue": "q"}}
    job = job_from_input("k", {"schedules": [text], "callback": callback})
    assert len(job.schedules) == 1


@SEARCH
@given(text=_drawn(CRON))
def test_every_cron_expression_of_the_pattern_is_valid(text: str) -> None:
    validation.cron_expression("cron", text)


@SEARCH
@given(text=_drawn(_pattern(TimeOfDay)))
def test_every_time_of_day_of_the_pattern_is_one(text: str) -> None:
    validation.time_of_day("blackout_periods", text)


@SEARCH
@given(text=_drawn(_pattern(Identifier)))
def test_every_name_of_the_pattern_is_a_valid_name(text: str) -> None:
    validation.identifier("type", text)


def _accepted(kind: str, data: dict[str, object]) -> bool:
    try:
        Callback(kind, data)
    except InvalidInput:
        return False
    return True


@SEARCH
@given(text=_drawn(QUEUE) | st.text(max_size=8) | st.from_regex(r"\A\s*(amq\.?)?.?\Z"))
def test_a_queue_matches_its_pattern_if_and_only_if_the_server_takes_it(text: str) -> None:
    # the server checks the queue itself: the pattern must say exactly that
    # (but the 255 bytes of UTF-8, which a schema cannot: it counts characters)
    if len(text.encode()) <= 255:
        assert _accepted("rabbitmq", {"queue": text}) == bool(ecma(QUEUE).search(text))


@SEARCH
@given(
    name=_drawn(HEADER_NAME) | st.text(max_size=4),
    value=_drawn(HEADER_VALUE) | st.text(max_size=4),
    url=_drawn(URL) | st.sampled_from(["http:/x", "ftp://x", "https://", " https://x"]),
)
def test_headers_and_urls_match_their_patterns_if_and_only_if_the_server_takes_them(
    name: str, value: str, url: str
) -> None:
    matches = all(ecma(p).search(t) for p, t in ((HEADER_NAME, name), (HEADER_VALUE, value)))
    headers = {"url": "https://example.org/", "headers": {name: value}}
    assert _accepted("http", headers) == bool(matches)
    assert _accepted("http", {"url": url}) == bool(ecma(URL).search(url))


@SEARCH
@given(name=_drawn(ARGUMENT))
def test_every_argument_name_of_the_pattern_is_one(name: str) -> None:
    BulkFilter(arguments=((name, 1),))


def _task(**fields: object) -> None:
    sleep = TaskType(type="sleep", backend_name="sleep", default_interval=timedelta(hours=1))
    body = TaskIn.model_validate({"type": "sleep", **fields}).given()
    body.pop("type")
    task_from_input(body, sleep, now=NOW)


@pytest.mark.parametrize(
    "fields",
    [
        {"period": "1h30m"},
        {"period": "PT5M", "cooldown": 0},
        {"period": 90, "cooldown": "30 s"},
        {"kind": "oneshot", "max_delay": "2 days", "next_run": "2026-03-02T14:00"},
        {"cron": "*/15 8-18 * * mon-fri", "tz": "Europe/Paris"},
        {"interval": "3 weeks", "blackout_periods": [{"start": "23:00", "end": "01:00:30"}]},
    ],
)
def test_documented_forms_are_accepted(fields: dict[str, object]) -> None:
    _task(**fields)


@pytest.mark.parametrize(
    ("fields", "where", "message"),
    [
        ({"period": "1.5 hours"}, ["period"], "is not a duration"),
        ({"period": "0 min"}, ["period"], "longer than zero"),
        ({"period": True}, ["period"], "must be seconds"),
        ({"next_run": "2026-02-30T10:00Z"}, ["next_run"], "is not an ISO 8601 date-time"),
        ({"cron": "0 3 * *"}, ["cron"], "5 fields"),
        ({"key": "a\x00b"}, ["key"], "NUL"),
        ({"type": "no spaces"}, ["type"], "is not a valid name"),
    ],
)
def test_what_the_patterns_leave_out_is_refused_naming_the_field(
    fields: dict[str, object], where: list[str], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        TaskIn.model_validate({"type": "sleep", **fields})
    (error,) = caught.value.errors()
    assert list(error["loc"]) == where
    assert message in error["msg"]


def test_whole_numbers_are_integers_and_bounds_hold() -> None:
    assert BulkIn.model_validate({"ids": [5.0], "scan": 10.0}).given() == {"ids": [5], "scan": 10}
    with pytest.raises(ValidationError, match="valid integer"):
        BulkIn.model_validate({"ids": [5.5]})
    with pytest.raises(ValidationError, match="less than or equal"):
        BulkIn.model_validate({"ids": [MAX_ID + 1]})
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        TaskTypeIn.model_validate({"type": "t", "backend_name": "b", "num_retries": -1})


def test_a_job_callback_is_one_of_two_shapes() -> None:
    callback = JobIn.model_json_schema()["$defs"]["CallbackIn"]
    shapes = {case["properties"]["type"]["const"]: case for case in callback["oneOf"]}
    assert shapes["http"]["properties"]["data"]["required"] == ["url"]
    assert shapes["rabbitmq"]["properties"]["data"]["required"] == ["queue"]
    body = {"schedules": ["2026-03-02T10:00:00Z"], "callback": {"type": "http", "data": {}}}
    with pytest.raises(InvalidInput) as caught:
        job_from_input("k", JobIn.model_validate(body).given())
    assert caught.value.field == "callback.data.url"


def test_the_schedule_rules_say_which_parameters_each_kind_takes() -> None:
    cases = TaskIn.model_json_schema()["anyOf"]
    assert len(cases) == 8
    explicit = {c["properties"]["kind"].get("const"): c for c in cases}
    assert explicit["periodic"]["required"] == ["kind", "period"]
    assert explicit["periodic"]["properties"]["interval"] == {"type": "null"}
    assert "cooldown" not in explicit["periodic"]["properties"]
