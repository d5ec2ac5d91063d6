"""What the console's origins page shows: the coverage of each lister and
visit type, as ``origin update-metrics`` last counted it (the page reads
the stored counts, never the origins themselves), and the visit types'
task types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..store import SchedulerStore
from ..visits.model import VISIT_TASK_PREFIX


@dataclass(frozen=True)
class CoverageRow:
    lister: str
    instance: str
    visit_type: str
    known: int
    enabled: int
    never_visited: int
    pending: int
    ok: int
    warning: int
    error: int
    counted_at: datetime

    @property
    def visited_share(self) -> int:
        """Of the enabled origins, the percentage visited at least once."""
        if not self.enabled:
            return 0
        return round(100 * (self.enabled - self.never_visited) / self.enabled)


@dataclass(frozen=True)
class VisitTypeRow:
    visit_type: str
    task_type: str
    queue: str
    max_queue_length: int | None
    paused: bool


@dataclass(frozen=True)
class Coverage:
    rows: tuple[CoverageRow, ...]
    visit_types: tuple[VisitTypeRow, ...]

    @property
    def counted_at(self) -> datetime | None:
        return min((r.counted_at for r in self.rows), default=None)


def coverage(store: SchedulerStore) -> Coverage:
    listers = {x.id: x for x in store.get_listers()}
    rows = []
    for m in store.get_metrics():
        lister = listers.get(m.lister_id)
        rows.append(
            CoverageRow(
                lister=lister.name if lister else m.lister_id,
                instance=lister.instance_name if lister else "",
                visit_type=m.visit_type,
                known=m.origins_known,
                enabled=m.origins_enabled,
                never_visited=m.origins_never_visited,
                pending=m.origins_with_pending_changes,
                ok=m.origins_ok,
                warning=m.origins_warning,
                error=m.origins_error,
                counted_at=m.last_update,
            )
        )
    rows.sort(key=lambda r: (r.lister, r.instance, r.visit_type))
    types = tuple(
        VisitTypeRow(
            visit_type=t.type.removeprefix(VISIT_TASK_PREFIX),
            task_type=t.type,
            queue=t.effective_queue,
            max_queue_length=t.max_queue_length,
            paused=t.paused_at is not None,
        )
        for t in store.get_task_types()
        if t.type.startswith(VISIT_TASK_PREFIX)
    )
    return Coverage(tuple(rows), types)
