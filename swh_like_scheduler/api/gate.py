"""Authentication, rate and access log before anything else: an ASGI middleware.

A request's token is checked from its headers alone, before its body is
read (and before the body limit reads it): a client without a valid token
costs the server no more than its headers, whatever it sends after them,
and malformed input without a token is a 401 like any other. What a
request needs follows from its method and path: ``GET``/``HEAD`` read,
other methods write, and a ``POST /rpc/NAME`` reads or writes as the store
method ``NAME`` does, a ``POST`` to one of ``read_posts`` (the reference's
read methods under ``/swh/``) reads. The open paths (``/health``, ``/`` and the API's own
documentation) need no token, nor does the console (``/console``), which
checks its own session cookie; with ``open_reads`` neither do reads. The
routes check again (their dependencies also document the security in the
OpenAPI document).

With a rate limit (:mod:`.ratelimit`), each client — its token, else its
address — gets ``rate`` requests per second (``burst`` at once), open paths
included; past it, a 429 with ``Retry-After``. With ``access_log``, one line
per request: method, path, status, milliseconds and the client (``token
N``, never the secret, else its address)."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from typing import Any

from .auth import Access, Token, identify
from .limits import refuse
from .ratelimit import Buckets

access_logger = logging.getLogger("swh_like_scheduler.api.access")

#: paths served to anyone (``GET``/``HEAD`` only)
OPEN_PATHS = frozenset(
    {"/", "/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
#: and the documentation's scripts and styles (package files)
OPEN_PREFIX = "/static-offline-docs/"
#: the console checks its own sessions (a cookie, and a CSRF token to act)
CONSOLE_PREFIX = "/console"
_READING = frozenset({"GET", "HEAD"})


class Gate:
    """401 without a valid token, 403 when it may not do what is asked,
    429 past the client's rate."""

    def __init__(
        self,
        app: Any,
        *,
        tokens: Iterable[Token],
        open_reads: bool,
        rpc_reads: Collection[str],
        read_posts: Collection[str] = (),
        rate: float = 0.0,
        access_log: bool = False,
    ) -> None:
        self.app = app
        self.tokens = tuple(tokens)
        self.open_reads = open_reads
        self.rpc_reads = frozenset(rpc_reads)
        self.read_posts = frozenset(read_posts)
        self.buckets = Buckets(rate, max(10.0, 2 * rate)) if rate > 0 else None
        self.access_log = access_log

    def wanted(self, method: str, path: str) -> Access:
        if path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/"):
            return Access.NONE
        if method in _READING:
            public = path in OPEN_PATHS or path.startswith(OPEN_PREFIX)
            return Access.NONE if public else Access.READ
        if method == "POST" and path.startswith("/rpc/"):
            return Access.READ if path[len("/rpc/") :] in self.rpc_reads else Access.WRITE
        if method == "POST" and path in self.read_posts:
            return Access.READ
        return Access.WRITE

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method, path = str(scope.get("method", "")), str(scope.get("path", ""))
        header = next(
            (v.decode("latin-1") for n, v in scope.get("headers", ()) if n == b"authorization"),
            None,
        )
        granted, number = identify(self.tokens, header)
        client = f"token {number}" if number is not None else _address(scope)
        status = [0]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self._serve(scope, receive, sending, method, path, granted, client)
        finally:
            if self.access_log:
                access_logger.info(
                    "%s %s %d %.1f ms %s",
                    method,
                    path,
                    status[0],
                    (time.perf_counter() - started) * 1000,
                    client,
                )

    async def _serve(
        self,
        scope: dict[str, Any],
        receive: Any,
        send: Any,
        method: str,
        path: str,
        granted: Access,
        client: str,
    ) -> None:
        if self.buckets is not None:
            wait = self.buckets.take(client)
            if wait is not None:
                await refuse(
                    send,
                    429,
                    f"too many requests from {client}: try again in {wait} s",
                    headers=[(b"retry-after", str(wait).encode())],
                )
                return
        wanted = self.wanted(method, path)
        if wanted is Access.NONE or (wanted is Access.READ and self.open_reads):
            await self.app(scope, receive, send)
            return
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


def _address(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
