"""Translation of driver errors into the scheduler's exception tree.

Nothing raised by SQLAlchemy, psycopg or sqlite3 leaves the store: callers
see a :class:`~swh_like_scheduler.domain.exceptions.SchedulerError` whose message
says what went wrong and what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy.exc as sa_exc

from ..domain.exceptions import (
    Conflict,
    InvalidInput,
    SchedulerError,
    SchemaMismatch,
    StatementTimeout,
    StoreError,
    StoreUnavailable,
)

_MISSING_TABLE = ("no such table", "does not exist", "undefinedtable")
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


def translate(exc: sa_exc.SQLAlchemyError, where: str) -> SchedulerError:
    """The scheduler error that tells the user what ``exc`` means."""
    detail = _describe(exc)
    lowered = detail.lower()
    if isinstance(exc, sa_exc.IntegrityError):
        for name, message in _CONSTRAINT_MESSAGES.items():
            if name in lowered:
                return Conflict(f"{where}: {message}")
        return Conflict(f"{where}: the database refused the change ({detail})")
    if any(marker in lowered for marker in _BAD_SETTING):
        return InvalidInput("db-url", f"{where}: the database refused a setting ({detail})")
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
        return SchemaMismatch(
            f"{where}: the database schema is not this version's ({detail}); "
            "run `swh scheduler db upgrade`"
        )
    if any(marker in lowered for marker in _MISSING_TABLE) and "database" not in lowered:
        return SchemaMismatch(
            f"{where}: the database has no scheduler schema ({detail}); "
            "run `swh scheduler db init` first"
        )
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError) or any(
        marker in lowered for marker in _UNREACHABLE
    ):
        if "locked" in lowered or "busy" in lowered:
            return StoreUnavailable(
                f"{where}: the SQLite database is locked by another process ({detail}); "
                "retry, or use PostgreSQL for several concurrent processes"
            )
        if "does not exist" in lowered:
            return StoreUnavailable(f"{where}: {detail}; create it (`createdb`) or check --db-url")
        return StoreUnavailable(
            f"{where}: cannot reach the database ({detail}); check that it is running "
            "and that --db-url / SWH_SCHEDULER_DB_URL points at it"
        )
    return StoreError(f"{where}: the database failed ({detail})")


@contextmanager
def translated(where: str) -> Iterator[None]:
    """Run a block, turning SQLAlchemy/driver errors into scheduler errors."""
    try:
        yield
    except SchedulerError:
        raise
    except sa_exc.SQLAlchemyError as exc:
        raise translate(exc, where) from exc
