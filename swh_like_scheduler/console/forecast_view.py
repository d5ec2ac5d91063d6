"""The console's forecast page: the forecast recorded last
(:mod:`..simulator.forecast`, ``swh scheduler forecast --record``) beside
today's trend. Read from the database, never computed for a page.

The body is whatever was recorded: every figure is read as a number here
(a body of another shape shows a notice, never an error page), and the
charts are markup made of numbers and fixed words only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..api.state import ApiState
from .sparkline import HEIGHT, sparkline

#: the forecast chart's width (its height is the sparkline's, times 3)
CHART_WIDTH, CHART_HEIGHT = 480, HEIGHT * 3


@dataclass(frozen=True)
class ScenarioRow:
    workers: str
    error_at_horizon: int
    worst: int
    worst_at: float
    grows_from: float | None
    error_hours: float


@dataclass(frozen=True)
class TypeOutlook:
    name: str
    now: tuple[int, int, int]
    horizon: tuple[int, int, int]
    worst: int
    worst_at: float
    grows_from: float | None
    error_hours: float
    stretch: float | None


@dataclass(frozen=True)
class ForecastView:
    #: None: no forecast recorded
    at: datetime | None = None
    took: float = 0.0
    horizon_hours: float = 0.0
    tasks: int = 0
    assumptions: tuple[str, ...] = ()
    chart: str = ""
    trend: str = ""
    scenarios: tuple[ScenarioRow, ...] = ()
    types: tuple[TypeOutlook, ...] = ()
    needed: tuple[tuple[str, str], ...] = ()
    #: the recorded body could not be read (another version's, or junk)
    unreadable: bool = False


def _levels(value: Mapping[str, Any]) -> tuple[int, int, int]:
    return int(value["OK"]), int(value["WARNING"]), int(value["ERROR"])


def _grows(value: Any) -> float | None:
    return None if value is None else float(value)


def _scenario(body: Mapping[str, Any]) -> ScenarioRow:
    overall = body["overall"]
    workers = ", ".join(f"{q}={int(n)}" for q, n in sorted(body["workers"].items()))
    return ScenarioRow(
        workers=workers,
        error_at_horizon=int(overall["horizon"]["ERROR"]),
        worst=int(overall["worst"]["ERROR"]),
        worst_at=float(overall["worst"]["hours"]),
        grows_from=_grows(overall["error_grows_from_hours"]),
        error_hours=float(overall["error_hours"]),
    )


def _outlook(name: str, o: Mapping[str, Any]) -> TypeOutlook:
    stretch = o.get("stretch")
    return TypeOutlook(
        name=str(name),
        now=_levels(o["start"]),
        horizon=_levels(o["horizon"]),
        worst=int(o["worst"]["ERROR"]),
        worst_at=float(o["worst"]["hours"]),
        grows_from=_grows(o["error_grows_from_hours"]),
        error_hours=float(o["error_hours"]),
        stretch=None if stretch is None else float(stretch),
    )


def _line(readings: Sequence[tuple[float, int]], hours: float, top: int) -> str:
    return " ".join(
        f"{CHART_WIDTH * h / hours:.1f},{CHART_HEIGHT - 2 - (CHART_HEIGHT - 4) * v / top:.1f}"
        for h, v in readings
    )


def chart(scenarios: Sequence[Mapping[str, Any]], hours: float) -> str:
    """Tasks in ERROR (and WARNING, with the workers assumed) over the
    horizon: the first scenario's lines, then each variant's ERROR dashed."""
    timelines = [
        [(float(r[0]), int(r[2]), int(r[3])) for r in s["overall"].get("timeline", ())]
        for s in scenarios
    ]
    if hours <= 0 or not timelines or len(timelines[0]) < 2:
        return ""
    top = max(1, *(max(w, e) for t in timelines for _, w, e in t))
    base = timelines[0]
    warnings = _line([(h, w) for h, w, _ in base], hours, top)
    errors = _line([(h, e) for h, _, e in base], hours, top)
    lines = [
        f'<polyline class="spark-warning" points="{warnings}"/>',
        f'<polyline class="spark-error" points="{errors}"/>',
    ]
    for timeline in timelines[1:]:
        points = _line([(h, e) for h, _, e in timeline], hours, top)
        lines.append(f'<polyline class="spark-error variant" points="{points}"/>')
    label = (
        f"Tasks in ERROR over the next {hours:g} h with the workers assumed: "
        f"{base[0][2]:,} now, {base[-1][2]:,} at the horizon, at most "
        f"{max(e for _, _, e in base):,}; "
        + "".join(
            f"variant {n}: {t[-1][2]:,} at the horizon; "
            for n, t in enumerate(timelines[1:], start=1)
            if t
        )
        + f"the chart's height is 0 to {top:,} tasks"
    )
    return (
        f'<span class="spark-box">'
        f'<svg class="spark forecast" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" '
        f'width="{CHART_WIDTH}" height="{CHART_HEIGHT}" role="img" aria-label="{label}">'
        f"<title>{label}</title>{''.join(lines)}</svg>"
        f'<span class="spark-y" aria-hidden="true"><span>{top:,}</span><span>0</span></span>'
        f'<span class="spark-x" aria-hidden="true"><span>now</span>'
        f"<span>+{hours:g} h</span></span></span>"
    )


def forecast_view(state: ApiState) -> ForecastView:
    stored = state.store.latest_forecast()
    if stored is None:
        return ForecastView()
    now = state.clock()
    history = state.table_counts.history() if state.table_counts is not None else []
    trend = sparkline(
        [
            (
                at,
                sum(levels.get("ERROR", 0) for levels in value.conditions.values()),
                sum(levels.get("WARNING", 0) for levels in value.conditions.values()),
            )
            for at, value in history
        ],
        now=now,
    )
    body = stored.body
    try:
        hours = float(body["horizon_hours"])
        base, variants = body["base"], list(body.get("variants") or ())
        needed = body.get("workers_needed") or {}
        return ForecastView(
            at=stored.at,
            took=stored.took,
            horizon_hours=hours,
            tasks=int(body["tasks"]),
            assumptions=tuple(str(a) for a in body.get("assumptions") or ()),
            chart=chart([base, *variants], hours),
            trend=trend,
            scenarios=tuple(_scenario(s) for s in (base, *variants)),
            types=tuple(_outlook(n, o) for n, o in sorted(base["types"].items())),
            needed=tuple(
                (str(q), "more than the most tried" if n is None else f"{int(n):,}")
                for q, n in sorted(needed.items())
            ),
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return ForecastView(at=stored.at, took=stored.took, trend=trend, unreadable=True)
