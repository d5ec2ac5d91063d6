"""Authentication before anything else, as an ASGI middleware.

A request's token is checked from its headers alone, before its body is
read (and before the body limit reads it): a client without a valid token
costs the server no more than its headers, whatever it sends after them,
and malformed input without a token is a 401 like any other. What a
request needs follows from its method and path: ``GET``/``HEAD`` read,
other methods write, and a ``POST /rpc/NAME`` reads or writes as the store
method ``NAME`` does. The open paths (``/health`` and the API's own
documentation) need no token; with ``open_reads`` neither do reads. The
routes check again (their dependencies also document the security in the
OpenAPI document)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from .auth import Access, Token, access_of
from .limits import refuse

#: paths served to anyone (``GET``/``HEAD`` only)
OPEN_PATHS = frozenset(
    {"/", "/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
#: and the documentation's scripts and styles (package files)
OPEN_PREFIX = "/static-offline-docs/"
_READING = frozenset({"GET", "HEAD"})


class Gate:
    """401 without a valid token, 403 when it may not do what is asked."""

    def __init__(
        self,
        app: Any,
        *,
        tokens: Iterable[Token],
        open_reads: bool,
        rpc_reads: Collection[str],
    ) -> None:
        self.app = app
        self.tokens = tuple(tokens)
        self.open_reads = open_reads
        self.rpc_reads = frozenset(rpc_reads)

    def wanted(self, method: str, path: str) -> Access:
        if method in _READING:
            public = path in OPEN_PATHS or path.startswith(OPEN_PREFIX)
            return Access.NONE if public else Access.READ
        if method == "POST" and path.startswith("/rpc/"):
            return Access.READ if path[len("/rpc/") :] in self.rpc_reads else Access.WRITE
        return Access.WRITE

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        wanted = self.wanted(str(scope.get("method", "")), str(scope.get("path", "")))
        if wanted is Access.NONE or (wanted is Access.READ and self.open_reads):
            await self.app(scope, receive, send)
            return
        header = next(
            (v.decode("latin-1") for n, v in scope.get("headers", ()) if n == b"authorization"),
            None,
        )
        granted = access_of(self.tokens, header)
        if granted is Access.NONE:
            await refuse(
                send,
                401,
                "a bearer token is required (Authorization: Bearer SECRET)",
                headers=[(b"www-authenticate", b"Bearer")],
            )
            return
        if granted < wanted:
            await refuse(send, 403, "this token may only read")
            return
        await self.app(scope, receive, send)
