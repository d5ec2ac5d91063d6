"""How ``rpc-serve`` holds its connections: uvicorn with bounds on slow
clients, a connection limit, and forwarded headers from named proxies only.

uvicorn bounds the wait between requests of a kept-alive connection, but
not the wait for a request: a client that opens a connection and sends
half a request line holds it (and a file descriptor) for ever, and a
thousand of them exhaust the process. :class:`GuardedH11Protocol` closes a
connection whose request head is not complete within ``header_timeout``
seconds of its first byte (of the connection, for its first request), and
one whose request body stalls for ``body_timeout`` seconds while the
server waits for it; past ``max_connections`` open connections a new one
is answered 503 and closed before anything is read. At start the process's
open-file soft limit is raised to its hard limit, so the connection limit,
not the descriptors, is what bounds the server.

``X-Forwarded-For`` and ``X-Forwarded-Proto`` are honoured from the
addresses given (``forwarded_allow_ips``) only, never by default: the
client address of the rate limit and the access log is the connection's
own unless a proxy the operator named vouches for another."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

_BUSY_BODY = b'{"detail": "too many connections: try again in 1 s"}'
#: a new connection past the limit gets this, then the connection is closed
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: application/json\r\n"
    b"content-length: %d\r\n"
    b"retry-after: 1\r\n"
    b"x-content-type-options: nosniff\r\n"
    b"cache-control: no-store\r\n"
    b"connection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)
#: descriptors kept for what is not a client connection (the database
#: pool, the broker, log files)
RESERVED_FILES = 128


@dataclass(frozen=True)
class Bounds:
    """What a connection may cost."""

    #: seconds a request head may take from its first byte
    header_timeout: float = 10.0
    #: seconds a request body may stall while the server waits for it
    body_timeout: float = 30.0
    #: seconds a kept-alive connection may wait for its next request
    keep_alive_timeout: int = 5
    #: open connections at most; a new one past them gets a 503
    max_connections: int = 4096


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on request heads, an idle
    bound on request bodies and a connection limit (class attributes:
    :func:`guarded_protocol` sets them)."""

    header_timeout: float = Bounds.header_timeout
    body_timeout: float = Bounds.body_timeout
    max_connections: int = Bounds.max_connections

    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self.connections.discard(self)
            transport.write(BUSY)
            transport.close()
            return
        self._head_timer = self.loop.call_later(self.header_timeout, self._expire)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have started

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Arm or cancel the timers by where the client's request stands."""
        if self.transport.is_closing():
            self._cancel()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            # bytes of a head (a pipelined or kept-alive request): its deadline
            # counts from them; with none, the keep-alive timeout runs
            if self._head_timer is None and self.conn.trailing_data[0]:
                self._head_timer = self.loop.call_later(self.header_timeout, self._expire)
            return
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if state is h11.SEND_BODY:
            self._body_timer = self.loop.call_later(self.body_timeout, self._stalled)

    def _stalled(self) -> None:
        self._body_timer = None
        if self.flow.read_paused:  # the server is not reading: no stall of the client's
            self._body_timer = self.loop.call_later(self.body_timeout, self._stalled)
            return
        self._expire()

    def _expire(self) -> None:
        self._cancel()
        if not self.transport.is_closing():
            self.transport.close()

    def _cancel(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = None


def guarded_protocol(bounds: Bounds) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn is given (``http=``), with ``bounds``."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "header_timeout": bounds.header_timeout,
            "body_timeout": bounds.body_timeout,
            "max_connections": bounds.max_connections,
        },
    )


def raise_open_files() -> int:
    """Raise the open-file soft limit to the hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # a platform that refuses: keep what we have
            pass
    return soft


def connections_within(wanted: int, open_files: int) -> int:
    """``wanted`` connections, or fewer when the open files cannot hold them."""
    if open_files == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, open_files - RESERVED_FILES))


def forwarded_ips(entries: Sequence[str], *, field: str) -> list[str]:
    """Proxy addresses or networks (``10.0.0.0/8``), or ``*`` for any; each
    checked, so that a typo fails at start rather than trusting nobody (or
    everybody)."""
    from ..domain.exceptions import InvalidInput

    checked: list[str] = []
    for number, entry in enumerate(entries, 1):
        entry = entry.strip()
        if entry == "*":
            checked.append(entry)
            continue
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise InvalidInput(
                field,
                f"entry {number} ({entry!r}) is not an address, a network like 10.0.0.0/8, nor *",
            ) from None
        checked.append(entry)
    if not checked:
        raise InvalidInput(field, "names no proxy address")
    return checked


def beyond_loopback(host: str) -> bool:
    """Whether a server bound to ``host`` is reachable from other machines."""
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name: it resolves to who knows what
        return True


def run(app: Any, *, host: str, port: int, log_level: str, bounds: Bounds, forwarded: Any) -> None:
    """Serve ``app`` with uvicorn within ``bounds``; ``forwarded``: the
    proxies whose forwarded headers count (``None``: nobody's)."""
    import uvicorn

    # what the process built to serve (the app, its routes and schemas, the
    # store's compiled statements) lives as long as it does: kept out of
    # the collector's full passes, which otherwise walk all of it now and
    # then in the middle of a request (a pause of tens of milliseconds)
    gc.collect()
    gc.freeze()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        http=guarded_protocol(bounds),
        timeout_keep_alive=bounds.keep_alive_timeout,
        proxy_headers=forwarded is not None,
        forwarded_allow_ips=forwarded,
        server_header=False,
    )
