"""schemathesis fuzzes every operation of the OpenAPI document against a
real server: inputs that fit the schema and inputs that break it, with a
read-write and a read-only token. No answer is a 5xx, every answer fits
its documented schema, every 4xx says what is wrong (``detail``; a 422
lists each problem with its location), and a request the schema allows is
accepted (``positive_data_acceptance``): refused only for what the store
holds (404, 409) or for what no schema can say (:data:`INEXPRESSIBLE`).
The read-only token's requests the schema allows are accepted where they
read and answered 403 with a detail where they write.

Examples per operation and mode: ``SWH_FUZZ_EXAMPLES`` (default 15, the
quick cut; 300 to search harder)."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import schemathesis
from api_server import READER, WRITER, Clock, serving
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import positive_data_acceptance

from swh_like_scheduler.api import (
    ApiSettings,
    parse_tokens,
    routes_bulk,
    routes_edit,
    routes_jobs,
    routes_observe,
    routes_tasks,
    routes_types,
)
from swh_like_scheduler.api.deps import WRITE
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

EXAMPLES = int(os.environ.get("SWH_FUZZ_EXAMPLES", "15"))
H = timedelta(hours=1)
#: the task type a generated task names: the schema cannot know which
#: types the store holds (an unknown one is a 422 naming ``type``)
STORED_TYPE = "sleep"

#: the schedule parameters: which apply depends on the task's kind
SCHEDULE = ("period", "cooldown", "cron", "cron_max_duration", "current_interval", "max_delay")
#: refusals (422) of requests the schema allows, for what a schema cannot
#: say: (operation, field) -> why
INEXPRESSIBLE: dict[tuple[str, str], str] = {
    ("POST /tasks", "tasks.tz"): "whether a zone name is known is the IANA database's to say",
    ("POST /tasks", "tasks.cron"): "a well-formed cron expression may never fire (0 0 31 2 *)",
    ("POST /tasks", "tasks.blackout_periods"): "windows are refused together: empty, or "
    "covering the whole day",
    ("POST /tasks", "tasks.args"): "no NUL in any text of any JSON value: not a finite schema",
    ("POST /tasks", "tasks.kwargs"): "no NUL in any text of any JSON value: not a finite schema",
    ("POST /tasks", "tasks.cooldown"): "shorter than the period: an order of two fields",
    ("POST /tasks", "tasks.max_expected_duration"): "at most max_allowed_duration: an order "
    "of two fields",
    ("POST /task-types", "min_interval"): "at most max_interval: an order of two fields",
    ("POST /task-types", "default_interval"): "between min_interval and max_interval",
    ("POST /task-types", "max_expected_duration"): "at most max_allowed_duration",
    ("PUT /jobs/{key}", "callback.data.url"): "where a callback may go is the server's setting "
    "(callback_allow)",
    ("PUT /jobs/{key}", "callback.data.queue"): "at most 255 bytes of UTF-8: a schema counts "
    "characters",
    ("PUT /jobs/{key}", "callback.data"): "no NUL in any text of the payload: not a finite schema",
    ("POST /rpc/{method}", "kwargs"): "which arguments a method needs is the method's, named "
    "in the path: the document describes one operation for all",
    **{
        (f"PATCH /tasks/{where}", name): why
        for where in ("{task_id}", "by-key/{key}")
        for name, why in (
            ("tz", "whether a zone name is known is the IANA database's to say"),
            ("cron", "a well-formed cron expression may never fire"),
            ("blackout_periods", "windows are refused together: empty, or the whole day"),
            ("args", "no NUL in any text of any JSON value: not a finite schema"),
            ("kwargs", "no NUL in any text of any JSON value: not a finite schema"),
            ("max_expected_duration", "at most the task's max_allowed_duration"),
            ("max_allowed_duration", "at least the task's max_expected_duration"),
            *((name, "which schedule parameters apply is the task's kind") for name in SCHEDULE),
        )
    },
    **{
        ("PATCH /task-types/{name}", name): "in order with the stored type's other intervals "
        "and durations"
        for name in (
            "min_interval",
            "default_interval",
            "max_interval",
            "max_expected_duration",
            "max_allowed_duration",
        )
    },
}


def _field(location: list[str | int]) -> str:
    """A 422's location without its part (body, query) and list indices."""
    return ".".join(str(step) for step in location[1:] if not isinstance(step, int))


def _inexpressible(label: str, response: httpx.Response) -> bool:
    """Whether ``response`` refuses only for what :data:`INEXPRESSIBLE` lists."""
    if response.status_code != 422:
        return False
    detail = response.json().get("detail")
    return isinstance(detail, list) and all(
        (label, _field(error.get("loc", []))) in INEXPRESSIBLE for error in detail
    )


def _problem(label: str, response: httpx.Response) -> str | None:
    """Why an answer breaks the API's promises, or ``None``."""
    if label == "GET /health" and response.json().get("status") in ("degraded", "unavailable"):
        return None  # its documented 503: the platform does not do its work (tasks overdue)
    if response.status_code >= 500:
        return f"{response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        detail = response.json().get("detail")
        if not detail:
            return f"{response.status_code} without a detail: {response.text[:500]}"
        if response.status_code == 422:
            for error in detail:
                if not (error.get("loc") and error.get("msg")):
                    return f"422 without a location and message: {error}"
    return None


