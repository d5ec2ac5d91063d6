"""Interpreter settings for the runner's process (daemon entry points only)."""

from __future__ import annotations

import gc
import sys

#: Seconds a thread may hold the GIL before handing it over (Python's
#: default: 0.005). A runner pass has two busy threads: the claiming one
#: mostly waits on the database, the publishing one builds messages. When a
#: claim's reply arrives, the claiming thread waits up to this long for the
#: GIL before it can send the next statement, several times per chunk.
#: Measured with 100,000 ready tasks on PostgreSQL + Redis: 12.3k tasks/s at
#: 5 ms, 14.0k tasks/s at 0.5 ms.
GIL_SWITCH_INTERVAL = 0.0005

#: Allocations of container objects between two young-generation garbage
#: collections (Python's default: 700). A pass keeps tens of thousands of
#: short-lived claims and messages alive at once, which the default makes
#: the collector traverse again and again, for no garbage: building a
#: message took twice as long. The runner makes no reference cycles of its
#: own; those of libraries are still collected, less often.
GC_YOUNG_THRESHOLD = 50_000


def tune_interpreter() -> None:
    """Shorten the GIL switch interval to :data:`GIL_SWITCH_INTERVAL` and
    collect young garbage every :data:`GC_YOUNG_THRESHOLD` allocations (never
    more often than before); move the objects alive now (modules, the app,
    the store) out of the collector's sight with ``gc.freeze``. Called by
    ``start-runner`` and the beat scheduler, which own their process;
    library callers of ``tick`` decide for themselves."""
    if sys.getswitchinterval() > GIL_SWITCH_INTERVAL:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    young, middle, old = gc.get_threshold()
    if 0 < young < GC_YOUNG_THRESHOLD:
        gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
    gc.freeze()
