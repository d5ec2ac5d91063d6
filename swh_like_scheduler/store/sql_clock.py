"""The database's clock, and how far the hosts' clocks are from it.

Only the database's clock decides (DESIGN.md §5, invariant 6): a daemon
reads it (:meth:`database_now`), measures its own host's offset against it
and records it (:meth:`record_host_clock`, the ``host_clock`` table), so
that ``/health`` can name a host whose clock is off. The listener records
each worker's offset, measured from its heartbeats, in its ``worker`` row
(:meth:`record_worker_clocks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import sqlalchemy as sa

from ..domain.exceptions import InvalidInput
from ..domain.records import HostClock
from .sql_base import SQLBase
from .tables import host_clock as clock_t
from .tables import worker as worker_t


def read_db_now(conn: sa.Connection) -> datetime:
    """The database's clock, read on ``conn`` (aware UTC)."""
    if conn.dialect.name == "postgresql":
        value = conn.scalar(sa.select(sa.func.clock_timestamp()))
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    text = conn.scalar(sa.select(sa.func.strftime("%Y-%m-%d %H:%M:%f", "now")))
    return datetime.fromisoformat(str(text)).replace(tzinfo=UTC)


def _finite(name: str, seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidInput(name, f"{seconds!r} is not a number of seconds")
    if not -1e9 < seconds < 1e9:  # NaN and infinities too
        raise InvalidInput(name, f"{seconds!r} is not a believable clock offset")
    return float(seconds)


class ClockMethods(SQLBase):
    """The database's clock; the hosts' offsets from it."""

    def database_now(self) -> datetime:
        with self._read("read the database's clock") as conn:
            return read_db_now(conn)

    def record_host_clock(self, holder: str, *, role: str, offset_seconds: float) -> HostClock:
        if not holder or not role:
            raise InvalidInput("holder", "a host clock needs a holder and a role")
        offset = _finite("offset_seconds", offset_seconds)
        insert = self._upsert(clock_t)
        with self._write("record a host's clock") as conn:
            at = read_db_now(conn)
            values = {"holder": holder, "role": role, "offset_seconds": offset, "measured_at": at}
            conn.execute(
                insert.values(**values).on_conflict_do_update(
                    index_elements=[clock_t.c.holder],
                    set_={k: v for k, v in values.items() if k != "holder"},
                )
            )
        return HostClock(holder, role, offset, at)

    def get_host_clocks(self, *, since: datetime | None = None) -> list[HostClock]:
        query = sa.select(clock_t).order_by(clock_t.c.holder)
        if since is not None:
            query = query.where(clock_t.c.measured_at >= since)
        with self._read("read the hosts' clocks") as conn:
            found = conn.execute(query).all()
        return [HostClock(r.holder, r.role, r.offset_seconds, r.measured_at) for r in found]

    def record_worker_clocks(self, offsets: Mapping[str, float | None]) -> None:
        if not offsets:
            return
        values = [
            {"name": name, "offset": None if o is None else _finite("clock_offset", o)}
            for name, o in sorted(offsets.items())
        ]
        with self._write("record the workers' clocks") as conn:
            conn.execute(
                sa.update(worker_t)
                .where(worker_t.c.hostname == sa.bindparam("name"))
                .values(clock_offset=sa.bindparam("offset")),
                values,
            )
