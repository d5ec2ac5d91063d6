"""The console's sessions and login links on SQL (:class:`ConsoleStore`)."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from ..domain.enums import check_aware
from ..domain.exceptions import InvalidInput
from .sql_base import SQLBase
from .tables import console_link as link_t
from .tables import console_session as session_t

#: a session's last sight is written at most this often
SEEN_EVERY = timedelta(seconds=60)
#: rows deleted per kind by one :meth:`open_console_session`
FORGET_BATCH = 500


class ConsoleMethods(SQLBase):
    """Server-side console sessions and one-time login links."""

    def open_console_session(
        self, session_id: str, token: str, *, now: datetime, forget_before: datetime
    ) -> None:
        check_aware("now", now)
        check_aware("forget_before", forget_before)
        with self._write("open a console session") as conn:
            old = sa.select(session_t.c.id).where(session_t.c.opened_at < forget_before)
            conn.execute(sa.delete(session_t).where(session_t.c.id.in_(old.limit(FORGET_BATCH))))
            spent = sa.select(link_t.c.id).where(link_t.c.expires_at < forget_before)
            conn.execute(sa.delete(link_t).where(link_t.c.id.in_(spent.limit(FORGET_BATCH))))
            conn.execute(
                sa.insert(session_t).values(id=session_id, token=token, opened_at=now, seen_at=now)
            )

    def touch_console_session(
        self, session_id: str, *, now: datetime, idle_after: datetime, seen: bool = True
    ) -> str | None:
        check_aware("now", now)
        check_aware("idle_after", idle_after)
        query = sa.select(session_t.c.token, session_t.c.seen_at).where(
            session_t.c.id == session_id,
            session_t.c.ended_at.is_(None),
            session_t.c.seen_at >= idle_after,
        )
        with self._read("check a console session") as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        if seen and now - row.seen_at >= SEEN_EVERY:
            with self._write("record a console session's use") as conn:
                conn.execute(
                    sa.update(session_t)
                    .where(session_t.c.id == session_id, session_t.c.seen_at < now)
                    .values(seen_at=now)
                )
        return str(row.token)

    def end_console_sessions(
        self, *, now: datetime, session_id: str | None = None, token: str | None = None
    ) -> int:
        check_aware("now", now)
        if (session_id is None) == (token is None):
            raise InvalidInput("session_id", "name one session, or a token (not both)")
        which = (
            session_t.c.id == session_id if session_id is not None else session_t.c.token == token
        )
        with self._write("end console sessions") as conn:
            ended = conn.execute(
                sa.update(session_t)
                .where(which, session_t.c.ended_at.is_(None))
                .values(ended_at=now)
            )
        return int(ended.rowcount or 0)

    def create_console_link(
        self, link_id: str, token: str, *, now: datetime, expires_at: datetime
    ) -> None:
        check_aware("now", now)
        check_aware("expires_at", expires_at)
        with self._write("create a console login link") as conn:
            conn.execute(
                sa.insert(link_t).values(
                    id=link_id, token=token, created_at=now, expires_at=expires_at
                )
            )

    def use_console_link(self, link_id: str, *, now: datetime) -> str | None:
        check_aware("now", now)
        with self._write("use a console login link") as conn:
            used = conn.execute(
                sa.update(link_t)
                .where(
                    link_t.c.id == link_id,
                    link_t.c.used_at.is_(None),
                    link_t.c.expires_at > now,
                )
                .values(used_at=now)
            )
            if not used.rowcount:
                return None
            token = conn.scalar(sa.select(link_t.c.token).where(link_t.c.id == link_id))
        return None if token is None else str(token)
