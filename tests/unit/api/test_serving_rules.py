"""The pure rules of the HTTP edge (issue 60): which body limit a request
gets, what a client's connections are counted by, which addresses have no
cap, and which names a server on loopback answers for."""

from __future__ import annotations

import pytest

from swh_like_scheduler.api.edge import HostCheck
from swh_like_scheduler.api.limits import BodyLimit
from swh_like_scheduler.api.serving import (
    Bounds,
    address_key,
    loopback_hosts,
    uncapped,
    uncapped_networks,
)


def _limits() -> BodyLimit:
    return BodyLimit(
        None,
        1000,
        posts={"/rpc/import_tasks": 10**8},
        exact={"/console/login": 8192},
        prefixes={"/console/": 1024, "/console/tasks/": 512},
    )


@pytest.mark.parametrize(
    ("method", "path", "limit"),
    [
        ("GET", "/tasks", 0),
        ("HEAD", "/rpc/import_tasks", 0),
        ("GET", "/console/login", 0),
        ("POST", "/rpc/import_tasks", 10**8),
        ("PUT", "/rpc/import_tasks", 1000),
        ("POST", "/rpc/import_tasks/", 1000),
        ("POST", "/rpc/search_tasks", 1000),
        ("POST", "/rpc/no_such_method", 1000),
        ("POST", "/console/login", 8192),
        ("POST", "/console/logout", 1024),
        ("POST", "/console/tasks/1/delete", 512),  # the longest prefix
        ("DELETE", "/jobs/x", 1000),
    ],
)
def test_the_limit_follows_the_method_and_the_exact_path(
    method: str, path: str, limit: int
) -> None:
    assert _limits().limit_of(method, path) == limit


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("not an address", "not an address"),
    ],
)
def test_connections_are_counted_by_address_and_ipv6_by_64(address: str, key: str) -> None:
    assert address_key(address) == key


def test_the_named_proxies_have_no_cap() -> None:
    networks = uncapped_networks(["10.0.0.0/8", "192.0.2.1"])
    assert uncapped("10.1.2.3", networks) and uncapped("::ffff:10.1.2.3", networks)
    assert uncapped("192.0.2.1", networks) and not uncapped("192.0.2.2", networks)
    assert not uncapped("10.1.2.3", uncapped_networks([]))
    assert uncapped("203.0.113.9", uncapped_networks(["*"]))
    assert not uncapped("garbage", networks)


def test_the_cap_per_address_defaults_to_a_quarter() -> None:
    assert Bounds().per_address == 1024
    assert Bounds(max_connections=10).per_address == 2
    assert Bounds(max_connections=2).per_address == 1
    assert Bounds(max_connections=10, max_connections_per_address=7).per_address == 7


@pytest.mark.parametrize("bound", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.5"])
def test_on_loopback_the_loopback_names_are_answered(bound: str) -> None:
    check = HostCheck(None, allowed=loopback_hosts(bound))
    for host in (
        "localhost",
        "LOCALHOST:5008",
        "localhost.",
        "127.0.0.1",
        "127.0.0.1:1",
        "[::1]:8",
    ):
        assert check.accepts(host), (bound, host)
    for host in ("evil.example", "evil.example:5008", "127.0.0.2:5008", "[::2]", "", None):
        assert not check.accepts(host), (bound, host)
    if bound == "127.0.0.5":  # its own address too
        assert check.accepts("127.0.0.5:5008")
