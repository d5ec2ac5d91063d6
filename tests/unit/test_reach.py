"""Where http callbacks may go: public addresses, plus what is allowed."""

from __future__ import annotations

import ipaddress

import pytest

from swh_like_scheduler.exceptions import InvalidInput
from swh_like_scheduler.reach import Reach


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://127.0.0.1:8080/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://10.0.0.7/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://localhost/", "loopback"),
        ("http://api.localhost/", "loopback"),
        ("https://[fd00::1]/", "private"),
    ],
)
def test_non_public_addresses_are_refused(url: str, kind: str) -> None:
    problem = Reach().problem(url)
    assert problem is not None and f"is {kind})" in problem


def test_public_addresses_and_allowed_ones_pass() -> None:
    assert Reach().problem("https://93.184.215.14/hook") is None
    assert Reach().problem("https://hooks.example.org/in") is None  # names: at delivery
    allowed = Reach.parse("10.0.0.0/8, 127.0.0.1 ,hooks.internal")
    assert allowed.problem("http://10.1.2.3/") is None
    assert allowed.problem("http://127.0.0.1:9/") is None
    assert allowed.problem("http://127.0.0.2:9/") is not None
    assert allowed.problem("http://HOOKS.internal./x") is None


def test_names_are_judged_by_what_they_resolve_to() -> None:
    def resolver(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        return {"evil.example": [ipaddress.ip_address("169.254.169.254")]}.get(host, [])

    problem = Reach().problem("http://evil.example/", resolver=resolver)
    assert problem is not None and "169.254.169.254" in problem
    assert "does not resolve" in (Reach().problem("http://nx.example/", resolver=resolver) or "")


def test_a_bad_allow_list_is_refused() -> None:
    with pytest.raises(InvalidInput, match="callback_allow"):
        Reach.parse("10.0.0.0/33")
