"""schemathesis fuzzes every operation of the OpenAPI document against a
real server: inputs that fit the schema and inputs that break it. No
answer is a 5xx, and every 4xx says what is wrong (``detail``; a 422 lists
each problem with its location).

Examples per operation and mode: ``SWH_FUZZ_EXAMPLES`` (default 15, the
quick cut; 300 to search harder)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

import httpx
import pytest
import schemathesis
from api_server import WRITER, Clock, serving
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from swh_like_scheduler.api import ApiSettings, create_app, parse_tokens
from swh_like_scheduler.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore

EXAMPLES = int(os.environ.get("SWH_FUZZ_EXAMPLES", "15"))
#: every check but one: a body the schema allows may still be refused for
#: what a schema cannot say (a cron expression that never fires, an unknown
#: time zone, a blank backend name): that is a 422 naming the field, not a
#: broken promise
EXCLUDED = [positive_data_acceptance]
H = timedelta(hours=1)


def _problem(response: Any) -> str | None:
    """Why an answer breaks the API's promises, or ``None``."""
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


@pytest.mark.postgresql  # the stricter database: no NUL in text, bounded integers
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation(pg_store: SQLAlchemyStore, clock: Clock, mode: GenerationMode) -> None:
    pg_store.create_task_type(TaskType(type="sleep", backend_name="sleep", default_interval=H))
    app = create_app(pg_store, ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"])), clock=clock)
    schema = schemathesis.openapi.from_dict(app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    problems: dict[str, list[str]] = {}
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        for operation in operations:

            @given(operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: Any) -> None:
                kwargs = case.as_transport_kwargs(base_url=url)
                # a real token where the case has one (a negative case may
                # leave the header out on purpose: then it must be refused)
                given = {k.lower() for k in kwargs["headers"]}
                if mode is GenerationMode.POSITIVE or "authorization" in given:
                    headers = {
                        k: v for k, v in kwargs["headers"].items() if k.lower() != "authorization"
                    }
                    kwargs["headers"] = {**headers, "Authorization": f"Bearer {WRITER}"}
                response = http.request(
                    kwargs["method"],
                    kwargs["url"],
                    headers=kwargs["headers"],
                    params=kwargs.get("params"),
                    content=_content(kwargs),
                )
                problem = _problem(response)
                try:  # schemathesis's checks: statuses, content types, schemas...
                    case.validate_response(
                        response, headers=kwargs["headers"], excluded_checks=EXCLUDED
                    )
                except Exception as failed:  # its failures come as an exception group
                    problem = problem or f"{response.status_code}: {failed}"[:800]
                if problem:
                    problems.setdefault(case.operation.label, []).append(problem)

            try:
                check()
            except Unsatisfiable:  # nothing to break in an operation without inputs
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert not problems, problems


def _content(kwargs: dict[str, Any]) -> bytes | None:
    if "json" in kwargs:
        return json.dumps(kwargs["json"]).encode()
    data = kwargs.get("data")
    return data.encode() if isinstance(data, str) else data
