"""What every request and answer of the API meets at its edge: ASGI middlewares.

:class:`HostCheck` refuses a request whose ``Host`` header names none of
the configured host names (a 400): a server reachable beyond loopback
answers for its own names only, so a name an attacker points at it (DNS
rebinding, a forged virtual host) gets nothing.

:class:`SecurityHeaders` adds to every answer — API JSON, the documentation
pages, the middlewares' own refusals (401, 413, 429), errors — the headers a
browser needs to treat it safely: no content sniffing, no framing, no
referrer, and ``Cache-Control: no-store`` except on the documentation's
script and style files. A header the route set itself is kept (the
console's stricter ``Content-Security-Policy`` is not replaced). It also
makes each 405 answer's ``Allow`` list exactly the methods the path serves:
the router names only the first route it found for the path, though a
path like ``/tasks`` has one route per method."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match, Mount

from .limits import refuse

#: added to every answer unless it has its own (lower-case names)
SAFE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"referrer-policy", b"no-referrer"),
)
NO_STORE = (b"cache-control", b"no-store")
#: the methods an ``Allow`` header may name
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class SecurityHeaders:
    """The safe headers on every answer; an exact ``Allow`` on each 405.

    ``routes`` gives the application's routes (read when a 405 is sent);
    answers under ``cacheable`` path prefixes may be cached."""

    def __init__(
        self,
        app: Any,
        *,
        routes: Callable[[], Sequence[BaseRoute]],
        cacheable: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.routes = routes
        self.cacheable = tuple(cacheable)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # as the request came: routing rewrites the scope (a mount's root_path)
        path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
        extra = SAFE_HEADERS if path.startswith(self.cacheable) else (*SAFE_HEADERS, NO_STORE)

        started = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", ()))
                if message["status"] == 405:
                    headers = self._allow(path, root, headers)
                present = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in extra if n not in present]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            # a failure no handler answered: a 500 with the headers here (the
            # server's own error page, outside, would have none), then the
            # error goes on to be logged
            if not started:
                await refuse(sending, 500, "internal server error")
            raise

    def _allow(
        self, path: str, root: str, headers: list[tuple[bytes, bytes]]
    ) -> list[tuple[bytes, bytes]]:
        served = served_methods(self.routes(), path, root)
        if not served:  # a mounted application's answer stands (or nothing is known)
            return headers
        kept = [(n, v) for n, v in headers if n.lower() != b"allow"]
        return [*kept, (b"allow", ", ".join(served).encode())]


def served_methods(routes: Sequence[BaseRoute], path: str, root: str = "") -> list[str] | None:
    """The methods some route serves at ``path``, asked of each route as the
    router asks it; ``None`` when the path is a mounted application's (which
    answers for its own methods)."""
    served = []
    for method in METHODS:
        probe = {
            "type": "http",
            "method": method,
            "path": path,
            "root_path": root,
            "headers": [],
        }
        for route in routes:
            if route.matches(probe)[0] is Match.FULL:
                if isinstance(route, Mount):
                    return None
                served.append(method)
                break
    return served


class HostCheck:
    """400 unless the ``Host`` header names one of ``allowed``: exact names
    (case does not matter, the port is ignored), ``*.example.org`` for any
    name under ``example.org``, or ``*`` for any."""

    def __init__(self, app: Any, *, allowed: Iterable[str]) -> None:
        self.app = app
        names = [a.strip().lower().strip("[]").rstrip(".") for a in allowed]
        self.any = "*" in names
        self.exact = frozenset(n for n in names if not n.startswith("*"))
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))

    def accepts(self, host: str | None) -> bool:
        if self.any:
            return True
        if not host:
            return False
        name = host_name(host)
        return name in self.exact or (bool(self.suffixes) and name.endswith(self.suffixes))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = next(
            (v.decode("latin-1") for n, v in scope.get("headers", ()) if n == b"host"), None
        )
        if self.accepts(host):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await refuse(
            send, 400, "the Host header names none of this server's hosts (--allowed-hosts)"
        )


def host_name(host: str) -> str:
    """The name of a ``Host`` value, without its port: ``[::1]:5008`` → ``::1``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, _, _port = host.partition(":")
    return name.rstrip(".")
