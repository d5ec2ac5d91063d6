"""Broker connections with bounded waits.

A runner must never hang on a broker that is down or unreachable: connecting
is retried a few times within a total time limit, and sockets of connections
opened here get read/write timeouts unless the app's
``broker_transport_options`` already chose some.  A connection passed in by
the caller is used as it is (only connecting to it is bounded) and is never
closed here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from celery import Celery
from kombu import Connection

#: Connection attempts after the first one fails.
CONNECT_RETRIES = 2
#: Upper bound, in seconds, of the time spent connecting (all attempts).
CONNECT_TIMEOUT = 10.0
#: Read/write timeout, in seconds, of the sockets of connections opened here.
SOCKET_TIMEOUT = 10.0

# Transport option names of the socket timeouts, per kombu driver type.
_SOCKET_TIMEOUT_OPTIONS: dict[str, tuple[str, ...]] = {
    "redis": ("socket_timeout", "socket_connect_timeout"),
    "amqp": ("read_timeout", "write_timeout"),
}


def open_connection(app: Celery) -> Connection:
    """A new, not yet connected, write connection to ``app``'s broker."""
    connection: Connection = app.connection_for_write()
    configured = app.conf.broker_transport_options or {}
    options: dict[str, Any] = dict(connection.transport_options or {})
    for option in _SOCKET_TIMEOUT_OPTIONS.get(connection.transport.driver_type, ()):
        if option not in configured:
            options[option] = SOCKET_TIMEOUT
    connection.transport_options = options
    return connection


def connect(connection: Connection) -> None:
    """Connect (if needed) with bounded retries; raises the transport's error."""
    connection.ensure_connection(
        max_retries=CONNECT_RETRIES,
        interval_start=0,
        interval_step=0.5,
        interval_max=1,
        timeout=CONNECT_TIMEOUT,
    )


@contextmanager
def connection_scope(app: Celery, connection: Connection | None) -> Iterator[Connection]:
    """``connection`` if given, else a new one closed on exit; connected."""
    if connection is not None:
        connect(connection)
        yield connection
        return
    owned = open_connection(app)
    try:
        connect(owned)
        yield owned
    finally:
        with suppress(Exception):
            owned.release()


def describe(app: Celery, connection: Connection | None) -> str:
    """The broker URL (without its password) of ``connection``, else of
    ``app``, for error messages; no connection is made."""
    try:
        if connection is None:
            connection = app.connection_for_write()
        return str(connection.as_uri())
    except Exception:
        return "the broker"


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception (its cause's, for wrapped kombu errors)."""
    text = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {text}"