def _stored_names(case: Any) -> None:
    """A positive case's names of stored things, made stored ones: a task's
    type, and a job's key in the body (it must be the path's)."""
    body = case.body if isinstance(case.body, dict) else {}
    if case.operation.label == "POST /tasks":
        for task in body.get("tasks", []):
            task["type"] = STORED_TYPE
    if case.operation.label == "PUT /jobs/{key}" and body.get("key") is not None:
        body["key"] = unquote(case.path_parameters["key"])


def _writing() -> set[str]:
    """The REST operations that need a read-write token (labels as
    schemathesis's; ``/rpc`` says per method)."""
    modules = (routes_bulk, routes_edit, routes_jobs, routes_observe, routes_tasks, routes_types)
    return {
        f"{method} {route.path}"
        for module in modules
        for route in module.router.routes
        if isinstance(route, APIRoute) and WRITE in route.dependencies
        for method in route.methods
    }


@pytest.mark.postgresql  # the stricter database: no NUL in text, bounded integers
@pytest.mark.timeout(300 + 6 * EXAMPLES)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation(pg_store: SQLAlchemyStore, clock: Clock, mode: GenerationMode) -> None:
    pg_store.create_task_type(TaskType(type=STORED_TYPE, backend_name="sleep", default_interval=H))
    for name in ("notify", "webhook"):  # the types of jobs' callbacks
        pg_store.create_task_type(TaskType(type=name, backend_name=name))
    tokens = parse_tokens([f"{WRITER}:rw", f"{READER}:ro"])
    app = create_app(pg_store, ApiSettings(tokens=tokens), clock=clock)
    schema = schemathesis.openapi.from_dict(app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    writing = _writing()
    assert len(writing) >= 12
    problems: dict[str, list[str]] = {}
    figures: Counter[str] = Counter()
    # a connection per request: on a kept-alive one each answer waited ~40 ms
    # (the test server's socket leaves Nagle on; a new connection ACKs at once)
    fresh = httpx.Limits(max_keepalive_connections=0)
    with serving(app) as url, httpx.Client(base_url=url, timeout=30, limits=fresh) as http:

        def send(case: Any, token: str) -> tuple[httpx.Response, dict[str, Any]]:
            kwargs = case.as_transport_kwargs(base_url=url)
            headers = kwargs["headers"]
            # a real token where the case has one (a negative case may
            # leave the header out on purpose: then it must be refused)
            if mode is GenerationMode.POSITIVE or "authorization" in map(str.lower, headers):
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                headers["Authorization"] = f"Bearer {token}"
            response = http.request(
                kwargs["method"],
                kwargs["url"],
                headers=headers,
                params=kwargs.get("params"),
                content=_content(kwargs),
            )
            return response, headers

        def verify(case: Any, token: str) -> str | None:
            response, headers = send(case, token)
            label, status = case.operation.label, response.status_code
            who = "reader" if token == READER else "writer"
            figures[f"{mode.value} {who} answers {status // 100}xx"] += 1
            problem = _problem(label, response)
            if who == "reader" and label in writing and status != 403:
                problem = problem or f"a read-only token's write got {status}, not 403"
            excluded = []
            if problem is None and status == 503:
                excluded.append(not_a_server_error)  # /health's documented report
            if mode is GenerationMode.POSITIVE and _inexpressible(label, response):
                fields = sorted({_field(e["loc"]) for e in response.json()["detail"]})
                figures[f"422 for what no schema says: {label} {', '.join(fields)}"] += 1
                excluded.append(positive_data_acceptance)
            try:  # schemathesis's checks: statuses, schemas, valid data accepted...
                case.validate_response(response, headers=headers, excluded_checks=excluded)
            except FailureGroup as failed:
                found = ", ".join(sorted({type(e).__name__ for e in failed.exceptions}))
                sent = case.body if case.body is not None else case.query
                problem = problem or f"{found} {status} {response.text[:400]} for {sent!r:.400}"
            return problem

        for operation in operations:

            @given(operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: Any) -> None:
                if mode is GenerationMode.POSITIVE:
                    _stored_names(case)
                for token in (WRITER, READER) if mode is GenerationMode.POSITIVE else (WRITER,):
                    problem = verify(case, token)
                    if problem:
                        problems.setdefault(case.operation.label, []).append(problem)

            try:
                check()
            except Unsatisfiable:  # nothing to break in an operation without inputs
                assert mode is GenerationMode.NEGATIVE, operation.label
    print(
        f"\n{len(operations)} operations, {EXAMPLES} examples each:", dict(sorted(figures.items()))
    )
    assert not problems, problems


def _content(kwargs: dict[str, Any]) -> bytes | None:
    if "json" in kwargs:
        return json.dumps(kwargs["json"]).encode()
    data = kwargs.get("data")
    return data.encode() if isinstance(data, str) else data
