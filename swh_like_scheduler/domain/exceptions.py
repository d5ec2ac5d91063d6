"""One exception tree for everything the scheduler refuses or cannot do.

Driver errors (psycopg, sqlite3, SQLAlchemy) are translated into these at the
store boundary, so callers (the command line, the HTTP API, daemons) only ever
handle :class:`SchedulerError`. Every message is written for the person who
has to act on it.
"""

from __future__ import annotations

from typing import Self


class SchedulerError(Exception):
    """Base class of every error raised on purpose by swh_like_scheduler."""


class InvalidInput(SchedulerError, ValueError):
    """A value given by a user or a client is not acceptable.

    ``field`` names the offending field (``interval``, ``tz``, ``cron``...);
    ``line`` is the 1-based line of the input file it came from, when any.
    """

    def __init__(self, field: str, message: str, *, line: int | None = None) -> None:
        self.field = field
        self.message = message
        self.line = line
        super().__init__(str(self))

    def at_line(self, line: int) -> Self:
        """The same error, located at ``line`` of an input file."""
        located = Exception.__new__(type(self))
        located.__dict__.update(self.__dict__)
        located.line = line
        located.args = (str(located),)
        return located

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.field}: {self.message}"


class NotFound(SchedulerError, LookupError):
    """The task type, task or run asked for does not exist."""


class UnknownTaskType(NotFound, InvalidInput):
    """A task refers to a task type that is not registered."""

    def __init__(self, name: str) -> None:
        InvalidInput.__init__(
            self,
            "type",
            f"unknown task type {name!r} (see `swh scheduler task-type list`)",
        )
        self.name = name


class Conflict(SchedulerError):
    """The change would break a uniqueness rule (duplicate type, reused key...)."""


class DuplicateTaskType(Conflict, InvalidInput):
    def __init__(self, name: str) -> None:
        InvalidInput.__init__(self, "type", f"task type {name!r} already exists")
        self.name = name


class KeyConflict(Conflict, InvalidInput):
    """A client key is already used by a task with a different definition."""

    def __init__(self, key: str, task_id: int) -> None:
        InvalidInput.__init__(
            self,
            "key",
            f"key {key!r} already names task {task_id} with a different definition",
        )
        self.key = key
        self.task_id = task_id


class InvalidTransition(Conflict):
    """The task or run is not in a state that allows the requested change."""


class TaskBusy(InvalidTransition, InvalidInput):
    """An edit names a field that cannot change while a run holds the task
    (or, for a task type, while runs of the type are open)."""

    def __init__(self, field: str, message: str) -> None:
        InvalidInput.__init__(self, field, message)


class DuplicateTask(Conflict, InvalidInput):
    """An edit would make a task without a key identical to another live one."""

    def __init__(self, field: str, task_id: int) -> None:
        InvalidInput.__init__(
            self,
            field,
            f"the task would be identical to live task {task_id} (same type, arguments, "
            "schedule kind and priority, no key); change that one, or delete it first",
        )
        self.task_id = task_id


class StaleUpdate(Conflict, InvalidInput):
    """An update presented a version token (a lister's ``updated``) that is
    no longer the stored one: another process wrote since this one read.
    Read again, redo the change, and update with the new token."""

    def __init__(self, field: str, message: str) -> None:
        InvalidInput.__init__(self, field, message)


class StoreError(SchedulerError):
    """The database refused or failed an operation; the message says why."""


class StoreUnavailable(StoreError):
    """The database cannot be reached; retrying later may succeed."""


class StatementTimeout(StoreError):
    """A statement ran longer than its time limit and was cancelled; nothing
    of it was written."""


class SchemaMismatch(StoreError):
    """The database schema is missing or older than this version expects."""


class DiskFull(StoreUnavailable):
    """The database server (or the SQLite file's volume) has no space left:
    nothing of the operation was written; it may succeed once space is freed."""


class PoolerMismatch(StoreError):
    """A connection pooler in front of PostgreSQL (PgBouncer) refused what a
    direct session allows, or lent the session's state to another client (a
    startup parameter, a prepared statement): the database URL must say that
    a pooler is in the way (``?pooler=transaction``)."""
