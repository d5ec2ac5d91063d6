"""The addresses no callback goes to, as one explicit list.

Every block of IANA's *IPv4 Special-Purpose Address Registry* and *IPv6
Special-Purpose Address Registry*, the non-unicast blocks (multicast, the
IPv4 reserved block and broadcast) and, for IPv6, everything outside the
global unicast space ``2000::/3`` (the rest is unallocated). The list
decides, not :mod:`ipaddress`'s ``is_global``, whose answer changes with
the interpreter: Python 3.11.7 calls ``192.0.0.192`` (in ``192.0.0.0/24``,
a cloud metadata address in SSRF cheat sheets) and ``224.0.0.1`` global.

Blocks the registries mark globally reachable are refused too: anycast
services (PCP and TURN in ``192.0.0.0/24`` and ``2001::/23``), AS112 DNS
sinks, AMT relays, ORCHIDv2 and DRIP identifiers. None is where a callback
is received, and one rule ("a block of the registries is refused") is
easier to check than a list of exceptions.

The IPv6 blocks that carry an IPv4 address (IPv4-mapped, NAT64, 6to4...)
are not here: :func:`.reach.embedded` judges them as the address they
carry. :func:`special_block` answers for a bare address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: ``(network, what an address in it is)`` of every refused IPv4 block
IPV4_BLOCKS: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "'this network'"),
    ("0.0.0.0/32", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved for IETF protocol assignments"),
    ("192.0.2.0/24", "for documentation"),
    ("192.31.196.0/24", "an AS112 DNS sink"),
    ("192.52.193.0/24", "an AMT relay"),
    ("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
    ("192.168.0.0/16", "private"),
    ("192.175.48.0/24", "an AS112 DNS sink"),
    ("198.18.0.0/15", "for benchmarking"),
    ("198.51.100.0/24", "for documentation"),
    ("203.0.113.0/24", "for documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "broadcast"),
)

#: ``(network, what an address in it is)`` of every refused IPv6 block
#: (besides all that is outside :data:`GLOBAL_UNICAST`)
IPV6_BLOCKS: tuple[tuple[str, str], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "a dummy address"),
    ("2001::/23", "reserved for IETF protocol assignments"),
    ("2001::/32", "Teredo (an obfuscated IPv4 address)"),
    ("2001:2::/48", "for benchmarking"),
    ("2001:db8::/32", "for documentation"),
    ("2620:4f:8000::/48", "an AS112 DNS sink"),
    ("3fff::/20", "for documentation"),
    ("5f00::/16", "a segment routing identifier"),
    ("fc00::/7", "private (unique local)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
)

#: the only IPv6 space allocated for global unicast
GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


@dataclass(frozen=True)
class Block:
    """A refused block: its ``network`` (as written) and what an address in
    it is (``kind``: ``loopback``, ``reserved for IETF protocol
    assignments``...)."""

    network: str
    kind: str


#: what is outside :data:`GLOBAL_UNICAST` and in no listed IPv6 block
UNALLOCATED = Block(f"outside {GLOBAL_UNICAST}", "not global unicast")


@dataclass(frozen=True)
class _Entry:
    value: int
    mask: int
    length: int
    block: Block


def _table(entries: tuple[tuple[str, str], ...], bits: int) -> tuple[_Entry, ...]:
    table = []
    for text, kind in entries:
        network = ipaddress.ip_network(text)
        mask = ((1 << network.prefixlen) - 1) << (bits - network.prefixlen)
        value = int(network.network_address)
        table.append(_Entry(value, mask, network.prefixlen, Block(text, kind)))
    # the longest prefix first: the first match is the most precise
    return tuple(sorted(table, key=lambda e: -e.length))


_TABLES = {4: _table(IPV4_BLOCKS, 32), 6: _table(IPV6_BLOCKS, 128)}


def special_block(address: Address) -> Block | None:
    """The refused block ``address`` is in, the most precise one, else
    ``None`` (a public address). An IPv6 address that carries an IPv4 one
    is judged here as written (the caller looks at what it carries)."""
    value = int(address)
    for entry in _TABLES[address.version]:
        if value & entry.mask == entry.value:
            return entry.block
    if isinstance(address, ipaddress.IPv6Address) and address not in GLOBAL_UNICAST:
        return UNALLOCATED
    return None


def is_public(address: Address) -> bool:
    """``address`` is in none of the refused blocks."""
    return special_block(address) is None


__all__ = [
    "GLOBAL_UNICAST",
    "IPV4_BLOCKS",
    "IPV6_BLOCKS",
    "UNALLOCATED",
    "Block",
    "is_public",
    "special_block",
]
