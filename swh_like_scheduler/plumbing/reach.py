"""Where ``http`` callbacks may go.

A callback URL (a job's ``http`` callback, a ``webhook`` task's ``url``) is
chosen by whoever may write tasks; the worker that calls it runs inside the
operator's network. Without a rule, a client could make the worker call what
only that network reaches: a cloud's metadata service (``169.254.169.254``),
a database on loopback, an admin page on a private address. So a callback
goes only to public addresses (in none of the IANA special-purpose and
non-unicast blocks: :mod:`.blocks`, one list whatever the interpreter),
unless the operator allows more:
networks (``10.0.0.0/8``, ``127.0.0.1``) or host names (``hooks.internal``),
with the setting ``callback_allow`` (``SWH_SCHEDULER_CALLBACK_ALLOW``,
comma-separated).

One rule, judged on the host as a resolver or an HTTP client would read it
(:func:`url_host`):

- percent-escapes are decoded, case is folded, trailing dots are dropped and
  a non-ASCII name becomes its IDNA (``xn--``) form, so full-width digits
  and ideographic full stops read as the ASCII ones;
- every numeric IPv4 form the C library's ``inet_aton`` takes is an address
  (``2130706433``, ``0177.0.0.1``, ``0x7f000001``, ``127.1``, ``0x7f.1``),
  and a name that ends in a number but is none of them is refused;
- an IPv6 address that carries an IPv4 one (IPv4-mapped ``::ffff:0:0/96``,
  IPv4-translated ``::ffff:0:0:0/96``, IPv4-compatible ``::/96``, NAT64
  ``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``) is judged as
  the IPv4 address it carries (:func:`embedded`);
- ``localhost`` and ``*.localhost`` are loopback, never looked up.

The rule is checked where a callback URL comes in (a job, a task of a type
that calls its ``url``: :mod:`.argcheck`), where names are not resolved, and
by the ``webhook`` worker at delivery, which resolves the name once, checks
every address and connects to a checked one (:meth:`Reach.destination`).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..domain.exceptions import InvalidInput
from .blocks import is_public, special_block

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], list[Address]]
#: the environment variable of the setting (read at the edges only)
ALLOW_ENV = "SWH_SCHEDULER_CALLBACK_ALLOW"
SCHEMES = ("http", "https")

#: a host name as resolvers take it (after IDNA): labels of letters,
#: digits, hyphens and underscores
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
#: a label a numeric IPv4 form may end with (WHATWG's "ends in a number")
_NUMBER = re.compile(r"0x[0-9a-f]*|[0-9]+")
_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


class Refused(ValueError):
    """A callback URL that the rule refuses; the message says why."""


def _kind(address: Address) -> str:
    """What ``address`` is, and the block that says so."""
    block = special_block(address)
    return "not public" if block is None else f"{block.kind}, in {block.network}"


def _ipv4_part(part: str) -> int:
    if part.startswith("0x"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)
    return int(part, 10)


def numeric_ipv4(name: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a numeric host stands for, as ``inet_aton`` reads
    it: one to four parts, each decimal, octal (leading ``0``) or
    hexadecimal (``0x``), the last filling the bytes left. ``None`` for a
    name that does not end in a number; :class:`Refused` for one that does
    but is no address (``1.2.3.4.5``, ``256.1.1.1``, ``08.1``): a resolver
    would send it to DNS, where no name ends in a number."""
    parts = name.split(".")
    if not _NUMBER.fullmatch(parts[-1]):
        return None
    try:
        if len(parts) > 4:
            raise ValueError
        *head, last = [_ipv4_part(part) for part in parts]
        if any(value > 255 for value in head) or last >= 256 ** (4 - len(head)):
            raise ValueError
    except ValueError:
        raise Refused(f"{name} ends in a number but is not an IPv4 address") from None
    value = last
    for index, byte in enumerate(head):
        value += byte << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def embedded(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 ``address`` reaches through (see the
    module doc); for ``64:ff9b:1::/48``, whose prefix length each network
    chooses, every place RFC 6052 allows (48, 56, 64 and 96 bits). Empty for
    an IPv4 address or one that carries none (``::`` and ``::1`` included)."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    packed = address.packed
    if address in _MAPPED or address in _TRANSLATED or address in _NAT64:
        return (ipaddress.IPv4Address(packed[12:]),)
    if address in _COMPATIBLE:
        return (ipaddress.IPv4Address(packed[12:]),) if int(address) > 1 else ()
    if address in _SIX_TO_FOUR:
        return (ipaddress.IPv4Address(packed[2:6]),)
    if address in _NAT64_LOCAL:
        places = (
            packed[6:8] + packed[9:11],
            packed[7:8] + packed[9:12],
            packed[9:13],
            packed[12:16],
        )
        return tuple(sorted({ipaddress.IPv4Address(place) for place in places}))
    return ()


@dataclass(frozen=True)
class Host:
    """A URL's host as judged: ``name`` (lower-case ASCII, no trailing dot)
    or ``address``, the port given (``None``: the scheme's), and the host
    as the URL wrote it (``given``, for messages)."""

    given: str
    name: str | None
    address: Address | None
    port: int | None
    scheme: str

    @property
    def text(self) -> str:
        return self.name if self.name is not None else str(self.address)

    @property
    def shown(self) -> str:
        """The host for a message: as given, and as read when that differs."""
        return self.given if self.given == self.text else f"{self.given} ({self.text})"

    @property
    def authority(self) -> str:
        """What goes in the ``Host`` header."""
        shown = self.text
        if isinstance(self.address, ipaddress.IPv6Address):
            shown = f"[{shown}]"
        return shown if self.port is None else f"{shown}:{self.port}"


def url_host(url: str) -> Host:
    """The host of ``url``, normalised (module doc); :class:`Refused` when
    it has none, or one no resolver would read the same way."""
    if any(c.isspace() or not c.isprintable() or c == "\\" for c in url):
        raise Refused("holds a space, a control character or a backslash")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise Refused(f"is not a URL ({error})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise Refused("must be an http:// or https:// URL")
    raw = parts.hostname or ""
    bracketed = parts.netloc.rpartition("@")[2].startswith("[")
    try:
        host = unquote(raw, errors="strict") if "%" in raw and not bracketed else raw
    except UnicodeDecodeError:
        raise Refused(f"{raw!r} escapes bytes that are not UTF-8") from None
    if bracketed:
        try:
            address = ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise Refused(f"[{host}] is not an IPv6 address") from None
        return Host(raw, None, address, port, scheme)
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise Refused(f"{host!r} is not a valid host name") from None
    host = host.lower().rstrip(".")
    if not host:
        raise Refused("has no host")
    if not _NAME.fullmatch(host):
        raise Refused(f"{host!r} is not a valid host name")
    numeric = numeric_ipv4(host)
    if numeric is not None:
        return Host(raw, None, numeric, port, scheme)
    return Host(raw, host, None, port, scheme)


def resolve(host: str) -> list[Address]:
    """Every address ``host`` resolves to, once each, in the resolver's
    order (empty when it does not resolve)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    addresses: list[Address] = []
    for item in found:
        address = ipaddress.ip_address(str(item[4][0]).partition("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


@dataclass(frozen=True)
class Destination:
    """Where a callback goes: its ``host`` and the ``addresses`` it was
    judged by (empty for a name judged without resolving it)."""

    host: Host
    addresses: tuple[Address, ...]


@dataclass(frozen=True)
class Reach:
    """Public addresses, plus the ``networks`` and ``hosts`` allowed."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: str | Iterable[str], *, field: str = "callback_allow") -> Reach:
        """From ``10.0.0.0/8, 127.0.0.1, hooks.internal`` (a text or a list)."""
        items = entries.split(",") if isinstance(entries, str) else list(entries)
        networks: list[Network] = []
        hosts: set[str] = set()
        for raw in items:
            entry = str(raw).strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            try:
                host = url_host(f"http://{entry}/")
            except Refused:
                host = None
            if host is None or "/" in entry or host.port is not None:
                raise InvalidInput(field, f"{entry!r} is neither a network nor a host name")
            if host.address is not None:
                networks.append(ipaddress.ip_network(host.address))
            else:
                hosts.add(host.text)
        return cls(tuple(networks), frozenset(hosts))

    def _listed(self, address: Address) -> bool:
        return any(address in network for network in self.networks)

    def allows(self, address: Address) -> bool:
        """An address in an allowed network, else a public one; an IPv6
        address that carries IPv4 ones is judged as them (:func:`embedded`)."""
        if self._listed(address):
            return True
        inner = embedded(address)
        if inner:
            return all(self._listed(v4) or is_public(v4) for v4 in inner)
        return is_public(address)

    def _refusal(self, host: Host, address: Address) -> str | None:
        if self.allows(address):
            return None
        inner = [v4 for v4 in embedded(address) if not (self._listed(v4) or is_public(v4))]
        shown, kind = str(address), _kind(address)
        if inner:
            shown, kind = f"{inner[0]}, carried by {address},", _kind(inner[0])
        return (
            f"{host.shown} is not public ({shown} is {kind}); callbacks go to public "
            f"addresses unless the setting callback_allow ({ALLOW_ENV}) names it"
        )

    def destination(self, url: str, *, resolver: Resolver | None = None) -> Destination:
        """Where a callback to ``url`` goes, every address checked; raises
        :class:`Refused` saying why it may not go there. Without a
        ``resolver``, a name is not looked up (no addresses); with one (the
        worker's :func:`resolve`), it is looked up once, and the addresses
        returned are those to connect to."""
        host = url_host(url)
        if host.address is not None:
            addresses: list[Address] = [host.address]
        elif host.text in self.hosts:
            found = resolver(host.text) if resolver is not None else []
            if resolver is not None and not found:
                raise Refused(f"{host.text} does not resolve")
            return Destination(host, tuple(found))
        elif host.text == "localhost" or host.text.endswith(".localhost"):
            addresses = [_LOOPBACK]
        elif resolver is None:
            return Destination(host, ())
        else:
            addresses = resolver(host.text)
            if not addresses:
                raise Refused(f"{host.text} does not resolve")
        for address in addresses:
            why = self._refusal(host, address)
            if why is not None:
                raise Refused(why)
        return Destination(host, tuple(addresses))

    def problem(self, url: str, *, resolver: Resolver | None = None) -> str | None:
        """Why a callback may not go to ``url``, or ``None`` (see
        :meth:`destination`)."""
        try:
            self.destination(url, resolver=resolver)
        except Refused as refused:
            return str(refused)
        return None


__all__ = [
    "ALLOW_ENV",
    "Destination",
    "Host",
    "Reach",
    "Refused",
    "embedded",
    "numeric_ipv4",
    "resolve",
    "url_host",
]
