"""Waking the runner when a task becomes ready now, instead of at the next poll.

Writers call :func:`notify` (the store does it when it creates, respawns or
enables tasks); a runner waits on a :class:`Waker`. On PostgreSQL this is
``LISTEN``/``NOTIFY`` on one channel; elsewhere the runner simply sleeps.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

import sqlalchemy as sa

from ..store.interface import READY_CHANNEL as CHANNEL

logger = logging.getLogger(__name__)


class Waker(Protocol):
    def wait(self, seconds: float) -> bool:
        """Block up to ``seconds``; True if woken early (work may be ready)."""
        ...

    def close(self) -> None: ...


class SleepWaker:
    """No notification channel: poll, waking at least every ``poll`` seconds.

    Used with SQLite (the embedded default, one runner next to its database),
    where a pass that finds nothing ready costs one indexed query, so polling
    every second keeps "ready now" tasks dispatched within about a second.
    """

    def __init__(self, stop: threading.Event | None = None, *, poll: float = 1.0) -> None:
        self._stop = stop or threading.Event()
        self._poll = poll

    def wait(self, seconds: float) -> bool:
        self._stop.wait(min(seconds, self._poll))
        return False

    def close(self) -> None:
        self._stop.set()


class PostgresWaker:
    """``LISTEN`` on a dedicated connection; any notification wakes the runner."""

    def __init__(self, url: sa.URL, stop: threading.Event | None = None) -> None:
        import psycopg  # PostgreSQL only (the `postgresql` extra): not at import time

        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute(f"LISTEN {CHANNEL}")
        self._stop = stop or threading.Event()

    def wait(self, seconds: float) -> bool:
        if self._stop.is_set():
            return False
        # wake at least every second to notice a stop request
        remaining = seconds
        while remaining > 0 and not self._stop.is_set():
            step = min(1.0, remaining)
            # (the generator holds the connection: finish it before draining)
            woken = any(True for _ in self._conn.notifies(timeout=step, stop_after=1))
            if woken:
                for _ in self._conn.notifies(timeout=0):
                    pass  # several writers may have announced at once: one pass serves all
                return True
            remaining -= step
        return False

    def close(self) -> None:
        self._stop.set()
        self._conn.close()


def waker_for(engine: sa.Engine, stop: threading.Event | None = None) -> Waker:
    if engine.dialect.name == "postgresql":
        import psycopg

        try:
            return PostgresWaker(engine.url, stop)
        except psycopg.Error as error:
            logger.warning("cannot LISTEN for new tasks (%s); polling instead", error)
    return SleepWaker(stop)
