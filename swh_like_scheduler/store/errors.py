"""Translation of driver errors into the scheduler's exception tree.

Nothing raised by SQLAlchemy, psycopg or sqlite3 leaves the store: callers
see a :class:`~swh_like_scheduler.domain.exceptions.SchedulerError` whose message
says what went wrong and what to do.

The cause is read from the server's SQLSTATE when there is one, and from
the message otherwise (a connection that failed has none; neither has
SQLite): a full disk, a pooler that refuses a startup parameter or lends a
prepared statement's session to others, a table that does not exist, a
refused login and a server out of reach are each named as what they are,
never one for another. A value the database refuses (SQLSTATE class 22,
an integer past 64 bits, more parameters than a statement takes) is the
caller's mistake (:class:`InvalidInput`), never an outage.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy.exc as sa_exc

from ..domain.exceptions import (
    Conflict,
    DiskFull,
    InvalidInput,
    PoolerMismatch,
    SchedulerError,
    SchemaMismatch,
    StatementTimeout,
    StoreError,
    StoreUnavailable,
)

#: where the documentation tells how to run behind PgBouncer
POOLER_DOCS = '"Behind PgBouncer" in docs/howto/connections.md'

#: SQLSTATE classes and codes (PostgreSQL's appendix A)
DISK_FULL = "53100"
DUPLICATE_PREPARED_STATEMENT = "42P05"
INVALID_STATEMENT_NAME = "26000"
UNDEFINED_TABLE = "42P01"
UNDEFINED_COLUMN = "42703"
TOO_MANY_CONNECTIONS = "53300"
LOGIN_REFUSED = ("28000", "28P01")
#: SQLSTATE class 22, a data exception: a value the statement cannot take
#: (a number past its column's range, a text that is no number or date)
DATA_EXCEPTION = "22"

_DISK_FULL = ("no space left on device", "database or disk is full", "disk full")
#: a missing table as SQLite and PostgreSQL word it (no SQLSTATE at hand)
_MISSING_TABLE = re.compile(r'no such table|relation "[^"]+" does not exist')
_PREPARED = re.compile(r'prepared statement "[^"]*" (already exists|does not exist)')
_STARTUP_PARAMETER = re.compile(r"unsupported startup parameter(?: in options)?:?\s*(\S+)?")
#: PgBouncer's own refusals, and what each means
_POOLER_UNAVAILABLE = {
    "pgbouncer cannot connect to server": "cannot reach PostgreSQL behind it",
    "server login has been failing": "cannot log in to PostgreSQL behind it",
    "no more connections allowed": "has no client connection left (max_client_conn)",
    "query_wait_timeout": "found no free server connection in time (query_wait_timeout)",
    "no such database": "has no such database in its [databases]",
}
_LOGIN = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "authentication failed",
    "no password supplied",
)
_UNREACHABLE = (
    "connection refused",
    "could not connect",
    "connection failed",
    "server closed the connection",
    "terminating connection",
    "unable to open database file",
    "could not translate host name",
    "timeout expired",
    "connection is closed",
    "the database system is",
    "no route to host",
    "name or service not known",
)

#: a statement with more parameters than the driver or the database takes
_TOO_MANY_PARAMETERS = (
    "number of parameters must be between",
    "too many sql variables",
    "expression tree is too large",
)

#: the server ended a connection that was working
_ENDED = ("server closed the connection", "terminating connection", "connection is closed")

#: the server or libpq refused a connection parameter or a setting of ``options``
_BAD_SETTING = (
    "invalid value for parameter",
    "unrecognized configuration parameter",
    "invalid connection option",
    "invalid integer value",
    "invalid uri query parameter",
)

_CONSTRAINT_MESSAGES = {
    "uq_task_key": "a task with this key already exists",
    "ux_task_identical": "an identical live task already exists",
    "uq_task_run_backend_id": "a run with this backend id already exists",
    "uq_task_run_task_id_slot": "this slot of the task was already dispatched",
    "fk_task_type_task_type": "unknown task type",
    "fk_task_run_task_id_task": "unknown task",
}


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


def _sqlstate(exc: BaseException) -> str:
    """The server's SQLSTATE of the driver's error (``""``: none, as for a
    connection that failed or a SQLite error)."""
    return str(getattr(getattr(exc, "orig", None), "sqlstate", None) or "")


def translate(exc: sa_exc.SQLAlchemyError, where: str) -> SchedulerError:
    """The scheduler error that tells the user what ``exc`` means."""
    detail = _describe(exc)
    lowered = detail.lower()
    if isinstance(exc, sa_exc.IntegrityError):
        for name, message in _CONSTRAINT_MESSAGES.items():
            if name in lowered:
                return Conflict(f"{where}: {message}")
        return Conflict(f"{where}: the database refused the change ({detail})")
    found = _named_cause(_sqlstate(exc), lowered, detail, where)
    if found is not None:
        return found
    if any(marker in lowered for marker in _BAD_SETTING):
        return InvalidInput("db-url", f"{where}: the database refused a setting ({detail})")
    # the caller's values, not an outage: a 4xx, never a 503
    if _sqlstate(exc).startswith(DATA_EXCEPTION) or isinstance(exc, sa_exc.DataError):
        return InvalidInput("arguments", f"{where}: the database refused a value ({detail})")
    if any(marker in lowered for marker in _TOO_MANY_PARAMETERS):
        return InvalidInput(
            "arguments", f"{where}: too many values for one statement; ask for fewer ({detail})"
        )
    if "statement timeout" in lowered:
        return StatementTimeout(
            f"{where}: cancelled after its time limit (statement_timeout); nothing was written"
        )
    if "canceling statement due to user request" in lowered:
        # a cancel request (pg_cancel_backend), or PostgreSQL's own statement
        # timeout when it fires as the statement ends (a very short limit):
        # the statement was cancelled, which writes nothing
        return StatementTimeout(
            f"{where}: cancelled (its time limit, or a cancel request); nothing was written"
        )
    if "no such column" in lowered or ("column" in lowered and "does not exist" in lowered):
        return _column_missing(where, detail)
    if _MISSING_TABLE.search(lowered):
        return _table_missing(where, detail)
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError) or any(
        marker in lowered for marker in _UNREACHABLE
    ):
        return _unavailable(where, detail, lowered)
    return StoreError(f"{where}: the database failed ({detail})")


def _named_cause(sqlstate: str, lowered: str, detail: str, where: str) -> SchedulerError | None:
    """The error of a cause that must be named as itself, before any
    reading of the message that could take it for another: a full disk,
    a pooler's refusal, a prepared statement lost or doubled by a pooler,
    a missing table, a refused login."""
    if sqlstate == DISK_FULL or any(marker in lowered for marker in _DISK_FULL):
        return DiskFull(
            f"{where}: the database server's disk is full ({detail}); nothing of this was "
            "written: free space on (or grow) the volume of its data directory and WAL, "
            "then it goes on by itself"
        )
    startup = _STARTUP_PARAMETER.search(lowered)
    if startup is not None:
        return _startup_refused(where, detail, startup.group(1))
    if sqlstate in (DUPLICATE_PREPARED_STATEMENT, INVALID_STATEMENT_NAME) or _PREPARED.search(
        lowered
    ):
        return PoolerMismatch(
            f"{where}: a prepared statement of this session was {_prepared_fate(lowered)} on "
            f"the server connection ({detail}): a connection pooler in transaction mode "
            "(PgBouncer) lends each transaction another server connection, and this "
            "session was opened as a direct one; add ?pooler=transaction to the database "
            f"URL ({POOLER_DOCS})"
        )
    for marker, meaning in _POOLER_UNAVAILABLE.items():
        if marker in lowered:
            return StoreUnavailable(
                f"{where}: the connection pooler in front of PostgreSQL {meaning} ({detail}); "
                "check its configuration and log (PgBouncer's pgbouncer.ini and [databases])"
            )
    if sqlstate == UNDEFINED_TABLE:
        return _table_missing(where, detail)
    if sqlstate == UNDEFINED_COLUMN:
        return _column_missing(where, detail)
    if sqlstate in LOGIN_REFUSED or any(marker in lowered for marker in _LOGIN):
        return StoreError(
            f"{where}: the database refused the login ({detail}); check the user and "
            "password of --db-url / SWH_SCHEDULER_DB_URL and the server's pg_hba.conf"
        )
    if sqlstate == TOO_MANY_CONNECTIONS or "too many clients" in lowered:
        return StoreUnavailable(
            f"{where}: the database server has no connection left ({detail}); retry later, "
            "raise its max_connections, or put a pooler in front of it "
            f"({POOLER_DOCS})"
        )
    return None


def _prepared_fate(lowered: str) -> str:
    return "already there" if "already exists" in lowered else "not found"


def _startup_refused(where: str, detail: str, parameter: str | None) -> PoolerMismatch:
    """A pooler (PgBouncer) refused a startup parameter of the connection."""
    if parameter in (None, "options"):
        return PoolerMismatch(
            f"{where}: a connection pooler (PgBouncer) refused the connection: it does not "
            "take the startup parameter 'options', which carries this session's time limits "
            f"to a direct server ({detail}); add ?pooler=transaction to the database URL: "
            f"the limits are then set in each transaction ({POOLER_DOCS})"
        )
    return PoolerMismatch(
        f"{where}: a connection pooler (PgBouncer) refused the connection's startup parameter "
        f"{parameter!r} ({detail}); remove it from the database URL, or list it in the "
        f"pooler's ignore_startup_parameters ({POOLER_DOCS})"
    )


def _table_missing(where: str, detail: str) -> SchemaMismatch:
    """A table that really does not exist (SQLSTATE 42P01, SQLite's "no
    such table"): no schema, or an older one (:func:`.migrations.check`
    tells them apart at start)."""
    return SchemaMismatch(
        f"{where}: the database has no scheduler schema, or an older one ({detail}); "
        "run `swh scheduler db init` on an empty database, `swh scheduler db upgrade` "
        "on an older one"
    )


def _column_missing(where: str, detail: str) -> SchemaMismatch:
    return SchemaMismatch(
        f"{where}: the database schema is not this version's ({detail}); "
        "run `swh scheduler db upgrade`"
    )


def _unavailable(where: str, detail: str, lowered: str) -> StoreError:
    """A server out of reach, or busy (SQLite's lock), or a missing database."""
    if "locked" in lowered or "busy" in lowered:
        return StoreUnavailable(
            f"{where}: the SQLite database is locked by another process ({detail}); "
            "retry, or use PostgreSQL for several concurrent processes"
        )
    if "does not exist" in lowered:
        return StoreUnavailable(f"{where}: {detail}; create it (`createdb`) or check --db-url")
    if "the database system is" in lowered:
        return StoreUnavailable(
            f"{where}: the database server takes no session now: it is starting, stopping "
            f"or recovering from a crash ({detail}); its log says why (a full disk, an "
            "operator's restart); a running daemon tries again at its next pass"
        )
    if any(marker in lowered for marker in _ENDED):
        return StoreUnavailable(
            f"{where}: the database server ended the connection ({detail}): it restarted "
            "or crashed, or the session was terminated; its log says why; a running daemon "
            "tries again at its next pass"
        )
    if "timeout expired" in lowered:
        return StoreUnavailable(
            f"{where}: cannot reach the database: it did not answer in time ({detail}); "
            "check that the host named by --db-url / SWH_SCHEDULER_DB_URL is up and that "
            "the network and firewalls let this host reach its port"
        )
    return StoreUnavailable(
        f"{where}: cannot reach the database ({detail}); check that it is running "
        "and that --db-url / SWH_SCHEDULER_DB_URL points at it"
    )


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Run a block, turning SQLAlchemy/driver errors into scheduler errors."""
    try:
        yield
    except SchedulerError:
        raise
    except sa_exc.SQLAlchemyError as exc:
        raise translate(exc, where) from exc
    except OverflowError as exc:
        # sqlite3 binds no integer past 64 bits (not a DB-API error)
        raise InvalidInput(
            "arguments", f"{where}: a number too large for the database ({exc})"
        ) from exc
