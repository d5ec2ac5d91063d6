"""``swh scheduler backtest``: a recorded forecast beside the censuses of
its horizon, through click's runner."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore

T = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def _outlook(timeline: list[list[float]]) -> dict[str, object]:
    last = {"hours": timeline[-1][0], "OK": 0, "WARNING": 0, "ERROR": timeline[-1][3]}
    return {
        "timeline": timeline,
        "start": last,
        "horizon": last,
        "worst": last,
        "error_grows_from_hours": None,
        "error_hours": 0.0,
        "stretch": None,
    }


def _census(store: SQLAlchemyStore, at: datetime, job: int, report: int) -> None:
    store.save_census(
        at=at,
        conditions={"job": {"ERROR": job}, "report": {"ERROR": report}},
        tasks={},
        assessed=0,
        took=0.0,
        keep=timedelta(hours=6),
    )


def test_a_recorded_forecast_is_set_beside_the_censuses_of_its_horizon(sqlite_url: str) -> None:
    """Worked by hand. The forecast made at T over 1 h says the jobs in
    ERROR are 0 from T, 5 from T + 30 min, 10 from T + 1 h; the reports 0
    throughout. The censuses within the horizon, at T + 10, 40 and 60 min,
    counted the jobs 0, 4, 12 and the reports 0, 1, 0 (those at T - 10 and
    T + 70 min are outside). The samples in force: 0, 5, 10. Jobs: the
    differences 0, 1, 2 (mean 1.0, largest 2, last 10 / 12); reports: 0,
    1, 0 (mean 0.33, largest 1); overall: forecast 0, 5, 10 against 0, 5,
    12 (mean 0.67, largest 2). The last census is at the horizon: it is
    covered in full."""
    store = SQLAlchemyStore.from_url(sqlite_url)
    body = {
        "horizon_hours": 1.0,
        "base": {
            "workers": {"jobs": 1},
            "overall": _outlook([[0, 14, 0, 0], [0.5, 9, 0, 5], [1.0, 4, 0, 10]]),
            "types": {
                "job": _outlook([[0, 10, 0, 0], [0.5, 5, 0, 5], [1.0, 0, 0, 10]]),
                "report": _outlook([[0, 4, 0, 0], [1.0, 4, 0, 0]]),
            },
        },
    }
    made = store.record_forecast(body, at=T, took=1.0)
    for minutes, job, report in ((-10, 9, 9), (10, 0, 0), (40, 4, 1), (60, 12, 0), (70, 9, 9)):
        _census(store, T + minutes * M, job, report)
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", sqlite_url, "backtest", "--json"])
    assert result.exit_code == 0, (result.output, result.stderr)
    [found] = json.loads(result.stdout)
    assert found["forecast_id"] == made.id and found["covered"] == 1.0
    job, report, overall = (found["types"][n] for n in ("job", "report", "overall"))
    assert (job["censuses"], job["mean_abs_error_tasks"], job["largest_error_tasks"]) == (3, 1.0, 2)
    assert job["last"] == {"hours": 1.0, "forecast": 10, "observed": 12}
    assert (report["mean_abs_error_tasks"], report["largest_error_tasks"]) == (0.33, 1)
    assert (overall["mean_abs_error_tasks"], overall["largest_error_tasks"]) == (0.67, 2)
    text = CliRunner().invoke(swh, ["scheduler", "--db-url", sqlite_url, "backtest"]).stdout
    assert "over 1 h: 3 census(es) cover 100% of it" in text and "10 / 12 (+1 h)" in text
    # a body of another shape is said, not a crash
    store.record_forecast({"base": 1}, at=T + 2 * M, took=0.1)
    text = CliRunner().invoke(swh, ["scheduler", "--db-url", sqlite_url, "backtest"]).stdout
    assert "not in a shape this version reads" in text and "cover 100% of it" in text
    store.close()


def test_without_a_forecast_it_says_how_to_record_one(sqlite_url: str) -> None:
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", sqlite_url, "backtest"])
    assert result.exit_code == 0 and "forecast --record" in result.stdout
