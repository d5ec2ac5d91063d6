"""Bearer tokens of the HTTP API: ``SECRET:rw`` may read and write,
``SECRET:ro`` may only read. Tokens are compared in constant time and never
logged or echoed back."""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from ..domain.exceptions import InvalidInput

#: environment variable holding the tokens (comma-separated entries)
TOKENS_ENV = "SWH_SCHEDULER_API_TOKENS"
#: shortest secret accepted: a guessable token is no protection
MIN_SECRET = 16


class Access(IntEnum):
    """What a request may do (ordered: write implies read)."""

    NONE = 0
    READ = 1
    WRITE = 2


_MODES = {"ro": Access.READ, "rw": Access.WRITE}


@dataclass(frozen=True)
class Token:
    secret: bytes
    access: Access

    def __repr__(self) -> str:  # never show the secret
        return f"Token(access={self.access.name})"


def parse_tokens(entries: str | Iterable[str], *, field: str = "api_tokens") -> tuple[Token, ...]:
    """Tokens from ``SECRET:rw`` / ``SECRET:ro`` entries (a comma-separated
    string or a list). Fails closed: an entry without a mode, or whose mode
    is anything but ``rw`` or ``ro`` (``RO``, ``read``...), is refused with
    its number (never its secret), as is a setting that names no token."""
    items = entries.split(",") if isinstance(entries, str) else list(entries)
    tokens = []
    for number, raw in enumerate(items, start=1):
        entry = str(raw).strip()
        if not entry:
            continue
        secret, colon, mode = entry.rpartition(":")
        secret, mode = secret.strip(), mode.strip()
        if not colon or not secret:
            raise InvalidInput(field, f"token {number} has no mode: write SECRET:rw or SECRET:ro")
        if mode not in _MODES:
            shown = mode if len(mode) <= 8 else mode[:8] + "..."
            raise InvalidInput(
                field,
                f"token {number} has the mode {shown!r}: a mode is exactly rw (read and "
                "write) or ro (read only)",
            )
        if len(secret) < MIN_SECRET:
            raise InvalidInput(
                field,
                f"token {number} is shorter than {MIN_SECRET} characters "
                "(generate one: python -c 'import secrets; print(secrets.token_urlsafe())')",
            )
        tokens.append(Token(secret.encode(), _MODES[mode]))
    if not tokens and items:
        raise InvalidInput(field, "names no token (SECRET:rw or SECRET:ro, comma-separated)")
    return tuple(tokens)


def access_of(tokens: Iterable[Token], authorization: str | None) -> Access:
    """What the ``Authorization`` header grants (``Access.NONE``: no valid
    bearer token)."""
    return identify(tokens, authorization)[0]


def identify(tokens: Iterable[Token], authorization: str | None) -> tuple[Access, int | None]:
    """What the ``Authorization`` header grants, and the number (from 1) of
    the token that grants it (``None``: no valid bearer token). Every token
    is compared, so the time taken does not say which one nearly matched."""
    if not authorization:
        return Access.NONE, None
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return Access.NONE, None
    offered = given.strip().encode()
    granted, number = Access.NONE, None
    for index, token in enumerate(tokens, start=1):
        if hmac.compare_digest(token.secret, offered) and token.access > granted:
            granted, number = token.access, index
    return granted, number
