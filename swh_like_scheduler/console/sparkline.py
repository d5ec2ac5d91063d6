"""A small inline chart of a type's ERROR and WARNING counts over the last
hours: SVG markup made of numbers only (safe to insert as it is)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

WIDTH, HEIGHT = 120, 28
#: the time the chart spans
SPAN = timedelta(hours=6)


def _points(values: Sequence[tuple[float, int]], top: int) -> str:
    return " ".join(f"{x:.1f},{HEIGHT - 2 - (HEIGHT - 4) * value / top:.1f}" for x, value in values)


def sparkline(samples: Sequence[tuple[datetime, int, int]], *, now: datetime) -> str:
    """``samples``: (instant, errors, warnings), oldest first. The chart
    spans the last :data:`SPAN`, or less when the samples begin later (a
    server started an hour ago draws its hour). Empty text with fewer than
    two samples in the span."""
    kept = [s for s in samples if s[0] >= now - SPAN]
    if len(kept) < 2:
        return ""
    start = kept[0][0]
    span = max(now - start, timedelta(minutes=1))
    top = max(1, *(max(e, w) for _, e, w in kept))

    def x(at: datetime) -> float:
        return (at - start) / span * WIDTH

    errors = _points([(x(at), e) for at, e, _ in kept], top)
    warnings = _points([(x(at), w) for at, _, w in kept], top)
    first, last = kept[0], kept[-1]
    label = (
        f"ERROR {first[1]:,} to {last[1]:,}, WARNING {first[2]:,} to {last[2]:,} "
        f"over the last {int((last[0] - first[0]).total_seconds() // 60)} min"
    )
    return (
        f'<svg class="spark" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{label}"><title>{label}</title>'
        f'<polyline class="spark-warning" points="{warnings}"/>'
        f'<polyline class="spark-error" points="{errors}"/></svg>'
    )
