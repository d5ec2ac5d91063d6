"""The suite's two cuts of its heaviest scenarios outside the fault suite.

The default run holds a quick cut: the same assertions on a smaller world
(fewer tasks, fewer simulated days). ``SWH_SLOW=full`` runs them at full
size. (The fault suite has its own switch, ``SWH_FAULTS=full``.)"""

from __future__ import annotations

import os
from typing import TypeVar

FULL = os.environ.get("SWH_SLOW", "").lower() == "full"

T = TypeVar("T")


def scale(quick: T, full: T) -> T:
    """A scenario's size in the quick cut (the default run) and the full one."""
    return full if FULL else quick
