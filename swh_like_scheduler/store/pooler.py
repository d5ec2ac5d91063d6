"""Running behind a connection pooler in transaction mode (PgBouncer).

A pooler in transaction mode lends a client a server connection for one
transaction, then gives it to another client. Whatever a session keeps
between transactions is then lost, or worse, found by someone else: a
``SET`` without ``LOCAL``, a prepared statement, a ``LISTEN``, a lock held
outside a transaction. PgBouncer also refuses, at connection time, the
``options`` startup parameter that carries our session bounds to a
direct server (:mod:`.session`).

The database URL says that a pooler is in the way, with query parameters
that the store reads and takes out of the URL before the driver sees it::

    postgresql://swh@pgbouncer:6432/swh?pooler=transaction
    postgresql://swh@pgbouncer:6432/swh?pooler=transaction&direct_host=db1&direct_port=5432

``pooler=transaction`` (right behind a pooler in session mode too): every
connection of the store (its pool, the start guard's held connections, the
lock watch's, the runner's wake-ups)

- sends no ``options`` startup parameter (not even ``PGOPTIONS``'s);
- sets the session's bounds (``statement_timeout``,
  ``idle_in_transaction_session_timeout``, the ``-c`` settings of the
  URL's ``options``) and the UTC time zone at the start of each
  transaction, for that transaction only (``set_config(..., true)``), and
  never with a session ``SET``; a statement that would run alone in
  autocommit runs in a transaction of its own so that they apply;
- never prepares a statement on the server (psycopg's
  ``prepare_threshold`` is off, the start guard's statement is not
  prepared);
- the runner's ``LISTEN`` wake-ups connect to PostgreSQL itself when
  ``direct_host`` (and ``direct_port``) give its address (the same user,
  password and database), with the full session bounds; without them the
  runner polls (a pass every second when idle). Writers' ``NOTIFY`` goes
  through the pooler either way (it is sent at commit).

The TCP settings of the server's socket (``tcp_keepalives_*``,
``tcp_user_timeout``) belong to the pooler's server connections, not to
ours: they are left to the pooler's own (``tcp_keepalive``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput

#: the URL's query parameter that names the pooler's mode
POOLER = "pooler"
#: PostgreSQL's own address, for what cannot go through the pooler
DIRECT_HOST = "direct_host"
DIRECT_PORT = "direct_port"
#: the modes we run behind
MODES = ("transaction",)
#: the time zone of every session of ours (see ``engine.make_engine``)
TIME_ZONE = "UTC"
#: server settings of the server's socket: the pooler's business, not ours
_SOCKET_SETTINGS = (
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "tcp_keepalives_count",
    "tcp_user_timeout",
)


@dataclass(frozen=True)
class Pooler:
    """What the URL says of the pooler in front of PostgreSQL."""

    mode: str = "transaction"
    #: PostgreSQL's own host and port, for the ``LISTEN`` wake-ups (``None``: poll)
    direct_host: str | None = None
    direct_port: int | None = None

    @property
    def has_direct(self) -> bool:
        return self.direct_host is not None or self.direct_port is not None


def split_pooler(url: sa.URL) -> tuple[sa.URL, Pooler | None]:
    """``url`` without the pooler's query parameters, and what they say
    (``None``: no pooler). A value that is not understood is refused,
    naming it, before any connection is tried."""
    query = dict(url.query)
    given = {name: query.pop(name) for name in (POOLER, DIRECT_HOST, DIRECT_PORT) if name in query}
    if not given:
        return url, None
    values = {name: _single(name, value) for name, value in given.items()}
    if url.get_backend_name() != "postgresql":
        raise InvalidInput(
            "db-url", f"?{next(iter(values))}= is for a PostgreSQL URL behind a pooler"
        )
    mode = values.get(POOLER)
    if mode is None:
        raise InvalidInput(
            "db-url",
            f"?{next(iter(values))}= goes with ?pooler=transaction "
            "(it is where the wake-ups reach PostgreSQL past the pooler)",
        )
    if mode not in MODES:
        raise InvalidInput(
            "db-url",
            f"pooler={mode!r} is not understood: use pooler=transaction behind PgBouncer "
            "in transaction or session mode (statement mode cannot run our transactions)",
        )
    port = values.get(DIRECT_PORT)
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        raise InvalidInput("db-url", f"direct_port={port!r} is not a port number")
    pooler = Pooler(
        mode=mode,
        direct_host=values.get(DIRECT_HOST) or None,
        direct_port=int(port) if port else None,
    )
    return url.set(query=query), pooler


def _single(name: str, value: str | tuple[str, ...]) -> str:
    if isinstance(value, tuple):
        if len(set(value)) != 1:
            raise InvalidInput("db-url", f"{name} is given {len(value)} times with other values")
        value = value[0]
    return value.strip()


def transaction_settings(server_settings: Mapping[str, str]) -> dict[str, str]:
    """The settings set at the start of each transaction behind a pooler:
    the UTC time zone, then ``server_settings`` (those a direct session
    gets in ``options``), less the server socket's."""
    settings = {"TimeZone": TIME_ZONE}
    settings.update(
        (name, value) for name, value in server_settings.items() if name not in _SOCKET_SETTINGS
    )
    return settings


def settings_statement(settings: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """One ``SELECT`` (psycopg's ``%(name)s`` placeholders) that sets
    ``settings`` for the current transaction only and returns the server
    process's id last (the lock watch asks about it), with its values."""
    calls = []
    values: dict[str, str] = {}
    for position, (name, value) in enumerate(settings.items()):
        calls.append(f"set_config(%(n{position})s, %(v{position})s, true)")
        values[f"n{position}"] = name
        values[f"v{position}"] = value
    return f"SELECT {', '.join([*calls, 'pg_backend_pid()'])}", values


def pooled_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The connection parameters of a session through the pooler: those
    of a direct one (``parameters``, from :func:`.session.bounded_parameters`)
    without startup ``options`` (an empty value, so that libpq does not send
    ``PGOPTIONS`` either), and no prepared statement made by psycopg."""
    pooled = dict(parameters)
    pooled["options"] = ""
    pooled["prepare_threshold"] = None
    return pooled


def direct_parameters(parameters: Mapping[str, Any], pooler: Pooler) -> dict[str, Any]:
    """The connection parameters of a session opened on PostgreSQL itself,
    past the pooler (``parameters``: a direct session's, with its
    ``options``): the same, at ``direct_host``:``direct_port``."""
    direct = dict(parameters)
    if pooler.direct_host is not None:
        direct["host"] = pooler.direct_host
        direct.pop("hostaddr", None)
    if pooler.direct_port is not None:
        direct["port"] = pooler.direct_port
    return direct


__all__ = [
    "DIRECT_HOST",
    "DIRECT_PORT",
    "POOLER",
    "Pooler",
    "direct_parameters",
    "pooled_parameters",
    "settings_statement",
    "split_pooler",
    "transaction_settings",
]
