"""``GET /forecast`` and the forecast's gauges in ``/metrics``: the forecast
``swh scheduler forecast --record`` stored, as every API replica reports it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import httpx
from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.wire import encode


def _jobs(store: SQLAlchemyStore) -> None:
    """40 jobs of 2 minutes on ``jobs``, each to run at most an hour apart
    and 30 min after its last run ended (1.4 slots' worth)."""
    store.create_task_type(TaskType(type="job", backend_name="x.job", queue="jobs"))
    start = datetime.now(tz=UTC)
    store.create_tasks(
        [
            Task(
                type="job",
                args=(n,),
                schedule_kind=ScheduleKind.PERIODIC,
                period=timedelta(hours=1),
                cooldown=timedelta(minutes=30),
                next_run=start + n * timedelta(seconds=20),
                deadline=start + n * timedelta(seconds=20),
                expected_duration=timedelta(minutes=2),
            )
            for n in range(40)
        ],
        now=start,
    )


def test_the_recorded_forecast_is_read_and_scraped(
    store: SQLAlchemyStore,
    db_url: str,
    client: httpx.Client,
    reader: httpx.Client,
    anonymous: httpx.Client,
) -> None:
    """Worked by hand for the sizing: 40 jobs of about 2.27 min every 32.3
    min ask for 2.8 slots; with one slot ERROR grows, with 4 and more a job
    waits a minute or two at worst, far under its 30 min of margin. So the
    fewest slots that keep the jobs out of ERROR are 3 or 4 (3 is 93 %
    busy, which the log-normal runs may or may not stand); the search tries
    up to 8 (4 x 2 given)."""
    assert anonymous.get("/forecast").status_code == 401
    missing = reader.get("/forecast")
    assert missing.status_code == 404 and "forecast --record" in missing.text
    assert "swh_scheduler_forecast" not in reader.get("/metrics").text
    _jobs(store)
    args = ["--hours", "3 h", "--workers", "jobs=2", "--size", "--record", "--json"]
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, "forecast", *args])
    assert result.exit_code == 0, (result.output, result.stderr)
    printed = json.loads(result.stdout)
    assert "recorded" in result.stderr
    assert printed["workers_needed"]["jobs"] in (3, 4), printed["workers_needed"]
    served = reader.get("/forecast")
    assert served.status_code == 200
    body = served.json()
    assert body["forecast"] == printed and body["took_seconds"] > 0
    assert body["at"] == printed["now"] and isinstance(body["age_seconds"], float)
    text = reader.get("/metrics").text
    needed = printed["workers_needed"]["jobs"]
    assert f'swh_scheduler_forecast_workers_needed{{queue="jobs"}} {needed:.1f}' in text
    assert 'swh_scheduler_forecast_workers{queue="jobs"} 2.0' in text
    horizon_errors = printed["base"]["types"]["job"]["horizon"]["ERROR"]
    assert (
        f'swh_scheduler_forecast_tasks{{condition="ERROR",type="job"}} {horizon_errors:.1f}' in text
    )
    assert re.search(r"^swh_scheduler_forecast_age_seconds \S+$", text, re.M)
    # a reader may not record one; a writer may (over the store's RPC)
    call = {
        "args": encode([{"base": "junk"}]),
        "kwargs": encode({"at": datetime.fromisoformat(printed["now"]), "took": 1.0}),
    }
    assert reader.post("/rpc/record_forecast", json=call).status_code == 403
    assert client.post("/rpc/record_forecast", json=call).status_code == 200
    assert reader.get("/forecast").json()["forecast"] == {"base": "junk"}
    assert "swh_scheduler_forecast_tasks" not in reader.get("/metrics").text


def test_a_body_of_another_shape_is_served_and_scraped_without_error(
    store: SQLAlchemyStore, reader: httpx.Client, now: datetime
) -> None:
    store.record_forecast({"base": {"types": [1, 2]}, "deep": [[[[]]]]}, at=now, took=0.5)
    assert reader.get("/forecast").json()["forecast"]["deep"] == [[[[]]]]
    scraped = reader.get("/metrics")
    assert scraped.status_code == 200
    assert "swh_scheduler_forecast_age_seconds 0.0" in scraped.text
    assert "swh_scheduler_forecast_tasks" not in scraped.text
