"""A recorded forecast checked against what happened.

A forecast recorded at T (``swh scheduler forecast --record``) says, per
type, how many tasks will be in ERROR at each sample up to T + horizon. The
census (:mod:`..health.census`, run by the monitor) stores how many were,
with its instant, for the last hours. The backtest sets each census at or
after T and within the horizon beside the forecast's sample in force at
that instant (the latest at or before it), per type and overall, and says
how far apart they were: the mean absolute difference in tasks, the
largest, and both counts at the last census of the horizon.

It reads only what is stored: the platform runs as it does (standalone,
real workers), the forecast is recorded at T, and the backtest is asked
once T + horizon has passed (or before: it then covers what has)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..policy.times import hours_text
from ..store import SchedulerStore
from ..store.values import CensusRecord, StoredForecast

#: the name of the every-type row
OVERALL = "overall"


@dataclass(frozen=True)
class Gap:
    """One type's forecast ERROR counts against the census's."""

    name: str
    #: ``(hours after T, forecast, observed)`` at each census
    points: tuple[tuple[float, int, int], ...]

    @property
    def mean_abs(self) -> float | None:
        if not self.points:
            return None
        return sum(abs(f - o) for _, f, o in self.points) / len(self.points)

    @property
    def largest(self) -> int | None:
        return max((abs(f - o) for _, f, o in self.points), default=None)

    def to_json(self) -> dict[str, Any]:
        last = self.points[-1] if self.points else None
        return {
            "censuses": len(self.points),
            "mean_abs_error_tasks": None if self.mean_abs is None else round(self.mean_abs, 2),
            "largest_error_tasks": self.largest,
            "last": None
            if last is None
            else {"hours": round(last[0], 3), "forecast": last[1], "observed": last[2]},
        }


@dataclass(frozen=True)
class Backtest:
    """A recorded forecast set beside the censuses of its horizon."""

    forecast_id: int
    at: datetime
    horizon: timedelta
    #: the share of the horizon the censuses cover (0 to 1)
    covered: float
    gaps: tuple[Gap, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "forecast_id": self.forecast_id,
            "at": self.at.isoformat(),
            "horizon_hours": self.horizon.total_seconds() / 3600,
            "covered": round(self.covered, 3),
            "types": {g.name: g.to_json() for g in self.gaps},
        }


def _step(timeline: Sequence[Sequence[Any]], instants: Sequence[float], hours: float) -> int:
    """The ERROR count of the latest sample of ``timeline`` (its instants:
    ``instants``) at or before ``hours``."""
    index = bisect.bisect_right(instants, hours + 1e-9) - 1
    return int(timeline[max(0, index)][3])


def compare(stored: StoredForecast, censuses: Sequence[CensusRecord]) -> Backtest:
    """``stored`` (a forecast's recorded JSON) beside ``censuses``. Raises
    KeyError, TypeError or ValueError for a body not of the recorder's shape."""
    body = stored.body
    hours = float(body["horizon_hours"])
    horizon = timedelta(hours=hours)
    base: Mapping[str, Any] = body["base"]
    timelines = {name: o["timeline"] for name, o in base["types"].items()}
    timelines[OVERALL] = base["overall"]["timeline"]
    instants = {name: [float(r[0]) for r in t] for name, t in timelines.items()}
    within = sorted(
        (c for c in censuses if stored.at <= c.at <= stored.at + horizon), key=lambda c: c.at
    )
    points: dict[str, list[tuple[float, int, int]]] = {name: [] for name in timelines}
    for census in within:
        after = (census.at - stored.at).total_seconds() / 3600
        observed_all = 0
        for name, timeline in timelines.items():
            if name == OVERALL or not timeline:
                continue
            observed = int(census.conditions.get(name, {}).get("ERROR", 0))
            observed_all += observed
            points[name].append((after, _step(timeline, instants[name], after), observed))
        if timelines[OVERALL]:
            forecast = _step(timelines[OVERALL], instants[OVERALL], after)
            points[OVERALL].append((after, forecast, observed_all))
    covered = 0.0
    if within and hours > 0:
        covered = min(1.0, (within[-1].at - stored.at) / horizon)
    names = [OVERALL, *sorted(set(timelines) - {OVERALL})]
    gaps = tuple(Gap(name, tuple(points[name])) for name in names)
    return Backtest(stored.id, stored.at, horizon, covered, gaps)


def backtests(store: SchedulerStore, *, limit: int = 5) -> list[Backtest | StoredForecast]:
    """The recorded forecasts (the latest ``limit``), each beside the
    censuses of its horizon; a forecast whose body this version cannot read
    is returned as it is."""
    found: list[Backtest | StoredForecast] = []
    recorded = store.recorded_forecasts(limit=limit)
    # one read of the censuses, from the oldest forecast on
    censuses = store.census_history(min(s.at for s in recorded)) if recorded else []
    for stored in recorded:
        try:
            found.append(compare(stored, censuses))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            found.append(stored)
    return found


def lines(found: Sequence[Backtest | StoredForecast]) -> list[str]:
    """The backtests, a line each."""
    if not found:
        return ["No forecast recorded: 'swh scheduler forecast --record' records one."]
    out: list[str] = []
    for item in found:
        if isinstance(item, StoredForecast):
            out += [
                f"Forecast {item.id} ({item.at.isoformat()}): not in a shape this version reads.",
                "",
            ]
            continue
        hours = item.horizon.total_seconds() / 3600
        censuses = max((len(g.points) for g in item.gaps), default=0)
        out.append(
            f"Forecast {item.forecast_id} made {item.at.isoformat()} over {hours_text(hours)}: "
            f"{censuses} census(es) cover {item.covered:.0%} of it."
        )
        rows = [["type", "mean |forecast - observed|", "largest", "last: forecast / observed"]]
        for gap in item.gaps:
            last = gap.points[-1] if gap.points else None
            rows.append(
                [
                    gap.name,
                    "-" if gap.mean_abs is None else f"{gap.mean_abs:.1f}",
                    "-" if gap.largest is None else str(gap.largest),
                    "-" if last is None else f"{last[1]} / {last[2]} (+{hours_text(last[0])})",
                ]
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        out.append("  (tasks in ERROR)")
        out.append("")
    return out
