"""``GET /forecast`` and the forecast's gauges in ``/metrics``: the forecast
recorded last (``swh scheduler forecast --record``, :mod:`..simulator.forecast`),
read from the database, never computed in a request or a scrape."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from prometheus_client.core import GaugeMetricFamily

from ..domain.exceptions import NotFound
from ..store import SchedulerStore
from ..store.values import StoredForecast
from .deps import READ, State

router = APIRouter(tags=["observation"])

_LEVELS = ("OK", "WARNING", "ERROR")


@router.get("/forecast", dependencies=[READ])
def get_forecast(state: State) -> dict[str, Any]:
    """The forecast recorded last, as ``swh scheduler forecast --json``
    prints it, with when it was made (``at``), how long it took
    (``took_seconds``) and how old it is (``age_seconds``). 404 when no
    forecast was recorded."""
    stored = state.store.latest_forecast()
    if stored is None:
        raise NotFound(
            "no forecast recorded: run 'swh scheduler forecast --record' (with --every to "
            "keep one fresh)"
        )
    return {
        "at": stored.at.isoformat(),
        "took_seconds": stored.took,
        "age_seconds": (state.clock() - stored.at).total_seconds(),
        "forecast": stored.body,
    }


def forecast_metrics(store: SchedulerStore, now: datetime) -> Iterator[GaugeMetricFamily]:
    """The gauges of the forecast recorded last (none without one; a body
    not of the recorder's shape yields only its age)."""
    stored = store.latest_forecast()
    if stored is None:
        return
    yield GaugeMetricFamily(
        "swh_scheduler_forecast_age_seconds",
        "Seconds since the forecast recorded last was made",
        value=(now - stored.at).total_seconds(),
    )
    try:
        yield from _figures(stored)
    except (KeyError, TypeError, ValueError, AttributeError):
        return  # not a body the recorder writes: nothing more to say


def _figures(stored: StoredForecast) -> Iterator[GaugeMetricFamily]:
    body = stored.body
    base: Mapping[str, Any] = body["base"]
    hours = float(body["horizon_hours"])
    tasks = GaugeMetricFamily(
        "swh_scheduler_forecast_tasks",
        f"Tasks per type and condition at the forecast's horizon ({hours:g} h ahead), "
        "with the workers it assumed",
        labels=["type", "condition"],
    )
    error_hours = GaugeMetricFamily(
        "swh_scheduler_forecast_error_hours",
        "ERROR-hours per type over the forecast's horizon, with the workers it assumed",
        labels=["type"],
    )
    for name, outlook in sorted(base["types"].items()):
        for level in _LEVELS:
            tasks.add_metric([str(name), level], float(outlook["horizon"][level]))
        error_hours.add_metric([str(name)], float(outlook["error_hours"]))
    workers = GaugeMetricFamily(
        "swh_scheduler_forecast_workers",
        "Worker slots per queue the forecast assumed",
        labels=["queue"],
    )
    for queue, count in sorted(base["workers"].items()):
        workers.add_metric([str(queue)], float(count))
    yield from (tasks, error_hours, workers)
    needed = body.get("workers_needed") or {}
    if needed:
        gauge = GaugeMetricFamily(
            "swh_scheduler_forecast_workers_needed",
            "Worker slots per queue the forecast says keep its tasks out of ERROR over "
            "the horizon, within the stretch bound (absent: not within the search's bound)",
            labels=["queue"],
        )
        for queue, count in sorted(needed.items()):
            if count is not None:
                gauge.add_metric([str(queue)], float(count))
        yield gauge
