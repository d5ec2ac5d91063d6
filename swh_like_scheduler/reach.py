"""Where ``http`` callbacks may go.

A job's callback URL is chosen by whoever may write jobs; the worker that
posts to it runs inside the operator's network. Without a rule, a client
could make the worker call what only that network reaches: a cloud's
metadata service (``169.254.169.254``), a database on loopback, an admin
page on a private address. So a callback goes only to public (global)
addresses, unless the operator allows more: networks (``10.0.0.0/8``,
``127.0.0.1``) or host names (``hooks.internal``), with the setting
``callback_allow`` (``SWH_SCHEDULER_CALLBACK_ALLOW``, comma-separated).

The rule is checked twice: when a job is put (the API and the command line;
a literal address or a ``localhost`` name is refused at once, other names
are not resolved then) and by the ``webhook`` worker before each delivery,
on every address the name resolves to.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .exceptions import InvalidInput

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: the environment variable of the setting (read at the edges only)
ALLOW_ENV = "SWH_SCHEDULER_CALLBACK_ALLOW"


def _kind(address: Address) -> str:
    for name in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
        if getattr(address, f"is_{name}", False):
            return name.replace("_", "-")
    return "non-public"


def resolve(host: str) -> list[Address]:
    """Every address ``host`` resolves to (empty when it does not)."""
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return [ipaddress.ip_address(str(item[4][0]).split("%")[0]) for item in found]


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
            except ValueError:
                if "/" in entry or not all(part for part in entry.split(".")):
                    raise InvalidInput(
                        field, f"{entry!r} is neither a network nor a host name"
                    ) from None
                hosts.add(entry.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def allows(self, address: Address) -> bool:
        return address.is_global or any(address in network for network in self.networks)

    def problem(
        self, url: str, *, resolver: Callable[[str], list[Address]] | None = None
    ) -> str | None:
        """Why a callback may not go to ``url``, or ``None``. Without a
        ``resolver``, only literal addresses and ``localhost`` names are
        judged; with one (the worker's :func:`resolve`), every address the
        host resolves to."""
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
        if not host:
            return "has no host"
        if host in self.hosts:
            return None
        try:
            addresses: list[Address] = [ipaddress.ip_address(host)]
        except ValueError:
            if host == "localhost" or host.endswith(".localhost"):
                addresses = [ipaddress.ip_address("127.0.0.1")]
            elif resolver is None:
                return None
            else:
                addresses = resolver(host)
                if not addresses:
                    return f"{host} does not resolve"
        for address in addresses:
            if not self.allows(address):
                return (
                    f"{host} is not public ({address} is {_kind(address)}); callbacks go "
                    f"to public addresses unless the setting callback_allow ({ALLOW_ENV}) "
                    "names it"
                )
        return None


__all__ = ["ALLOW_ENV", "Reach", "resolve"]
