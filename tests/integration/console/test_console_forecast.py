"""The console's forecast page: the forecast recorded last, beside today's
trend; a body of another shape (or a hostile one) shows a notice, escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api_server import READER
from test_console import browser, console_url, logged_in

from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskType
from swh_like_scheduler.simulator.forecast import forecast
from swh_like_scheduler.store import SQLAlchemyStore

__all__ = ["console_url"]


def test_the_forecast_page_shows_the_recorded_forecast(
    console_url: str, store: SQLAlchemyStore
) -> None:
    with browser(console_url) as anonymous:
        assert anonymous.get("/console/forecast").status_code == 303  # to the login
    with logged_in(console_url, READER) as http:
        assert "No forecast recorded yet" in http.get("/console/forecast").text
        start = datetime.now(tz=UTC)
        store.create_task_type(TaskType(type="job", backend_name="x.job", queue="jobs"))
        store.create_tasks(
            [
                Task(
                    type="job",
                    args=(n,),
                    schedule_kind=ScheduleKind.PERIODIC,
                    period=timedelta(minutes=20),
                    cooldown=timedelta(minutes=10),
                    next_run=start,
                    deadline=start,
                    expected_duration=timedelta(minutes=3),
                )
                for n in range(12)
            ],
            now=start,
        )
        made = forecast(
            store, start, slots={"jobs": 1}, horizon=timedelta(hours=1), more=[{"jobs": 3}]
        )
        store.record_forecast(made.to_json(), at=start, took=2.5)
        page = http.get("/console/forecast")
        assert page.status_code == 200
        text = page.text
        assert 'aria-current="page">Forecast' in text
        assert "The next 1 h of 12 live tasks" in text
        # the table workers per queue -> ERROR, the variant's row too
        base, [more] = made.base.overall, made.variants
        assert f'jobs=1 (assumed)</td><td class="num">{base.horizon.error}<' in text
        assert f'jobs=4</td><td class="num">{more.overall.horizon.error}<' in text
        # the chart: the base's two lines and the variant's dashed one
        assert text.count('<polyline class="spark-error') == 2
        assert 'class="spark-error variant"' in text and 'class="spark-warning"' in text
        assert "job: no run ended within the last hour" in text


def test_a_body_of_another_shape_shows_a_notice_and_is_escaped(
    console_url: str, store: SQLAlchemyStore
) -> None:
    now = datetime.now(tz=UTC)
    store.record_forecast({"base": "junk"}, at=now, took=0.1)
    with logged_in(console_url, READER) as http:
        page = http.get("/console/forecast")
        assert page.status_code == 200
        assert "not in a shape this version reads" in page.text
        levels = {"OK": 1, "WARNING": 0, "ERROR": 2}
        outlook = {
            "timeline": [[0, 1, 0, 2], [1, 1, 0, 2]],
            "start": {"hours": 0, **levels},
            "horizon": {"hours": 1, **levels},
            "worst": {"hours": 1, **levels},
            "error_grows_from_hours": None,
            "error_hours": 1.0,
            "stretch": None,
        }
        hostile = "<script>alert(1)</script>"
        body = {
            "horizon_hours": 1,
            "tasks": 3,
            "assumptions": [hostile],
            "base": {
                "workers": {hostile: 1},
                "overall": outlook,
                "types": {hostile: outlook},
            },
        }
        store.record_forecast(body, at=now, took=0.1)
        text = http.get("/console/forecast").text
        assert hostile not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
