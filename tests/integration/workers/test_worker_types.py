"""The example task types declare what the store accepts, and register their
Celery tasks without building an app at import time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind
from swh_like_scheduler.intake.builders import task_from_input, task_type_from_input
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_workers import notify, webcheck, webhook

NOW = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
REGISTRATIONS: dict[str, Callable[[], dict[str, Any]]] = {
    "check-page": webcheck.register,
    "notify": notify.register,
    "webhook": webhook.register,
}


@pytest.mark.parametrize("name", sorted(REGISTRATIONS))
def test_the_declared_type_is_accepted_and_its_task_registered(name: str) -> None:
    registration = REGISTRATIONS[name]()
    (spec,) = registration["task_types"]
    task_type = task_type_from_input(spec)
    assert task_type.type == name
    app = make_app(config_module=None, broker_url="memory://", load_workers=False)
    for module in registration["task_modules"]:
        __import__(module)
    app.finalize()
    assert task_type.backend_name in app.tasks


def test_a_page_check_is_adaptive_within_its_bounds() -> None:
    task_type = task_type_from_input(webcheck.register()["task_types"][0])
    task = task_from_input({"kwargs": {"url": "https://example.org/"}}, task_type, now=NOW)
    assert task.schedule_kind is ScheduleKind.ADAPTIVE
    assert task.current_interval == timedelta(days=1)
    # the retries fit in the shortest interval, so a 1-hour task is accepted
    task_from_input({"kwargs": {"url": "https://e.org/"}, "interval": "1 hour"}, task_type, now=NOW)
    with pytest.raises(InvalidInput) as error:
        task_from_input({"interval": "10 min"}, task_type, now=NOW)
    assert error.value.field == "current_interval"


def test_reminders_are_one_shot_tasks_at_iso_instants() -> None:
    task_type = task_type_from_input(notify.register()["task_types"][0])
    kwargs = {"queue": "training.invitations", "payload": {"id": "4f1c"}}
    instants = ["2026-03-01T10:30:00Z", "2026-03-01T11:00:00+01:00"]
    tasks = [
        task_from_input({"policy": "oneshot", "next_run": at, "kwargs": kwargs}, task_type, now=NOW)
        for at in instants
    ]
    assert [t.schedule_kind for t in tasks] == [ScheduleKind.ONESHOT] * 2
    assert [t.next_run for t in tasks] == [
        datetime(2026, 3, 1, 10, 30, tzinfo=UTC),
        datetime(2026, 3, 1, 10, 0, tzinfo=UTC),
    ]


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"queue": "", "payload": {}}, "queue must be"),
        ({"queue": "amq.direct", "payload": {}}, "reserved"),
        ({"queue": "q", "payload": {"x": float("nan")}}, "not JSON"),
        ({"queue": "q", "payload": {}, "key": 7}, "key must be"),
    ],
)
def test_bad_notifications_fail_permanently(kwargs: dict[str, Any], problem: str) -> None:
    app = make_app(config_module=None, broker_url="memory://", load_workers=False)
    result = app.tasks[notify.TASK_NAME].apply(kwargs=kwargs).get()
    assert result["status"] == "permfailed" and problem in result["error"]


def test_importing_the_workers_builds_no_app() -> None:
    code = (
        "import swh_like_workers.webcheck, swh_like_workers.notify\n"
        "from celery import _state\n"
        "assert _state.default_app is None and not list(_state._apps), _state._apps\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
