"""What one pass of the monitor did, duty by duty."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..domain.lease import StealReport
from ..domain.records import Expiry, LockState, WorkerSweep

#: Why a pass did no duty.
NOT_THE_MONITOR = "not the monitor"


@dataclass(frozen=True)
class MonitorReport:
    """One pass: whether this process held the monitor's lock (``skipped``
    says why not), then what each duty did. ``lock`` is the lock as the pass
    found it (holder and expiry on the database clock)."""

    now: datetime
    lock: LockState
    steal: StealReport
    skipped: str | None = None
    offline: WorkerSweep = field(default_factory=WorkerSweep)
    expired: tuple[Expiry, ...] = ()
    runs_deleted: int = 0
    oneshots_deleted: int = 0
    republished: int = 0
    #: stuck claims of the Redis index filed again
    index_unstuck: int = 0
    #: the task types whose load was measured (``load_every`` after the last)
    loads_measured: int = 0
    #: tasks the census step assessed, and the instant of the census it
    #: stored (``None``: the last one was fresh, or the step goes on at
    #: the next pass)
    census_assessed: int = 0
    census_at: datetime | None = None

    @property
    def is_monitor(self) -> bool:
        return self.skipped is None

    def summary(self) -> str:
        """One line saying what the pass did (or why it did nothing)."""
        if self.skipped is not None:
            return f"skipped: {self.skipped} ({self._holder_text()})"
        steal = self.steal
        unstuck = self.index_unstuck
        index = f"; {unstuck} stuck index claim(s) filed again" if unstuck else ""
        if self.loads_measured:
            index += f"; load of {self.loads_measured} task type(s) measured"
        if self.census_at is not None:
            index += f"; census stored ({self.census_assessed} task(s) assessed)"
        elif self.census_assessed:
            index += f"; census under way ({self.census_assessed} task(s) assessed)"
        return (
            f"{len(steal.warned)} lease(s) put on notice, {len(steal.stolen)} run(s) lost; "
            f"{len(self.offline.marked_offline)} silent worker(s) marked offline, "
            f"{len(self.offline.lost)} of their run(s) lost; "
            f"{len(self.expired)} one-shot task(s) expired; "
            f"{self.runs_deleted} old run(s) and {self.oneshots_deleted} finished one-shot "
            f"task(s) deleted; {self.republished} run(s) re-published" + index
        )

    def _holder_text(self) -> str:
        if self.lock.holder is None:
            return "nobody holds the lock"
        until = self.lock.expires_at.isoformat() if self.lock.expires_at else "?"
        return f"held by {self.lock.holder} until {until}"

    def to_json(self) -> dict[str, Any]:
        """A flat JSON view (ids of what each duty touched)."""
        steal = self.steal
        return {
            "monitor": self.is_monitor,
            "skipped": self.skipped,
            "now": self.now.isoformat(),
            "lock": {
                "name": self.lock.name,
                "holder": self.lock.holder,
                "expires_at": self.lock.expires_at.isoformat() if self.lock.expires_at else None,
                "held": self.lock.held,
            },
            "warned": list(steal.warned),
            "stolen": [r.backend_id for r in steal.stolen],
            "workers_offline": list(self.offline.marked_offline),
            "offline_runs_lost": [r.backend_id for r in self.offline.lost],
            "expired": [e.task.id for e in self.expired],
            "runs_deleted": self.runs_deleted,
            "oneshots_deleted": self.oneshots_deleted,
            "republished": self.republished,
            "index_unstuck": self.index_unstuck,
            "census_assessed": self.census_assessed,
            "census_at": None if self.census_at is None else self.census_at.isoformat(),
        }
