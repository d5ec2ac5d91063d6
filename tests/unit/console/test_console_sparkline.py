"""The overview's inline chart: numbers only, scaled to what it has."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from swh_like_scheduler.console.sparkline import HEIGHT, WIDTH, sparkline

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def points(svg: str, kind: str) -> list[tuple[float, float]]:
    found = re.search(rf'class="spark-{kind}" points="([^"]*)"', svg)
    assert found, svg
    return [(float(x), float(y)) for x, y in (p.split(",") for p in found.group(1).split())]


def test_a_chart_needs_two_samples_within_its_span() -> None:
    assert sparkline([], now=NOW) == ""
    assert sparkline([(NOW, 1, 1)], now=NOW) == ""
    old = NOW - timedelta(hours=7)
    assert sparkline([(old, 1, 1), (NOW, 2, 2)], now=NOW) == ""


def test_the_chart_spans_its_samples_and_rises_with_the_errors() -> None:
    samples = [(NOW - timedelta(minutes=10 - i), i, 10 - i) for i in range(11)]
    svg = sparkline(samples, now=NOW)
    errors, warnings = points(svg, "error"), points(svg, "warning")
    assert errors[0][0] == 0.0 and errors[-1][0] == WIDTH  # the whole width
    assert errors[0][1] > errors[-1][1]  # more errors: higher (a smaller y)
    assert warnings[0][1] < warnings[-1][1]
    assert all(0 <= y <= HEIGHT for _, y in errors + warnings)
    assert "ERROR 0 to 10, WARNING 10 to 0 over the last 10 min" in svg
