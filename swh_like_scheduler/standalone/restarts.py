"""Children that exit on their own are started again, with a growing delay.

A child of ``standalone`` (the broker, the listener, a worker, the runner,
the API) that exits while the platform runs is started again with the same
command line: after :attr:`RestartPolicy.first` (1 s) the first time, twice
as long each time it exits again, at most :attr:`RestartPolicy.longest`
(60 s); a child that stayed up :attr:`RestartPolicy.settled` (60 s) or more
before exiting starts again from the first delay. Every exit is said (the
log and the table's notes): the child, its pid, its exit code or the signal
that killed it, and when it comes back. Stopping the platform (Ctrl-C,
``--duration``) restarts nothing.

:class:`Restarts` is the bookkeeping, on a monotonic clock given by the
caller (seconds); it starts no process.
"""

from __future__ import annotations

import signal
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    """Delays between an exit and the restart, in seconds."""

    first: float = 1.0
    factor: float = 2.0
    longest: float = 60.0
    #: a child up this long before it exited starts again from ``first``
    settled: float = 60.0

    def __post_init__(self) -> None:
        if self.first <= 0 or self.factor < 1 or self.longest < self.first:
            raise ValueError(f"restart delays {self} must grow from a positive first delay")

    def delay(self, previous: float | None, uptime: float) -> float:
        """The delay before restarting a child that exited after ``uptime``
        seconds, its previous restart having waited ``previous`` (``None``:
        never restarted)."""
        if previous is None or uptime >= self.settled:
            return self.first
        return min(self.longest, previous * self.factor)


def exit_text(code: int) -> str:
    """``exit code 1``, ``killed by SIGKILL (signal 9)`` (Popen's negative codes)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by {name} (signal {-code})"
    return f"exit code {code}"


@dataclass
class Pending:
    """A child waiting for its restart."""

    name: str
    due: float
    delay: float
    restart: int


class Restarts:
    """Which children wait for a restart, and until when."""

    def __init__(self, policy: RestartPolicy | None = None, *, kept_notes: int = 5) -> None:
        self.policy = policy or RestartPolicy()
        self._delays: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self.pending: dict[str, Pending] = {}
        #: the latest lines about exits and restarts, for the table
        self.notes: deque[str] = deque(maxlen=kept_notes)

    def exited(self, name: str, *, uptime: float, now: float) -> Pending:
        """Plan the restart of ``name``, which exited after ``uptime`` s, at ``now``."""
        found = self.pending.get(name)
        if found is not None:
            return found
        delay = self.policy.delay(self._delays.get(name), uptime)
        self._delays[name] = delay
        self._counts[name] = self._counts.get(name, 0) + 1
        planned = Pending(name, now + delay, delay, self._counts[name])
        self.pending[name] = planned
        return planned

    def due(self, now: float) -> list[Pending]:
        """The restarts due at ``now`` (taken off the pending list)."""
        ready = [p for p in self.pending.values() if p.due <= now]
        for planned in ready:
            del self.pending[planned.name]
        return sorted(ready, key=lambda p: (p.due, p.name))

    def next_due(self) -> float | None:
        """When the next restart is due (``None``: none waits)."""
        return min((p.due for p in self.pending.values()), default=None)

    def note(self, line: str) -> None:
        self.notes.append(line)


__all__ = ["Pending", "RestartPolicy", "Restarts", "exit_text"]
