"""What a runner pass did: per task type (:class:`TypePass`) and in all
(:class:`PassReport`, which also says when the next pass has work)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class TypePass:
    """What one pass did for one task type."""

    task_type: str
    queue: str
    depth: int | None
    capacity: int
    claimed: int = 0
    published: int = 0
    seconds: float = 0.0
    error: str | None = None
    #: the type's ``max_queue_length`` (``None``: no limit)
    limit: int | None = None
    #: the claims left long tasks waiting to keep worker slots for shorter
    #: ones, and took fewer tasks than there was room for (:mod:`.reserve`)
    reserved: bool = False

    @property
    def filled(self) -> bool:
        """The pass filled the type's queue to its limit (ready tasks may
        be left: the runner tops the queue up as it drains)."""
        return self.error is None and self.limit is not None and self.claimed >= self.capacity

    def describe(self) -> str:
        """One log line: what the pass did for this type."""
        line = (
            f"type={self.task_type} queue={self.queue} depth={self.depth} "
            f"capacity={self.capacity} claimed={self.claimed} published={self.published} "
            f"time={self.seconds:.3f}s"
        )
        return f"{line} error={self.error}" if self.error else line


@dataclass(frozen=True)
class PassReport:
    """What one pass did, and when the next one has work."""

    now: datetime
    types: tuple[TypePass, ...] = ()
    #: earliest next_run still waiting among the served types (None: none)
    next_ready: datetime | None = None
    #: a type was cut short by its capacity or an error
    saturated: bool = False
    errors: tuple[str, ...] = field(default=())
    #: ready tasks left with room to spare: locked elsewhere (:func:`.loop.held_wait`)
    held: bool = False

    @property
    def claimed(self) -> int:
        return sum(t.claimed for t in self.types)

    @property
    def published(self) -> int:
        return sum(t.published for t in self.types)

    def sleep_seconds(self, period: float) -> float:
        """How long to wait before the next pass: until the next task is
        ready, at most ``period``; a full ``period`` when saturated or failing
        (the queue must drain, or the broker come back)."""
        if self.saturated or self.errors or self.next_ready is None:
            return period
        return max(0.0, min(period, (self.next_ready - self.now).total_seconds()))
