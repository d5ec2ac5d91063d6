"""The console's sessions and one-time login links (:mod:`.sql_console`).

Kept in the scheduler's database so that every API replica sees the same
sessions: a logout on one ends the cookie on all. Not part of
:class:`~swh_like_scheduler.store.interface.SchedulerStore` and not served
over ``/rpc``: the sessions are the API server's own business, and a
remote store has no console behind it."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class ConsoleStore(Protocol):
    """Server-side console sessions and login links. Ids are opaque texts
    derived from secrets the caller keeps (never the secrets themselves);
    ``token`` is the fingerprint of the API token a session acts with."""

    def open_console_session(
        self, session_id: str, token: str, *, now: datetime, forget_before: datetime
    ) -> None:
        """Record a new open session, seen ``now``. Sessions opened before
        ``forget_before`` and links expired before it are deleted on the way
        (a bounded number per call), so the tables stay small."""
        ...

    def touch_console_session(
        self, session_id: str, *, now: datetime, idle_after: datetime, seen: bool = True
    ) -> str | None:
        """The token of the session if it is open: not ended, and seen at
        or after ``idle_after``; ``None`` otherwise (unknown, ended, idle).
        With ``seen``, the session counts as used ``now`` (its last sight is
        written at most once a minute, so that reads stay reads)."""
        ...

    def end_console_sessions(
        self, *, now: datetime, session_id: str | None = None, token: str | None = None
    ) -> int:
        """End the session ``session_id``, or every open session of
        ``token`` (one of the two is required); how many were open."""
        ...

    def create_console_link(
        self, link_id: str, token: str, *, now: datetime, expires_at: datetime
    ) -> None:
        """Record a one-time login link for ``token``, usable until ``expires_at``."""
        ...

    def use_console_link(self, link_id: str, *, now: datetime) -> str | None:
        """The token of the link, which is used up by this call; ``None``
        when it is unknown, used already or expired. Of two callers at once,
        one gets the token."""
        ...
