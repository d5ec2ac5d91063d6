"""Saying so when a statement of ours waits on a lock.

A statement that waits behind another transaction's lock (a ``LOCK TABLE``,
a long migration, a row held by a stalled claim) shows nothing: it is simply
slow, up to its statement timeout. :class:`LockWatch` notes the statements
each thread of the process is running (SQLAlchemy's cursor events, and the
start guard's held connections) and, when one has run for ``after``
seconds, asks the server what that session is doing, on a short
connection of its own. If it waits on a lock, one warning says so::

    a statement waited 5.0 s for a lock on table task, held by pid 4242
    (swh-scheduler-cli, idle in transaction: LOCK TABLE task ...); it waits
    on, up to its statement timeout: SELECT min(task.next_run) ...

The statement itself is left alone (it waits on, up to its statement
timeout); each is reported at most once, and one that is slow without
waiting on a lock is looked at again every ``after`` seconds. Nothing is
asked of the server while every statement ends within ``after``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: what the server says of the sessions we wait in: the tables (or the kind
#: of lock) waited for, and each session that blocks them
PROBE = """
SELECT a.pid,
       coalesce(t.tables, ''),
       coalesce(t.kinds, ''),
       b.pid,
       coalesce(b.application_name, ''),
       coalesce(b.state, ''),
       left(regexp_replace(coalesce(b.query, ''), '\\s+', ' ', 'g'), 200)
FROM pg_stat_activity a
LEFT JOIN LATERAL (
    SELECT string_agg(DISTINCT l.relation::regclass::text, ', ')
               FILTER (WHERE l.relation IS NOT NULL) AS tables,
           string_agg(DISTINCT l.locktype, ', ') FILTER (WHERE NOT l.granted) AS kinds
    FROM pg_locks l
    WHERE l.pid = a.pid AND (NOT l.granted OR l.locktype = 'tuple')
) t ON true
LEFT JOIN LATERAL unnest(pg_blocking_pids(a.pid)) AS blocker(pid) ON true
LEFT JOIN pg_stat_activity b ON b.pid = blocker.pid
WHERE a.pid = ANY(%s) AND a.wait_event_type = 'Lock'
ORDER BY a.pid, b.pid
"""


@dataclass
class _Running:
    """A statement under way in one thread."""

    backend_pid: int
    statement: str
    started: float
    #: when to ask the server about it (again)
    check_at: float
    reported: bool = False


@dataclass(frozen=True)
class Blocker:
    pid: int
    application_name: str
    state: str
    query: str


@dataclass(frozen=True)
class LockWait:
    """What the server said of a session waiting on a lock."""

    backend_pid: int
    tables: str
    kinds: str
    blockers: tuple[Blocker, ...]


def describe(wait: LockWait, waited: float, statement: str) -> str:
    """The warning's text for ``wait``, ``waited`` seconds long."""
    what = f"table {wait.tables}" if wait.tables else f"a lock ({wait.kinds or 'unknown'})"
    holders = (
        "; ".join(
            f"pid {b.pid} ({b.application_name or 'no name'}, {b.state or 'unknown'}: {b.query})"
            for b in wait.blockers
        )
        or "a session the server did not name"
    )
    head = " ".join(statement.split())[:200]
    return (
        f"a statement waited {waited:.1f} s for a lock on {what}, held by {holders}; "
        f"it waits on, up to its statement timeout: {head}"
    )


def read_waits(connection: Any, pids: Sequence[int]) -> dict[int, LockWait]:
    """The sessions among ``pids`` that wait on a lock, read on ``connection``
    (a DB-API connection in autocommit)."""
    rows = connection.execute(PROBE, (list(pids),)).fetchall()
    found: dict[int, LockWait] = {}
    for pid, tables, kinds, blocker, name, state, query in rows:
        wait = found.get(pid) or LockWait(pid, tables, kinds, ())
        if blocker is not None:
            holder = Blocker(blocker, name, state, query)
            wait = LockWait(pid, tables, kinds, (*wait.blockers, holder))
        found[pid] = wait
    return found


class LockWatch:
    """Watches the statements of this process (module doc).

    ``connect()`` opens the short connection the server is asked on (a
    DB-API connection; closed after each look); ``after``: seconds."""

    def __init__(
        self,
        connect: Callable[[], Any],
        after: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self.after = after
        self._clock = clock
        self._cond = threading.Condition()
        self._running: dict[int, _Running] = {}
        self._pid = 0
        #: when the watching thread wakes up next (monotonic)
        self._wake_at = float("inf")
        _WATCHES.add(self)

    def _after_fork(self) -> None:
        """In a child process: nothing of the parent's (its thread is gone,
        its lock may have been held by another of its threads)."""
        self._cond = threading.Condition()
        self._running = {}
        self._pid = 0
        self._wake_at = float("inf")

    # -- the statements' side (called by the thread that runs each one) ----------

    def begin(self, backend_pid: int, statement: str) -> None:
        """This thread starts ``statement`` in session ``backend_pid``."""
        now = self._clock()
        entry = _Running(backend_pid, statement, now, now + self.after)
        with self._cond:
            if not self._pid:  # first use in this process (reset in a fork's child)
                self._pid = os.getpid()
                threading.Thread(target=self._watch, name="lock-watch", daemon=True).start()
            self._running[threading.get_ident()] = entry
            if entry.check_at < self._wake_at:
                self._cond.notify()

    def end(self) -> None:
        """This thread's statement is over."""
        with self._cond:
            self._running.pop(threading.get_ident(), None)

    # -- the watching thread ---------------------------------------------------

    def _due(self) -> list[_Running]:
        """Wait until some statement is due a look; those that are."""
        with self._cond:
            while True:
                now = self._clock()
                waiting = [e for e in self._running.values() if not e.reported]
                due = [e for e in waiting if e.check_at <= now]
                if due:
                    self._wake_at = now
                    return due
                self._wake_at = min((e.check_at for e in waiting), default=float("inf"))
                self._cond.wait(None if not waiting else self._wake_at - now)

    def _watch(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            self.look(self._due())

    def look(self, due: list[_Running]) -> None:
        """Ask the server about ``due`` and report those that wait on a lock."""
        try:
            connection = self._connect()
            try:
                waits = read_waits(connection, sorted({e.backend_pid for e in due}))
            finally:
                with contextlib.suppress(Exception):
                    connection.close()
        except Exception as error:  # the server is busy or away: say what we know
            waits = None
            reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        now = self._clock()
        with self._cond:
            for entry in due:
                entry.check_at = now + self.after
                if waits is None:
                    entry.reported = True
                    logger.warning(
                        "a statement has run %.1f s (whether it waits on a lock could "
                        "not be read: %s): %s",
                        now - entry.started,
                        reason,
                        " ".join(entry.statement.split())[:200],
                    )
                elif entry.backend_pid in waits:
                    entry.reported = True
                    wait = waits[entry.backend_pid]
                    logger.warning("%s", describe(wait, now - entry.started, entry.statement))


#: every watch of this process, made ready for a fork's child
_WATCHES: weakref.WeakSet[LockWatch] = weakref.WeakSet()


def _reset_in_child() -> None:
    for watch in list(_WATCHES):
        watch._after_fork()


os.register_at_fork(after_in_child=_reset_in_child)

__all__ = ["Blocker", "LockWait", "LockWatch", "describe", "read_waits"]
