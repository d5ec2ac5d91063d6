"""The console's sessions: a signed cookie, a row in the store, a CSRF token.

The user pastes an API token once (:func:`Sessions.open`), or opens a
one-time login link (:func:`Sessions.new_link`); the browser then keeps a
cookie that names that token by a fingerprint (never the secret), when it
was issued and a random nonce, signed with HMAC-SHA256. The signing key is
derived from the server's tokens, so every replica with the same tokens
accepts the same cookies, and changing the tokens ends every session;
removing one token ends the sessions opened with it. What a session may do
is its token's access *now* (a token turned read-only reads only). A
session lasts ``lifetime`` seconds at most.

The signature alone cannot end a session early, so each session also has a
row in the store (:class:`~swh_like_scheduler.store.role_console.ConsoleStore`),
named by an id derived from the nonce: a cookie is honoured only while its
row is open. Logout ends the row (a copy of the cookie taken before is then
worthless), "log out everywhere" ends every row of the token, and a row not
used for ``idle`` seconds is over. This module signs and checks; the
routes keep the rows (:mod:`.keeper`).

Every state-changing form carries the session's CSRF token (an HMAC of its
nonce): a page of another site cannot read it, so it cannot post for the
user (with the ``SameSite=Strict`` cookie, two locks)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from ..api.auth import Access, Token

#: the cookie's name
COOKIE = "swh_console"
#: how long a session lasts at most (seconds)
LIFETIME = 12 * 3600
#: a session unused this long is over (seconds)
IDLE = 3600
#: how long a one-time login link may wait to be used (seconds)
LINK_LIFETIME = 600


@dataclass(frozen=True)
class Session:
    """A valid session: what it may do and its CSRF token."""

    access: Access
    csrf: str
    #: the number (from 1) of the token it was opened with
    token_number: int
    #: its row in the store (derived from the cookie's nonce)
    id: str = ""
    #: the fingerprint of its token, as the store keeps it
    token: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Sessions:
    """Issues and checks the console's cookies for a set of tokens."""

    def __init__(
        self, tokens: Iterable[Token], *, lifetime: int = LIFETIME, idle: int = IDLE
    ) -> None:
        self.tokens = tuple(tokens)
        self.lifetime = lifetime
        self.idle = min(idle, lifetime)
        material = b"\0".join(sorted(t.secret for t in self.tokens))
        self._key = hmac.new(b"swh-console-session/1", material, hashlib.sha256).digest()

    def _mac(self, *parts: str | bytes) -> str:
        text = b"\0".join(p.encode() if isinstance(p, str) else p for p in parts)
        return _b64(hmac.new(self._key, text, hashlib.sha256).digest())

    def _fingerprint(self, token: Token) -> str:
        return self._mac("token", token.secret)[:22]

    def open(self, secret: str, *, now: float) -> tuple[str, Session] | None:
        """A cookie value and its session for a pasted token (``None``: no
        such token). Every token is compared, in constant time."""
        offered = secret.strip().encode()
        found = None
        for number, token in enumerate(self.tokens, start=1):
            if hmac.compare_digest(token.secret, offered) and (
                found is None or token.access > found[1].access
            ):
                found = (number, token)
        if found is None or not offered:
            return None
        return self._issue(*found, now=now)

    def open_for(self, fingerprint: str, *, now: float) -> tuple[str, Session] | None:
        """A cookie value and its session for the token of ``fingerprint``
        (a login link's); ``None`` when no token has it any more."""
        for number, token in enumerate(self.tokens, start=1):
            if hmac.compare_digest(self._fingerprint(token), fingerprint):
                return self._issue(number, token, now=now)
        return None

    def _issue(self, number: int, token: Token, *, now: float) -> tuple[str, Session]:
        nonce = secrets.token_urlsafe(12)
        fingerprint = self._fingerprint(token)
        payload = {"f": fingerprint, "i": int(now), "n": nonce}
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        cookie = f"{body}.{self._mac('cookie', body)}"
        return cookie, self._session(number, token, nonce, fingerprint)

    def _session(self, number: int, token: Token, nonce: str, fingerprint: str) -> Session:
        return Session(
            token.access,
            self._mac("csrf", nonce),
            number,
            id=self._mac("session", nonce)[:32],
            token=fingerprint,
        )

    def fingerprint(self, number: int) -> str:
        """The fingerprint of token ``number`` (from 1), as sessions and
        links name it."""
        return self._fingerprint(self.tokens[number - 1])

    def new_link(self) -> tuple[str, str]:
        """A one-time login link's code (for its URL) and the id the store
        keeps it under (derived from the code: a reader of the store cannot
        use a link)."""
        code = secrets.token_urlsafe(24)
        return code, self.link_id(code)

    def link_id(self, code: str) -> str:
        """The store's id of the link of ``code``."""
        return self._mac("link", code)[:32]

    def check(self, cookie: str | None, *, now: float) -> Session | None:
        """The session of a cookie, ``None`` when it is missing, forged,
        expired, or its token is gone. Whether its row in the store is still
        open is the caller's to check (:mod:`.keeper`)."""
        if not cookie or cookie.count(".") != 1 or len(cookie) > 512:
            return None
        body, mac = cookie.split(".")
        if not hmac.compare_digest(mac, self._mac("cookie", body)):
            return None
        try:
            payload = json.loads(_unb64(body))
            fingerprint, issued, nonce = str(payload["f"]), int(payload["i"]), str(payload["n"])
        except (ValueError, KeyError, TypeError):
            return None
        if not 0 <= now - issued <= self.lifetime:
            return None
        for number, token in enumerate(self.tokens, start=1):
            if hmac.compare_digest(self._fingerprint(token), fingerprint):
                return self._session(number, token, nonce, fingerprint)
        return None

    @staticmethod
    def csrf_ok(session: Session | None, given: str | None) -> bool:
        """Whether a form's CSRF token is its session's."""
        if session is None or not given:
            return False
        return hmac.compare_digest(session.csrf, given)
