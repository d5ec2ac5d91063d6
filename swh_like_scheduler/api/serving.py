"""How ``rpc-serve`` holds its connections: uvicorn with bounds on slow
clients, connection limits, and forwarded headers from named proxies only.

uvicorn bounds the wait between requests of a kept-alive connection, but
not the wait for a request: a client that opens a connection and sends
half a request line holds it (and a file descriptor) for ever, and a
thousand of them exhaust the process. :class:`GuardedH11Protocol` closes a
connection whose request head is not complete within ``header_timeout``
seconds of its first byte (of the connection, for its first request), and
one whose request body stalls for ``body_timeout`` seconds while the
server waits for it. A body trickled just faster than that stall bound is
not complete ``body_deadline`` seconds after its head: it is then cut (a
408, and the connection closed) unless it has come at ``body_min_rate``
bytes per second on average and the server has not answered yet (a large
import on a slow link goes on; a body the server refused is not worth
waiting for). Past ``max_connections`` open connections a new one is
answered 503, and past ``max_connections_per_address`` from one client
address (an IPv6 client's /64) a 429, both before anything is read; the
addresses of the proxies named in ``forwarded_allow_ips`` have no cap of
their own (their clients are many). At start the process's open-file soft
limit is raised to its hard limit, so the connection limit, not the
descriptors, is what bounds the server.

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
from dataclasses import dataclass, field
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def _answer(status: bytes, detail: bytes, *, retry: bool = True) -> bytes:
    """A whole answer written before (or instead of) the application's, and
    the connection closed after it."""
    body = b'{"detail": "%s"}' % detail
    return (
        b"HTTP/1.1 %s\r\n"
        b"content-type: application/json\r\n"
        b"content-length: %d\r\n"
        b"%s"
        b"x-content-type-options: nosniff\r\n"
        b"cache-control: no-store\r\n"
        b"connection: close\r\n\r\n%s"
        % (status, len(body), b"retry-after: 1\r\n" if retry else b"", body)
    )


#: a new connection past the limit gets this, then the connection is closed
BUSY = _answer(b"503 Service Unavailable", b"too many connections: try again in 1 s")
#: a new connection past its address's cap
CROWDED = _answer(
    b"429 Too Many Requests",
    b"too many connections from this address: close some, or try again in 1 s",
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
    #: seconds a request body may take from its head, unless it comes at
    #: ``body_min_rate`` at least
    body_deadline: float = 60.0
    #: bytes per second, on average since its head, a body past its deadline
    #: must have come at to go on
    body_min_rate: int = 65536
    #: seconds a kept-alive connection may wait for its next request
    keep_alive_timeout: int = 5
    #: open connections at most; a new one past them gets a 503
    max_connections: int = 4096
    #: open connections from one client address (an IPv6 client's /64) at
    #: most; a new one past them gets a 429 (``None``: a quarter of
    #: ``max_connections``)
    max_connections_per_address: int | None = None
    #: addresses or networks without a cap of their own (the proxies named
    #: by ``forwarded_allow_ips``; ``*``: every address)
    uncapped: tuple[str, ...] = field(default=())

    @property
    def per_address(self) -> int:
        """The cap of one address's connections."""
        if self.max_connections_per_address is not None:
            return self.max_connections_per_address
        return max(1, self.max_connections // 4)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on request heads, a stall
    bound and a deadline on request bodies, and connection limits (class
    attributes: :func:`guarded_protocol` sets them)."""

    header_timeout: float = Bounds.header_timeout
    body_timeout: float = Bounds.body_timeout
    body_deadline: float = Bounds.body_deadline
    body_min_rate: int = Bounds.body_min_rate
    max_connections: int = Bounds.max_connections
    per_address: int = Bounds.max_connections
    #: the open connections of each capped address (one count per server)
    addresses: ClassVar[dict[str, int]] = {}
    #: the addresses without a cap (the named proxies')
    exempt: ClassVar[Uncapped] = None

    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _deadline_timer: asyncio.TimerHandle | None = None
    #: when the body of the request now read began (loop time), and its bytes so far
    _body_since: float | None = None
    _body_bytes: int = 0
    #: the address this connection counts against
    _address: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._turn_away(BUSY)
            return
        address = self.client[0] if self.client else None
        if address is not None and not uncapped(address, self.exempt):
            key = address_key(address)
            if self.addresses.get(key, 0) >= self.per_address:
                self._turn_away(CROWDED)
                return
            self.addresses[key] = self.addresses.get(key, 0) + 1
            self._address = key
        self._head_timer = self.loop.call_later(self.header_timeout, self._expire)

    def _turn_away(self, answer: bytes) -> None:
        self.connections.discard(self)
        self.transport.write(answer)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._body_since is not None:
            self._body_bytes += len(data)
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have started

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if self._address is not None:
            left = self.addresses.get(self._address, 1) - 1
            if left > 0:
                self.addresses[self._address] = left
            else:
                self.addresses.pop(self._address, None)
            self._address = None
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Arm or cancel the timers by where the client's request stands."""
        if self.transport.is_closing():
            self._cancel()
            return
        state = self.conn.their_state
        if state is not h11.SEND_BODY and self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        if state is not h11.SEND_BODY:
            self._body_since = None
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
            if self._body_since is None:  # a body begins: its deadline counts from now
                self._body_since, self._body_bytes = self.loop.time(), 0
                self._deadline_timer = self.loop.call_later(self.body_deadline, self._overdue)

    def _stalled(self) -> None:
        self._body_timer = None
        if self.flow.read_paused:  # the server is not reading: no stall of the client's
            self._body_timer = self.loop.call_later(self.body_timeout, self._stalled)
            return
        self._expire()

    def _overdue(self) -> None:
        """Past the body's deadline: cut it, unless the server waits for it
        and it comes fast enough (then ask again in a second)."""
        self._deadline_timer = None
        if self._body_since is None or self.transport.is_closing():
            return
        answered = self.cycle is not None and self.cycle.response_started
        if not answered:
            elapsed = self.loop.time() - self._body_since
            if self.flow.read_paused or self._body_bytes >= self.body_min_rate * elapsed:
                self._deadline_timer = self.loop.call_later(1.0, self._overdue)
                return
            self.transport.write(late(self.body_deadline, self.body_min_rate))
        self._expire()

    def _expire(self) -> None:
        self._cancel()
        if not self.transport.is_closing():
            self.transport.close()

    def _cancel(self) -> None:
        for timer in (self._head_timer, self._body_timer, self._deadline_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = self._deadline_timer = None


def late(deadline: float, rate: int) -> bytes:
    """The answer to a body cut at its deadline."""
    return _answer(
        b"408 Request Timeout",
        b"the request body took longer than %g s at less than %d bytes per second"
        % (deadline, rate),
        retry=False,
    )


#: parsed networks without a cap; ``None``: none; ``True``: every address
Uncapped = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] | bool | None


def uncapped_networks(entries: Sequence[str]) -> Uncapped:
    """``entries`` (checked by :func:`forwarded_ips`) as networks."""
    if not entries:
        return None
    if "*" in entries:
        return True
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


def uncapped(address: str, networks: Uncapped) -> bool:
    """Whether connections from ``address`` have no cap of their own."""
    if networks is None or isinstance(networks, bool):
        return bool(networks)
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


def address_key(address: str) -> str:
    """What a client's connections are counted by: its IPv4 address (an
    IPv4-mapped IPv6 address's too), its IPv6 address's /64 (a client
    commonly holds a whole /64)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def guarded_protocol(bounds: Bounds) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn is given (``http=``), with ``bounds``
    (and its own count of connections per address)."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "header_timeout": bounds.header_timeout,
            "body_timeout": bounds.body_timeout,
            "body_deadline": bounds.body_deadline,
            "body_min_rate": bounds.body_min_rate,
            "max_connections": bounds.max_connections,
            "per_address": bounds.per_address,
            "addresses": {},
            "exempt": uncapped_networks(bounds.uncapped),
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


#: the names a server on loopback answers for when none are given
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def loopback_hosts(host: str) -> tuple[str, ...]:
    """The ``Host`` names a server bound to loopback ``host`` answers for
    when none are given: the loopback names and its own address (a page
    whose name an attacker rebinds to 127.0.0.1 names itself, and is
    refused)."""
    bound = host.strip().strip("[]").lower()
    return LOOPBACK_NAMES if bound in LOOPBACK_NAMES else (*LOOPBACK_NAMES, bound)


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
