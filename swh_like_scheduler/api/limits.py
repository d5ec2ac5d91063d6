"""A request body size limit, as an ASGI middleware: a declared
``Content-Length`` over the limit is refused before anything is read; a
body streamed without one is read up to the limit (413 past it) and then
handed to the application whole. The limit follows the path: an exact
path's own, else the first matching prefix's, else the default (a store
read over ``/rpc`` takes a few ids and a filter; a bulk import is one call
of many tasks)."""

from __future__ import annotations

import json
from typing import Any


class BodyLimit:
    """``limit`` bytes at most; ``larger``: other limits for paths under
    these prefixes; ``exact``: other limits for these paths (before the
    prefixes)."""

    def __init__(
        self,
        app: Any,
        limit: int,
        larger: dict[str, int] | None = None,
        exact: dict[str, int] | None = None,
    ) -> None:
        self.app = app
        self.default = limit
        self.larger = dict(larger or {})
        self.exact = dict(exact or {})

    def limit_of(self, path: str) -> int:
        if path in self.exact:
            return self.exact[path]
        return next(
            (n for prefix, n in self.larger.items() if path.startswith(prefix)), self.default
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(str(scope.get("path", "")))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await refuse(send, 400, "Content-Length is not a number")
                    return
                if declared > limit:
                    await refuse(send, 413, f"request body larger than {limit} bytes")
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
                await refuse(send, 413, f"request body larger than {limit} bytes")
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
