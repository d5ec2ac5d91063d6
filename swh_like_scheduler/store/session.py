"""The bounds every PostgreSQL session of ours is opened with.

A process that stops (SIGSTOP, a frozen VM, a host cut off) must not hold
locks, rows or connections for longer than a known time. Every PostgreSQL
connection the store opens (its pool, the start guard's held connections,
the runner's ``LISTEN`` connection) is given, at connection time and by
libpq itself:

- server side (the ``options`` startup parameter, ``-c name=value``): a
  ``statement_timeout`` for every statement, reads included; an
  ``idle_in_transaction_session_timeout``, so a transaction whose client
  stopped talking is ended by the server (its locks released); TCP
  keepalives and ``tcp_user_timeout`` on the server's socket, so a dead or
  frozen client host is noticed in seconds, not after the kernel's two hours;
- client side (libpq connection parameters): ``keepalives`` and
  ``tcp_user_timeout`` (a dead server is noticed too), a ``connect_timeout``,
  and ``fallback_application_name`` naming the daemon (``swh-scheduler-runner``
  ...), so ``pg_stat_activity`` tells them apart.

What the user wrote wins: a parameter in the database URL's query
(``?keepalives_idle=60``, ``?application_name=...``, a ``-c name=value`` of
``?options=...``) is kept as written, and so are the ``-c`` settings of the
``PGOPTIONS`` environment variable and ``PGAPPNAME`` (libpq's own); only
what neither names is added. The values are checked here, so a mistyped one
is refused with a message naming it, before any connection is tried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from ..domain.exceptions import InvalidInput

#: the daemons, each named ``swh-scheduler-<role>`` in ``pg_stat_activity``
DAEMON_ROLES = ("runner", "listener", "monitor", "api", "worker", "beat", "standalone")
#: a person's command (``task schedule``, ``db upgrade``...): see :meth:`SessionBounds.for_role`
CLI_ROLE = "cli"
APPLICATION_PREFIX = "swh-scheduler"


@dataclass(frozen=True)
class SessionBounds:
    """The bounds of one process's PostgreSQL sessions (module doc).

    ``None`` (or a zero duration) means no bound for the three timeouts."""

    #: ``fallback_application_name``: the URL's ``application_name`` or ``PGAPPNAME`` win
    application_name: str = APPLICATION_PREFIX
    #: ``statement_timeout`` of every statement of the session
    statement_timeout: timedelta | None = timedelta(seconds=30)
    #: ``idle_in_transaction_session_timeout``
    idle_in_transaction_timeout: timedelta | None = timedelta(seconds=30)
    #: the bound of the statements that legitimately run long (statistics,
    #: schedule-health counts, measured loads): set for their transaction
    #: only, never lower than the session's own bound
    maintenance_timeout: timedelta | None = timedelta(minutes=10)
    #: a statement waiting this long on a lock is logged once (:mod:`.lockwatch`)
    lock_wait_log: timedelta | None = timedelta(seconds=5)
    #: seconds of silence before the first keepalive probe, between probes,
    #: and probes lost before the connection is dropped (both ends)
    keepalives_idle: int = 20
    keepalives_interval: int = 5
    keepalives_count: int = 3
    #: sent data unacknowledged this long drops the connection (both ends)
    tcp_user_timeout: timedelta = timedelta(seconds=30)
    #: seconds a connection attempt may take
    connect_timeout: int = 10

    @classmethod
    def for_role(cls, role: str | None) -> SessionBounds:
        """The bounds of a daemon ``role`` (:data:`DAEMON_ROLES`), of the
        command line (:data:`CLI_ROLE`: no statement timeout, for bulk
        commands and migrations that legitimately run long, and ten minutes
        idle in a transaction, for an import reading a slow input), or of a
        library user (``None``: the daemons' bounds)."""
        if role is None:
            return cls()
        if role not in (*DAEMON_ROLES, CLI_ROLE):
            raise ValueError(f"unknown role {role!r}")
        bounds = cls(application_name=f"{APPLICATION_PREFIX}-{role}")
        if role == CLI_ROLE:
            return replace(
                bounds,
                statement_timeout=None,
                idle_in_transaction_timeout=timedelta(minutes=10),
            )
        return bounds

    def libpq_parameters(self) -> dict[str, str]:
        """The client side: libpq connection parameters."""
        return {
            "fallback_application_name": self.application_name,
            "connect_timeout": str(self.connect_timeout),
            "keepalives": "1",
            "keepalives_idle": str(self.keepalives_idle),
            "keepalives_interval": str(self.keepalives_interval),
            "keepalives_count": str(self.keepalives_count),
            "tcp_user_timeout": str(_ms(self.tcp_user_timeout)),
        }

    def server_settings(self) -> dict[str, str]:
        """The server side: ``-c`` settings of the ``options`` parameter."""
        return {
            "statement_timeout": f"{_ms(self.statement_timeout)}ms",
            "idle_in_transaction_session_timeout": f"{_ms(self.idle_in_transaction_timeout)}ms",
            "tcp_keepalives_idle": str(self.keepalives_idle),
            "tcp_keepalives_interval": str(self.keepalives_interval),
            "tcp_keepalives_count": str(self.keepalives_count),
            "tcp_user_timeout": f"{_ms(self.tcp_user_timeout)}ms",
        }


@dataclass(frozen=True)
class PoolSize:
    """An engine's pool: the connections it keeps once opened (``size``) and
    those it opens beyond them at a burst (``overflow``, closed when given
    back). A thread that finds all of them taken waits (30 s at most)."""

    size: int
    overflow: int = 0

    @property
    def most(self) -> int:
        return self.size + self.overflow


#: the connections each daemon runs statements on at once, pooled (the
#: section "Connections and timeouts" of docs/howto/connections.md counts them, with
#: the connections kept outside the pool)
def daemon_pool(role: str, *, claimers: int = 2, lanes: int = 4, api: int = 10) -> PoolSize:
    """The pool of a daemon ``role``: the runner's claims and the
    publisher's marks (``claimers`` + 1; two more at a burst, for the Redis
    index's rebuilds), the listener's ``lanes`` and its catch-up (+ 1 at a
    burst), the API's ``api`` connections, shared by its request threads
    and its background counts, a worker process's rare writes outside the
    start (its starts run on held connections, one per thread), the
    monitor's and standalone's one (+ 2)."""
    if role in ("runner", "beat"):
        return PoolSize(claimers + 1, 2)
    if role == "listener":
        return PoolSize(lanes + 1, 1)
    if role == "api":
        return PoolSize(api, 0)
    if role == "worker":
        return PoolSize(1, 4)
    if role in ("monitor", "standalone"):
        return PoolSize(1, 2)
    raise ValueError(f"unknown daemon {role!r}")


def _ms(value: timedelta | None) -> int:
    """Milliseconds of ``value``, 0 (PostgreSQL's "no bound") for ``None``."""
    if value is None:
        return 0
    return max(0, round(value.total_seconds() * 1000))


#: libpq parameters whose value must be a whole number (seconds, or ms)
_WHOLE_NUMBERS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
#: server settings given in ``options`` that we read or set, and their
#: unit when written without one
_DURATIONS = {
    "statement_timeout": "ms",
    "idle_in_transaction_session_timeout": "ms",
    "lock_timeout": "ms",
    "tcp_user_timeout": "ms",
    "tcp_keepalives_idle": "s",
    "tcp_keepalives_interval": "s",
    "tcp_keepalives_count": "",
}
_UNIT_MS = {
    "us": 0.001,
    "ms": 1.0,
    "s": 1000.0,
    "min": 60_000.0,
    "h": 3_600_000.0,
    "d": 86_400_000.0,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def duration_ms(name: str, value: str) -> float:
    """The milliseconds a PostgreSQL duration setting ``name`` = ``value``
    stands for (``30s``, ``5min``, ``1500``, ``0``: no bound). A value
    PostgreSQL would refuse is refused here, naming the setting."""
    default_unit = _DURATIONS.get(name, "ms")
    found = _DURATION.match(value.strip("'\"").lower())
    unit = found.group(2) if found else ""
    if found is None or (unit and (unit not in _UNIT_MS or default_unit == "")):
        example = "a count (3)" if default_unit == "" else "a duration (30s, 5min; 0: none)"
        raise InvalidInput("db-url", f"options: {name}={value!r} is not {example}")
    scale = _UNIT_MS[unit or default_unit] if default_unit else 1.0
    return float(found.group(1)) * scale


def split_options(options: str) -> list[str]:
    """The words of a libpq ``options`` value (whitespace separates them; a
    backslash makes the next character part of the word)."""
    words: list[str] = []
    word: list[str] = []
    escaped = False
    for char in options:
        if escaped:
            word.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char.isspace():
            if word:
                words.append("".join(word))
                word = []
        else:
            word.append(char)
    if word:
        words.append("".join(word))
    return words


def named_settings(options: str) -> dict[str, str]:
    """The settings an ``options`` value gives (``-c name=value``,
    ``-cname=value`` or ``--name=value``), by name (dashes read as
    underscores, as PostgreSQL does); other words are left alone."""
    named: dict[str, str] = {}
    words = split_options(options)
    for position, word in enumerate(words):
        if word == "-c" and position + 1 < len(words):
            setting = words[position + 1]
        elif (word.startswith("-c") and len(word) > 2) or word.startswith("--"):
            setting = word[2:]
        else:
            continue
        name, equals, value = setting.partition("=")
        if equals:
            named[name.strip().lower().replace("-", "_")] = value
    return named


def bounded_parameters(
    given: Mapping[str, Any], bounds: SessionBounds, environ: Mapping[str, str]
) -> dict[str, Any]:
    """The connection parameters of a session: ``given`` (those of the
    user's URL, as the driver reads them) completed with ``bounds``.

    A parameter ``given`` names is kept; ``PGOPTIONS``/``PGAPPNAME`` in
    ``environ`` count as given (libpq would use them, and the URL's
    ``options`` replaces ``PGOPTIONS`` whole, so its settings are carried
    over). Raises :class:`InvalidInput` (field ``db-url``) for a value
    that is not a number or a duration where one is needed."""
    merged = dict(given)
    for name in _WHOLE_NUMBERS:
        value = merged.get(name)
        if value is not None and not str(value).strip().isdigit():
            raise InvalidInput("db-url", f"{name}={value!r} is not a whole number")
    for name, value in bounds.libpq_parameters().items():
        if name == "fallback_application_name" and environ.get("PGAPPNAME"):
            continue
        merged.setdefault(name, value)
    user_options = str(merged.get("options") or environ.get("PGOPTIONS") or "").strip()
    named = named_settings(user_options)
    for name, value in named.items():
        if name in _DURATIONS:
            duration_ms(name, value)
    added = [
        f"-c {name}={value}"
        for name, value in bounds.server_settings().items()
        if name not in named
    ]
    merged["options"] = " ".join(part for part in (user_options, *added) if part)
    return merged


def effective_timeout(parameters: Mapping[str, Any], name: str) -> float:
    """The milliseconds of the server setting ``name`` that ``parameters``
    (from :func:`bounded_parameters`) give the session; 0: no bound."""
    value = named_settings(str(parameters.get("options") or "")).get(name)
    return duration_ms(name, value) if value is not None else 0.0


__all__ = [
    "CLI_ROLE",
    "DAEMON_ROLES",
    "PoolSize",
    "SessionBounds",
    "bounded_parameters",
    "daemon_pool",
    "duration_ms",
    "effective_timeout",
    "named_settings",
    "split_options",
]
