"""What a documentation page shows against what a command printed, for the
tests that follow a guide line by line (the production and origin-visits
tutorials): each line the page shows must be a line printed, in the same
order; a ``...`` line skips lines, a ``...`` inside a line stands for
anything. Both sides are first passed through the guide's own
``normalized`` (its volatile parts: instants, ids, paths)."""

from __future__ import annotations

import re
from collections.abc import Callable


def first_unshown(shown: str, printed: str, normalized: Callable[[str], str]) -> str | None:
    """None when ``printed`` holds every line of ``shown`` in order; else
    a message naming the first line the page shows that was not printed."""
    lines = [normalized(line) for line in printed.splitlines() if line.strip()]
    at = 0
    for want in (line for line in shown.splitlines() if line.strip()):
        if want.strip() == "...":
            continue
        parts = normalized(want).split("...")
        pattern = re.compile(".*".join(re.escape(part) for part in parts))
        found = next((i for i in range(at, len(lines)) if pattern.fullmatch(lines[i])), None)
        if found is None:
            return f"the page shows {want!r}, not printed (after line {at}):\n{printed}"
        at = found + 1
    return None
