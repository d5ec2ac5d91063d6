"""Waking the runner when a task becomes ready now, instead of at the next poll.

Writers call :func:`notify` (the store does it when it creates, respawns or
enables tasks); a runner waits on a :class:`Waker`. On PostgreSQL this is
``LISTEN``/``NOTIFY`` on one channel; elsewhere the runner simply sleeps.

Behind a pooler in transaction mode (``?pooler=transaction``:
:mod:`~swh_like_scheduler.store.pooler`) a ``LISTEN`` would be made on a
server connection the pooler lends to others next: the ``LISTEN``
connection goes to PostgreSQL itself when the URL gives its address
(``direct_host``, ``direct_port``), and the runner polls otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Protocol

import sqlalchemy as sa

from ..store.engine import connect_parameters, pooler_of
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
    """``LISTEN`` on a dedicated connection; any notification wakes the runner.

    The connection is opened like the engine's own, with its session bounds
    (:func:`~swh_like_scheduler.store.engine.connect_parameters`): a database
    host that vanishes is noticed by the keepalives. Behind a pooler, it goes
    to PostgreSQL's own address the URL gives (``direct``).

    A lost connection (a database restart, a terminated backend) never
    stops the runner: one line is logged, the waker sleeps like
    :class:`SleepWaker` and connects again (every ``retry`` seconds at most);
    once back it wakes the runner at once, since notifications sent during
    the outage were lost.
    """

    def __init__(
        self,
        engine: sa.Engine,
        stop: threading.Event | None = None,
        *,
        retry: float = 2.0,
        direct: bool = False,
    ) -> None:
        import psycopg  # PostgreSQL only (the `postgresql` extra): not at import time

        self._psycopg = psycopg
        self._args, self._parameters = connect_parameters(engine, direct=direct)
        self._stop = stop or threading.Event()
        self._retry = retry
        self._retry_at = 0.0
        self._conn: Any = None
        self._connect()

    def _connect(self) -> None:
        conn = self._psycopg.Connection.connect(*self._args, **self._parameters, autocommit=True)
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _lost(self, error: BaseException) -> None:
        logger.warning(
            "the LISTEN connection for new tasks was lost (%s); polling until it is back",
            str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
        )
        with contextlib.suppress(Exception):
            self._conn.close()
        self._conn = None
        self._retry_at = time.monotonic() + self._retry

    def _reconnect(self) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        try:
            self._connect()
        except self._psycopg.Error:
            self._retry_at = time.monotonic() + self._retry
            return False
        logger.warning("the LISTEN connection for new tasks is back")
        return True

    def wait(self, seconds: float) -> bool:
        if self._stop.is_set():
            return False
        if self._conn is None:
            if self._reconnect():
                return True  # what was announced meanwhile is lost: look now
            self._stop.wait(min(seconds, self._retry))
            return False
        try:
            return self._listen(seconds)
        except self._psycopg.Error as error:
            self._lost(error)
            return False

    def _listen(self, seconds: float) -> bool:
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
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()


def waker_for(engine: sa.Engine, stop: threading.Event | None = None) -> Waker:
    """How a runner on ``engine`` waits: ``LISTEN`` on PostgreSQL (past a
    pooler when the URL gives PostgreSQL's own address), polling otherwise."""
    if engine.dialect.name != "postgresql":
        return SleepWaker(stop)
    import psycopg

    pooler = pooler_of(engine)
    if pooler is not None and not pooler.has_direct:
        logger.info(
            "behind a pooler (pooler=%s): new tasks are found by polling every second "
            "(direct_host / direct_port in the database URL: LISTEN on PostgreSQL itself)",
            pooler.mode,
        )
        return SleepWaker(stop)
    try:
        return PostgresWaker(engine, stop, direct=pooler is not None)
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = " on PostgreSQL past the pooler (direct_host / direct_port)" if pooler else ""
        logger.warning("cannot LISTEN for new tasks%s (%s); polling instead", where, reason)
    return SleepWaker(stop)
