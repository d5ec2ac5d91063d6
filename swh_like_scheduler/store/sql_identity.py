"""The installation's identity: one random id stored in the database itself.

Every process of one installation (runners, listeners, monitors, workers,
the API) reads the same row, whatever URL, host name or user it connects
with; two installations (two databases) never share it, even on one broker.
It is written once, by ``db init`` or by the first process that asks for
it (``INSERT … ON CONFLICT DO NOTHING``, then read: two first users agree).

Two things derive from it:

* the listener's default event queue
  (:func:`~swh_like_scheduler.listener.consumer.event_queue_name`), so that
  two installations on one vhost never read each other's queue;
* the namespace of the Celery task ids of new runs
  (:func:`~swh_like_scheduler.domain.model.run_backend_id`), so that the runs of
  two installations never share an id: an event or a message of the other
  installation names no run here, and is ignored.

A copy of a database (a restored dump used for staging) keeps the id of its
original: ``swh scheduler db identity --new`` gives it its own.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from functools import lru_cache

import sqlalchemy as sa

from ..domain.model import RUN_NAMESPACE
from .sql_base import SQLBase
from .tables import installation as installation_t


@lru_cache(maxsize=16)
def run_namespace_of(installation_id: str) -> uuid.UUID:
    """The namespace of the run ids of the installation ``installation_id``."""
    return uuid.uuid5(RUN_NAMESPACE, installation_id)


class IdentityMethods(SQLBase):
    """The installation's id, and the namespace of its run ids."""

    def installation_id(self) -> str:
        cached: str | None = self.__dict__.get("_installation_id")
        if cached is not None:
            return cached
        with self._write("read the installation id") as conn:
            found = self._installation(conn)
        if self._bound is None:  # committed: kept for the store's life
            self.__dict__["_installation_id"] = found
        return found

    def new_installation_id(self, *, now: datetime) -> str:
        """Give the database a new random identity (a copy of another
        installation's database); the new id. Every process of the
        installation must be restarted to use it."""
        new = uuid.uuid4().hex
        with self._write("renew the installation id") as conn:
            self._installation(conn)
            conn.execute(sa.update(installation_t).values(id=new, created_at=now))
        self.__dict__["_installation_id"] = new
        return new

    def _installation(self, conn: sa.Connection) -> str:
        """The installation id, read (and written first if missing) in
        ``conn``'s transaction. An id read from the table is kept for the
        store's life; one written here is not until it was read back (the
        caller's transaction may still roll back: another process may then
        write another one)."""
        cached: str | None = self.__dict__.get("_installation_id")
        if cached is not None:
            return cached
        query = sa.select(installation_t.c.id).where(installation_t.c.one == 1)
        found = conn.scalar(query)
        if found is not None:
            self.__dict__["_installation_id"] = found
            return str(found)
        conn.execute(
            self._upsert(installation_t)
            .values(one=1, id=uuid.uuid4().hex, created_at=datetime.now(UTC))
            .on_conflict_do_nothing(index_elements=[installation_t.c.one])
        )
        written = conn.scalar(query)  # ours, or the one another process wrote first
        assert isinstance(written, str)
        return written

    def _run_namespace(self, conn: sa.Connection) -> uuid.UUID:
        """The namespace of this installation's run ids (read in ``conn``:
        a write transaction already open needs no second connection)."""
        return run_namespace_of(self._installation(conn))
