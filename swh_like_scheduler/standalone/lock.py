"""One ``standalone`` per database: a named lock in the database itself.

Two ``swh scheduler standalone`` on one database would each run a listener
that takes the other's worker (same name, another process) for a restart
and ends its runs, and each a runner: tasks would run twice. So standalone
takes the store's named lock :data:`STANDALONE_LOCK` (``scheduler_lock``,
with an expiry on the database clock, as the monitor's) before it starts
anything, renews it while it runs and gives it up when it stops.

The lock's holder is ``host:pid:random``
(:func:`~swh_like_scheduler.domain.records.default_holder`): a second standalone
refuses with the first one's pid and host. A holder that crashed (``kill
-9``: nothing released the lock) does not block the next one: on the same
host, a holder whose process is gone (or is no standalone any more: its pid
was reused) is taken over at once; on another host, the lock is free once
its expiry on the database clock passed (:data:`LOCK_TTL` after its last
renewal).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from ..domain.exceptions import SchedulerError
from ..domain.records import LockState, default_holder
from ..policy.times import fmt_instant
from ..store import SchedulerStore

logger = logging.getLogger(__name__)

#: The lock's name in ``scheduler_lock``.
STANDALONE_LOCK = "standalone"
#: How long the lock outlives its last renewal (another host's standalone
#: waits this long after a crash).
LOCK_TTL = timedelta(seconds=60)
#: How often a running standalone renews it.
RENEW_EVERY = timedelta(seconds=10)


@dataclass(frozen=True)
class Holder:
    """Who holds the lock: ``host:pid:token``."""

    host: str
    pid: int
    token: str

    @classmethod
    def parse(cls, text: str | None) -> Holder | None:
        """The holder named by ``text``, ``None`` when it is not of that form."""
        if not text:
            return None
        parts = text.rsplit(":", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])


def process_is_standalone(pid: int) -> bool:
    """Whether ``pid`` is a live process of this host that could be a
    standalone (on Linux: its command line says ``standalone``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, cannot tell more
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"standalone" in cmdline.read_bytes()
    except OSError:  # no /proc (not Linux), or gone meanwhile
        return True


def holder_gone(holder: Holder | None, *, host: str, alive: Callable[[int], bool]) -> bool:
    """Whether the lock's holder is certainly gone: it ran on this ``host``
    and its process is not ``alive`` any more. A holder of another host (or
    of an unknown form) is left to the lock's expiry."""
    return holder is not None and holder.host == host and not alive(holder.pid)


class StandaloneRunning(SchedulerError):
    """Another standalone holds the database's lock."""


def refusal(state: LockState, url: str) -> str:
    """What a second standalone says when the lock is held."""
    holder = Holder.parse(state.holder)
    who = (
        f"pid {holder.pid} on host {holder.host}"
        if holder is not None
        else f"holder {state.holder!r}"
    )
    until = f" until {fmt_instant(state.expires_at)}" if state.expires_at is not None else ""
    return (
        f"another `swh scheduler standalone` ({who}) runs on this database ({url}): "
        f"its lock is held{until} (database clock) and renewed every "
        f"{int(RENEW_EVERY.total_seconds())} s while it runs. Stop it first (Ctrl-C), or "
        f"give this one another --db-url. If it is gone without releasing the lock (its "
        f"host stopped), the lock frees itself {int(LOCK_TTL.total_seconds())} s after "
        f"its last renewal."
    )


class DatabaseLock:
    """The standalone's lock on its database: :meth:`take` once, :meth:`renew`
    every :data:`RENEW_EVERY`, :meth:`release` at the end."""

    def __init__(
        self,
        store: SchedulerStore,
        url: str,
        *,
        holder: str | None = None,
        ttl: timedelta = LOCK_TTL,
        host: str | None = None,
        alive: Callable[[int], bool] = process_is_standalone,
    ) -> None:
        self.store = store
        self.url = url
        self.holder = holder or default_holder()
        self.ttl = ttl
        self.host = host or socket.gethostname()
        self.alive = alive
        self.held = False

    def take(self) -> LockState:
        """Take the lock, or raise :class:`StandaloneRunning` saying who holds it."""
        state = self.store.acquire_lock(STANDALONE_LOCK, holder=self.holder, ttl=self.ttl)
        if not state.held:
            previous = Holder.parse(state.holder)
            if holder_gone(previous, host=self.host, alive=self.alive) and state.holder:
                # released only if it is still that holder's: of two newcomers,
                # one takes it, the other sees it held by the winner
                self.store.release_lock(STANDALONE_LOCK, holder=state.holder)
                logger.warning(
                    "took over the database lock of a standalone that is gone (%s)", state.holder
                )
                state = self.store.acquire_lock(STANDALONE_LOCK, holder=self.holder, ttl=self.ttl)
        if not state.held:
            raise StandaloneRunning(refusal(state, self.url))
        self.held = True
        return state

    def renew(self) -> bool:
        """Renew the lock; False when another process holds it now (ours
        expired: this process was stopped, or could not reach the database,
        for longer than the lock's lifetime)."""
        state = self.store.acquire_lock(STANDALONE_LOCK, holder=self.holder, ttl=self.ttl)
        self.held = state.held
        return state.held

    def release(self) -> None:
        """Give the lock up (errors are logged: its expiry frees it anyway)."""
        if not self.held:
            return
        try:
            self.store.release_lock(STANDALONE_LOCK, holder=self.holder)
        except SchedulerError as error:
            logger.warning("could not release the database lock: %s", error)
        self.held = False


__all__ = [
    "LOCK_TTL",
    "RENEW_EVERY",
    "STANDALONE_LOCK",
    "DatabaseLock",
    "Holder",
    "StandaloneRunning",
    "holder_gone",
    "process_is_standalone",
    "refusal",
]
