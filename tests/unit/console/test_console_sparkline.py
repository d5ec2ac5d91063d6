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
    assert (
        "ERROR 0 to 10 (highest 10), WARNING 10 to 0 (highest 10) over the last 10 min; "
        "the chart's height is 0 to 10 tasks"
    ) in svg


def scale(chart: str) -> tuple[list[str], list[str]]:
    """The texts beside the chart (its top and bottom) and under it (its span)."""
    found = {}
    for axis in ("y", "x"):
        box = re.search(rf'class="spark-{axis}"[^>]*>((?:<span>[^<]*</span>)*)</span>', chart)
        assert box, chart
        found[axis] = re.findall(r"<span>([^<]*)</span>", box.group(1))
    return found["y"], found["x"]


def test_the_chart_says_its_scale_beside_it() -> None:
    """Issue 57: a sparkline had no scale (27 tasks or 2, 6 hours or 10 min?)."""
    samples = [(NOW - timedelta(hours=6) + timedelta(minutes=30 * i), i, 2 * i) for i in range(13)]
    chart = sparkline(samples, now=NOW)
    assert scale(chart) == (["24", "0"], ["\u22126 h", "now"])
    assert "over the last 6 h; the chart's height is 0 to 24 tasks" in chart
    assert "ERROR 0 to 12 (highest 12), WARNING 0 to 24 (highest 24)" in chart
    # the scale text is for the eyes; the chart's label says it all to a screen reader
    assert chart.count('aria-hidden="true"') == 2 and 'role="img"' in chart
    # a server up for 45 minutes draws 45 minutes; nothing counted yet: 0 to 1
    short = [(NOW - timedelta(minutes=45), 0, 0), (NOW, 0, 0)]
    assert scale(sparkline(short, now=NOW)) == (["1", "0"], ["\u221245 min", "now"])
    late = [(NOW - timedelta(minutes=150), 1500, 0), (NOW, 0, 0)]
    assert scale(sparkline(late, now=NOW)) == (["1,500", "0"], ["\u22122 h 30 min", "now"])
