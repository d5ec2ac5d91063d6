"""A forecast (:mod:`.forecast`) in words and tables, for a terminal."""

from __future__ import annotations

from datetime import datetime

from ..policy.times import hours_text
from .forecast import Conditions, Forecast, Outlook, Scenario


def _levels(c: Conditions) -> str:
    return f"{c.ok:,}/{c.warning:,}/{c.error:,}"


def _ago(then: datetime | None, now: datetime) -> str:
    if then is None:
        return "none recorded"
    seconds = max(0.0, (now - then).total_seconds())
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _workers(scenario: Scenario) -> str:
    return ", ".join(f"{q}={n}" for q, n in sorted(scenario.workers.items()))


def _row(name: str, o: Outlook) -> list[str]:
    grows = "-" if o.error_grows_from is None else hours_text(o.error_grows_from)
    stretch = "-" if o.stretch is None else f"x{o.stretch:.2f}"
    return [
        name,
        _levels(o.start),
        _levels(o.horizon),
        f"{o.worst.error:,} at {hours_text(o.worst.hours)}",
        grows,
        f"{o.error_hours:,.1f}",
        stretch,
    ]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def scenario_lines(scenario: Scenario, horizon_hours: float) -> list[str]:
    head = [
        "type",
        "now OK/WARN/ERR",
        f"at {hours_text(horizon_hours)}",
        "most in ERROR",
        "ERROR grows from",
        "ERROR-hours",
        "stretch",
    ]
    rows = [head, _row("overall", scenario.overall)]
    rows += [_row(name, o) for name, o in sorted(scenario.types.items())]
    return _table(rows)


def lines(forecast: Forecast) -> list[str]:
    """The forecast, a line each."""
    hours = forecast.horizon.total_seconds() / 3600
    worker_seen = _ago(forecast.last_worker_seen_at, forecast.now)
    out = [
        f"Forecast of {forecast.tasks:,} live tasks from {forecast.now.isoformat()} over "
        f"{hours_text(hours)} ({forecast.order.value} order, seed {forecast.seed}).",
        f"Data: the latest sign of life of a worker {worker_seen}; "
        f"the latest runner claim {_ago(forecast.last_claim_at, forecast.now)}.",
        "Assumed:",
        *(f"- {a}" for a in forecast.assumptions),
        "",
        f"With {_workers(forecast.base)} worker slot(s):",
        *scenario_lines(forecast.base, hours),
    ]
    for variant in forecast.variants:
        out += ["", f"With {_workers(variant)}:", *scenario_lines(variant, hours)]
    out += ["", f"Workers per queue -> tasks in ERROR at {hours_text(hours)} (ERROR-hours):"]
    for scenario in (forecast.base, *forecast.variants):
        o = scenario.overall
        out.append(f"  {_workers(scenario)}: {o.horizon.error:,} ({o.error_hours:,.1f})")
    if forecast.needed:
        out += [
            "",
            "Worker slots needed per queue (none in ERROR at the horizon, never more than "
            f"now, intervals within x{forecast.max_stretch:g} of the most slots tried):",
        ]
        for queue, count in sorted(forecast.needed.items()):
            said = "more than the most tried" if count is None else str(count)
            out.append(f"  {queue}: {said}")
    return out
