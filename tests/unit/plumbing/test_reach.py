"""Where http callbacks may go: public addresses, plus what is allowed; the
host judged as a resolver or an HTTP client reads it."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.intake.argcheck import check_callback_url
from swh_like_scheduler.plumbing.reach import Reach, embedded, numeric_ipv4, url_host


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
        ("https://[fd00::1]/", "private (unique local)"),
    ],
)
def test_non_public_addresses_are_refused(url: str, kind: str) -> None:
    problem = Reach().problem(url)
    assert problem is not None and f"is {kind}, in " in problem


#: loopback and metadata written every way a resolver or a client reads them
DISGUISED = [
    "http://2130706433/",  # decimal
    "http://0177.0.0.1/",  # octal
    "http://0x7f000001/",  # hexadecimal
    "http://0x7F.1/",
    "http://127.1/",  # short
    "http://0177.1:8080/x",
    "http://0x7f.0.0.01/",
    "http://2852039166/",  # 169.254.169.254
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://127.0.0.1./",  # trailing dot
    "http://LocalHost./",
    "http://HOOKS.LOCALHOST/",
    "http://%31%32%37.0.0.1/",  # percent-encoded
    "http://%6c%6f%63%61%6c%68%6f%73%74/",  # localhost
    "http://\uff11\uff12\uff17\u3002\uff10.\uff10.\uff11/",  # full-width digits, ideographic dot
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:0:7f00:1]/",  # IPv4-translated
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[64:ff9b::7f00:1]/",  # NAT64, well-known prefix
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b:1::7f00:1]/",  # NAT64, local-use prefix (/96 place)
    "http://[64:ff9b:1:7f00:0:1::]/",  # (/48 place)
    "http://[2002:7f00:1::]/",  # 6to4
    "http://[2002:a9fe:a9fe::1]/",
    "http://[fe80::1%25eth0]/",  # a zone
]


@pytest.mark.parametrize("url", DISGUISED)
def test_every_form_of_a_non_public_address_is_refused(url: str) -> None:
    problem = Reach().problem(url)
    assert problem is not None and "is not public" in problem, problem


@pytest.mark.parametrize(
    ("host", "dotted"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("10.1.513", "10.1.2.1"),
        ("00000000000127.1", "87.0.0.1"),
        ("8.8.8.8", "8.8.8.8"),
    ],
)
def test_numeric_forms_read_as_inet_aton_reads_them(host: str, dotted: str) -> None:
    assert str(numeric_ipv4(host)) == dotted
    assert socket.inet_ntoa(socket.inet_aton(host)) == dotted  # the C library agrees


@pytest.mark.parametrize("url", ["http://1.2.3.4.5/", "http://256.1.1.1/", "http://08.1/"])
def test_a_host_that_ends_in_a_number_but_is_no_address_is_refused(url: str) -> None:
    assert "ends in a number" in (Reach().problem(url) or "")


@pytest.mark.parametrize(
    "url",
    [
        "http://a b/",
        "http://127.0.0.1\\@hooks.example.org/",
        "http://%ff/",
        "http://[::1/",
        "http://[1.2.3.4]/",
        "http://hooks.example.org:99999/",
        "ftp://hooks.example.org/",
        "http:///x",
        "http://a..b/",
    ],
)
def test_a_url_read_two_ways_or_not_at_all_is_refused(url: str) -> None:
    assert Reach().problem(url) is not None


def test_embedded_ipv4_addresses() -> None:
    def of(text: str) -> list[str]:
        return [str(a) for a in embedded(ipaddress.ip_address(text))]

    assert of("::ffff:1.2.3.4") == ["1.2.3.4"]
    assert of("64:ff9b::102:304") == ["1.2.3.4"]
    assert of("2002:102:304::") == ["1.2.3.4"]
    assert of("::1") == [] and of("::") == [] and of("2001:4860:4860::8888") == []
    # a local-use NAT64 prefix may be 48 to 96 bits long: every place counts
    assert "1.2.3.4" in of("64:ff9b:1:102:3:400::")


@pytest.mark.parametrize(
    "url",
    [
        "https://8.8.8.8/hook",
        "https://93.184.215.14/hook",
        "http://[2001:4860:4860::8888]:8080/",
        "http://[::ffff:8.8.8.8]/",
        "http://[64:ff9b::808:808]/",
        "http://[2002:808:808::]/",
        "http://134744072/",  # 8.8.8.8 in one number
        "https://hooks.example.org/in",  # names: judged at delivery
        "https://B\u00fccher.Example./in",
        "http://_hooks.example.org/",
    ],
)
def test_public_forms_pass(url: str) -> None:
    assert Reach().problem(url) is None


def test_allowed_networks_and_hosts_pass_in_every_form() -> None:
    allowed = Reach.parse("10.0.0.0/8, 127.0.0.1 ,hooks.internal, 0xa9fea9fe")
    for url in (
        "http://10.1.2.3/",
        "http://127.0.0.1:9/",
        "http://2130706433:9/",
        "http://[::ffff:127.0.0.1]/",
        "http://[64:ff9b::a01:203]/",  # 10.1.2.3
        "http://169.254.169.254/",
        "http://HOOKS.internal./x",
        "http://localhost/",  # read as 127.0.0.1
    ):
        assert allowed.problem(url) is None, url
    assert allowed.problem("http://127.0.0.2:9/") is not None
    assert allowed.problem("http://[::1]/") is not None
    # an allowed IPv6 network is taken as written
    assert Reach.parse("64:ff9b::/96").problem("http://[64:ff9b::7f00:1]/") is None


def test_names_are_judged_by_what_they_resolve_to() -> None:
    def resolver(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        answers = {
            "evil.example": ["169.254.169.254"],
            "mixed.example": ["8.8.8.8", "127.0.0.1"],
            "nat64.example": ["64:ff9b::7f00:1"],
            "good.example": ["8.8.8.8", "2001:4860:4860::8888"],
        }
        return [ipaddress.ip_address(a) for a in answers.get(host, [])]

    problem = Reach().problem("http://evil.example/", resolver=resolver)
    assert problem is not None and "169.254.169.254" in problem
    assert "127.0.0.1" in (Reach().problem("http://mixed.example/", resolver=resolver) or "")
    assert "127.0.0.1" in (Reach().problem("http://nat64.example/", resolver=resolver) or "")
    assert "does not resolve" in (Reach().problem("http://nx.example/", resolver=resolver) or "")
    good = Reach().destination("https://Good.Example./in", resolver=resolver)
    assert [str(a) for a in good.addresses] == ["8.8.8.8", "2001:4860:4860::8888"]
    assert good.host.name == "good.example" and good.host.authority == "good.example"


def test_the_host_header_keeps_the_urls_port() -> None:
    assert url_host("http://[::ffff:8.8.8.8]:81/").authority == "[::ffff:808:808]:81"
    assert url_host("https://xn--bcher-kva.example/").name == "xn--bcher-kva.example"


def test_a_bad_allow_list_is_refused() -> None:
    for entry in ("10.0.0.0/33", "hooks.example:80", "a b", "1.2.3.4.5"):
        with pytest.raises(InvalidInput, match="callback_allow"):
            Reach.parse(entry)


def test_a_webhook_tasks_url_argument_is_checked_by_name_and_by_worker() -> None:
    reach = Reach()
    for type_name, backend in (("webhook", "webhook"), ("hooks", "swh_like_workers.webhook.post")):
        with pytest.raises(InvalidInput) as caught:
            check_callback_url(type_name, backend, [], {"url": "http://0x7f.1/"}, reach)
        assert caught.value.field == "kwargs.url"
        with pytest.raises(InvalidInput) as caught:
            check_callback_url(type_name, backend, ["http://[::1]/", {}], {}, reach)
        assert caught.value.field == "args.0"
        with pytest.raises(InvalidInput, match="URL"):
            check_callback_url(type_name, backend, [], {"url": 2130706433}, reach)
        check_callback_url(type_name, backend, [], {"url": "https://8.8.8.8/"}, reach)
    check_callback_url("sleep", "sleep", ["http://127.0.0.1/"], {"url": "http://[::1]/"}, reach)
    allowed = Reach.parse("127.0.0.0/8")
    check_callback_url("webhook", None, [], {"url": "http://127.1/"}, allowed)


def test_the_webhook_worker_takes_its_url_where_the_check_looks() -> None:
    import inspect

    from swh_like_scheduler.intake.argcheck import CALLBACK_URL_ARGUMENTS
    from swh_like_workers import webhook

    name, position = CALLBACK_URL_ARGUMENTS[webhook.TASK_NAME]
    parameters = list(inspect.signature(webhook.post.run).parameters)
    assert parameters[position] == name
    assert webhook.register()["task_types"][0]["type"] in CALLBACK_URL_ARGUMENTS
