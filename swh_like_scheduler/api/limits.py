"""A request body size limit, as an ASGI middleware: a declared
``Content-Length`` over the limit is refused before anything is read; a
body streamed without one is read up to the limit (413 past it) and then
handed to the application whole.

The limit follows the method and the path. A ``GET`` or ``HEAD`` takes no
body: one declared (a ``Content-Length`` above 0, or any
``Transfer-Encoding``) is refused before a byte of it is read, whatever the
path. A ``POST`` to one of the ``posts`` paths (a remote store's call that
writes: an import of many tasks is one call) may be as large as its own
limit; any other request gets its exact path's limit, else its longest
matching prefix's, else the default (a store read over ``/rpc`` takes a few
ids and a filter; a console form a token, a CSRF token and a few fields)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: the methods whose requests take no body
BODILESS = frozenset({"GET", "HEAD"})


class BodyLimit:
    """``limit`` bytes at most; ``posts``: larger limits for a ``POST`` to
    these paths; ``exact``: other limits for these paths; ``prefixes``:
    other limits for paths under these prefixes (the longest that matches)."""

    def __init__(
        self,
        app: Any,
        limit: int,
        *,
        posts: Mapping[str, int] | None = None,
        exact: Mapping[str, int] | None = None,
        prefixes: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.default = limit
        self.posts = dict(posts or {})
        self.exact = dict(exact or {})
        self.prefixes = sorted((prefixes or {}).items(), key=lambda item: -len(item[0]))

    def limit_of(self, method: str, path: str) -> int:
        """The largest body a ``method`` request to ``path`` may have (0: none)."""
        if method in BODILESS:
            return 0
        if method == "POST" and path in self.posts:
            return self.posts[path]
        if path in self.exact:
            return self.exact[path]
        return next((n for prefix, n in self.prefixes if path.startswith(prefix)), self.default)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", ""))
        limit = self.limit_of(method, str(scope.get("path", "")))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await refuse(send, 400, "Content-Length is not a number")
                    return
                if declared > limit:
                    await refuse(send, 413, _too_large(method, limit))
                    return
            elif name == b"transfer-encoding" and limit == 0:
                await refuse(send, 413, _too_large(method, limit))
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await refuse(send, 413, _too_large(method, limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Any:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)


def _too_large(method: str, limit: int) -> str:
    if limit == 0:
        return f"a {method} request takes no body"
    return f"request body larger than {limit} bytes"


async def refuse(
    send: Any, status: int, detail: str, *, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer ``status`` with ``{"detail": detail}``, without reading the body."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
