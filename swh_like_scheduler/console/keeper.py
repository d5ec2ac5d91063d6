"""The console's sessions kept in the store: what logs in, what is still
logged in, what ends.

:class:`Keeper` joins the signed cookies of :mod:`.session` to their rows in
the store (:class:`~swh_like_scheduler.store.role_console.ConsoleStore`): a
cookie whose signature holds is honoured only while its row is open. A
store that keeps no console sessions (a remote store) gives a console no
one can log in to: it fails closed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from ..store.role_console import ConsoleStore
from .session import LINK_LIFETIME, Session, Sessions


class NoSessions(Exception):
    """The store behind this server keeps no console sessions."""


class Keeper:
    """Logins, the session of a request, logouts and login links."""

    def __init__(self, sessions: Sessions, store: object, clock: Callable[[], datetime]) -> None:
        self.sessions = sessions
        self.store = store if isinstance(store, ConsoleStore) else None
        self.clock = clock

    def _store(self) -> ConsoleStore:
        if self.store is None:
            raise NoSessions("this server's store keeps no console sessions")
        return self.store

    def login(self, secret: str) -> tuple[str, Session] | None:
        """A cookie and its session for a pasted token, its row recorded
        (``None``: no such token)."""
        now = self.clock()
        opened = self.sessions.open(secret, now=now.timestamp())
        if opened is not None:
            self._record(opened[1], now)
        return opened

    def redeem(self, code: str) -> tuple[str, Session] | None:
        """A cookie and its session for a one-time link's code, which is
        used up; ``None`` when the link is unknown, used, expired, or its
        token is gone."""
        if not code or len(code) > 200:
            return None
        now = self.clock()
        token = self._store().use_console_link(self.sessions.link_id(code), now=now)
        if token is None:
            return None
        opened = self.sessions.open_for(token, now=now.timestamp())
        if opened is not None:
            self._record(opened[1], now)
        return opened

    def _record(self, session: Session, now: datetime) -> None:
        forget = now - timedelta(seconds=self.sessions.lifetime + LINK_LIFETIME)
        self._store().open_console_session(session.id, session.token, now=now, forget_before=forget)

    def current(self, cookie: str | None, *, seen: bool = True) -> Session | None:
        """The session of ``cookie`` while its row is open (``seen``: this
        request counts as a use, so the idle time starts again)."""
        now = self.clock()
        session = self.sessions.check(cookie, now=now.timestamp())
        if session is None or self.store is None:
            return None
        idle_after = now - timedelta(seconds=self.sessions.idle)
        token = self.store.touch_console_session(
            session.id, now=now, idle_after=idle_after, seen=seen
        )
        return session if token == session.token else None

    def logout(self, session: Session) -> None:
        """End this session: every copy of its cookie."""
        self._store().end_console_sessions(now=self.clock(), session_id=session.id)

    def logout_everywhere(self, session: Session) -> int:
        """End every session opened with this session's token; how many."""
        return self._store().end_console_sessions(now=self.clock(), token=session.token)

    def new_link(self, token_number: int) -> tuple[str, datetime]:
        """A one-time login link's code for token ``token_number`` (from 1)
        and until when it can be used."""
        now = self.clock()
        code, link_id = self.sessions.new_link()
        until = now + timedelta(seconds=LINK_LIFETIME)
        self._store().create_console_link(
            link_id, self.sessions.fingerprint(token_number), now=now, expires_at=until
        )
        return code, until
