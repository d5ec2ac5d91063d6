"""One address rule whatever the interpreter: every IANA special-purpose and
non-unicast block refused, named in the refusal, as written and through
every IPv6 form that carries an IPv4 address; the addresses just outside a
block pass; the webhook worker's connect-time check is the same rule.

Issue 60: on Python 3.11.7 ``ipaddress`` calls ``192.0.0.192`` and
``224.0.0.1`` global, and the rule took its word."""

from __future__ import annotations

import ipaddress

import pytest

from swh_like_scheduler.plumbing.blocks import IPV4_BLOCKS, IPV6_BLOCKS, special_block
from swh_like_scheduler.plumbing.reach import Reach

#: one address of each block, written out (not computed from the list)
IPV4_CASES = [
    ("0.1.2.3", "0.0.0.0/8"),
    ("0.0.0.0", "0.0.0.0/32"),
    ("10.200.3.4", "10.0.0.0/8"),
    ("100.127.255.254", "100.64.0.0/10"),
    ("127.9.9.9", "127.0.0.0/8"),
    ("169.254.169.254", "169.254.0.0/16"),
    ("172.31.0.1", "172.16.0.0/12"),
    ("192.0.0.192", "192.0.0.0/24"),
    ("192.0.2.10", "192.0.2.0/24"),
    ("192.31.196.1", "192.31.196.0/24"),
    ("192.52.193.1", "192.52.193.0/24"),
    ("192.88.99.1", "192.88.99.0/24"),
    ("192.168.0.1", "192.168.0.0/16"),
    ("192.175.48.6", "192.175.48.0/24"),
    ("198.19.255.1", "198.18.0.0/15"),
    ("198.51.100.7", "198.51.100.0/24"),
    ("203.0.113.9", "203.0.113.0/24"),
    ("224.0.0.1", "224.0.0.0/4"),
    ("239.255.255.250", "224.0.0.0/4"),
    ("240.0.0.1", "240.0.0.0/4"),
    ("255.255.255.255", "255.255.255.255/32"),
]
IPV6_CASES = [
    ("::", "::/128"),
    ("::1", "::1/128"),
    ("100::7", "100::/64"),
    ("100:0:0:1::7", "100:0:0:1::/64"),
    ("2001:1::1", "2001::/23"),
    ("2001:4:112::1", "2001::/23"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32"),
    ("2001:2::5", "2001:2::/48"),
    ("2001:db8::1", "2001:db8::/32"),
    ("2620:4f:8000::42", "2620:4f:8000::/48"),
    ("3fff::1", "3fff::/20"),
    ("5f00::1", "5f00::/16"),
    ("fd00:ec2::254", "fc00::/7"),
    ("fe80::1", "fe80::/10"),
    ("fec0::1", "fec0::/10"),
    ("ff02::1", "ff00::/8"),
]


def test_every_block_has_a_case() -> None:
    """A block added to the list without a case here fails this test."""
    listed = {network for network, _ in (*IPV4_BLOCKS, *IPV6_BLOCKS)}
    assert listed == {network for _, network in (*IPV4_CASES, *IPV6_CASES)}


def _url(address: str) -> str:
    return f"http://[{address}]/" if ":" in address else f"http://{address}/"


@pytest.mark.parametrize(("address", "network"), IPV4_CASES + IPV6_CASES)
def test_each_block_is_refused_and_named(address: str, network: str) -> None:
    block = special_block(ipaddress.ip_address(address))
    assert block is not None and block.network == network
    problem = Reach().problem(_url(address))
    assert problem is not None and f"in {network})" in problem and block.kind in problem


@pytest.mark.parametrize(("address", "network"), IPV4_CASES)
def test_each_ipv4_block_is_refused_through_every_ipv6_carrier(address: str, network: str) -> None:
    v4 = ipaddress.IPv4Address(address)
    high, low = divmod(int(v4), 1 << 16)
    carriers = [
        f"::ffff:{address}",  # mapped
        f"::ffff:0:{high:x}:{low:x}",  # translated
        f"64:ff9b::{high:x}:{low:x}",  # NAT64
        f"2002:{high:x}:{low:x}::1",  # 6to4
    ]
    for carrier in carriers:
        problem = Reach().problem(_url(carrier))
        assert problem is not None and f"in {network})" in problem, (carrier, problem)
    # local-use NAT64 (/96 place): each place judged, the first refused one named
    local = f"64:ff9b:1::{high:x}:{low:x}"
    assert "is not public" in (Reach().problem(_url(local)) or "")


@pytest.mark.parametrize(
    "url",
    [
        "http://192.0.0.192/latest/meta-data/",
        "http://[64:ff9b::c000:c0]/",
        "http://[::ffff:192.0.0.192]/",
        "http://224.0.0.1/",
        "http://3221225664/",  # 192.0.0.192 in one number
    ],
)
def test_the_findings_of_issue_60_are_refused(url: str) -> None:
    assert "is not public" in (Reach().problem(url) or "")


@pytest.mark.parametrize(
    "address",
    [
        "100.63.255.255",  # before 100.64.0.0/10
        "100.128.0.0",  # after it
        "192.0.1.1",  # between 192.0.0.0/24 and 192.0.2.0/24
        "192.0.3.1",
        "198.17.255.255",  # around 198.18.0.0/15
        "198.20.0.0",
        "172.32.0.1",  # after 172.16.0.0/12
        "223.255.255.254",  # before multicast
        "8.8.8.8",
        "2001:200::1",  # after 2001::/23
        "2001:db9::1",  # after 2001:db8::/32
        "2a00:1450:4007:80f::200e",
        "2606:4700:4700::1111",
    ],
)
def test_the_addresses_around_the_blocks_pass(address: str) -> None:
    assert special_block(ipaddress.ip_address(address)) is None
    assert Reach().problem(_url(address)) is None


@pytest.mark.parametrize("address", ["4000::1", "1000::1", "e000::1"])
def test_ipv6_outside_global_unicast_is_refused(address: str) -> None:
    problem = Reach().problem(_url(address))
    assert problem is not None and "not global unicast, in outside 2000::/3" in problem


@pytest.mark.parametrize("answer", [True, False])
def test_the_interpreters_opinion_does_not_count(
    monkeypatch: pytest.MonkeyPatch, answer: bool
) -> None:
    """Every address called global by ``ipaddress``, or none: the same answers."""
    for kind in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        monkeypatch.setattr(kind, "is_global", property(lambda _: answer))
        monkeypatch.setattr(kind, "is_private", property(lambda _: not answer))
    assert ipaddress.ip_address("8.8.8.8").is_global is answer  # the patch holds
    assert Reach().problem("http://192.0.0.192/") is not None
    assert Reach().problem("http://[fe80::1]/") is not None
    assert Reach().problem("http://8.8.8.8/") is None
    assert Reach().problem("http://[2606:4700:4700::1111]/") is None


def test_an_allowed_network_still_passes() -> None:
    allowed = Reach.parse("192.0.0.0/24, 224.0.0.0/4")
    assert allowed.problem("http://192.0.0.192/") is None
    assert allowed.problem("http://[::ffff:192.0.0.192]/") is None
    assert allowed.problem("http://224.0.0.1/") is None
    assert allowed.problem("http://192.0.2.1/") is not None


@pytest.mark.parametrize("answer", ["192.0.0.192", "64:ff9b::c000:c0", "224.0.0.1", "100.64.0.1"])
def test_the_webhook_worker_refuses_a_name_that_resolves_into_a_block(
    monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    """The worker's connect-time check: the name resolved once, into a
    special-purpose block, is refused (permfailed) before any connection."""
    from swh_like_workers import webhook

    def connect(*args: object, **kwargs: object) -> None:
        raise AssertionError("the worker connected")

    monkeypatch.setattr(webhook, "resolve", lambda host: [ipaddress.ip_address(answer)])
    monkeypatch.setattr(webhook, "deliver", connect)
    outcome = webhook.post.run("http://metadata.example/latest", {}, "key")
    assert outcome["status"] == "permfailed" and "is not public" in outcome["error"]
