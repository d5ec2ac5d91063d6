"""What a connection to ``swh scheduler rpc-serve`` may cost, and whom it
answers (issue 60): a body trickled just under ``--body-timeout`` is cut
at ``--body-deadline``, one address holds ``--max-connections-per-address``
connections at most, a body on a ``GET`` is refused before it is read, and
a server on loopback answers its loopback names only (DNS rebinding)."""

from __future__ import annotations

import select
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from rpc_process import SWH, peak_kib, serving_process
from waiting import wait_until

READER = "reader-secret-0123456789"
WRITER = "writer-secret-0123456789"
TOKENS = ("--tokens", f"{READER}:ro,{WRITER}:rw")


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A connection to the server from the loopback address ``source``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _answered(sock: socket.socket) -> bytes | None:
    """What the server sent (``b""``: it closed), or ``None`` while it is silent."""
    if not select.select([sock], [], [], 0)[0]:
        return None
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def _whole_answer(sock: socket.socket) -> bytes:
    """One answer, its head and its body (by its Content-Length)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        if not chunk:
            return answer
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length and (chunk := sock.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


def _served(url: str) -> bool:
    """Whether a fresh client gets an answer of the application's."""
    answer = httpx.get(f"{url}/health", timeout=10)
    return answer.status_code in (200, 503) and "too many connections" not in answer.text


def _trickle(sock: socket.socket, every: float, until: float, seen: dict[int, bytes]) -> None:
    """One byte of the body every ``every`` seconds until the server
    answers or closes, or ``until`` (monotonic) passes."""
    while time.monotonic() < until:
        answer = _answered(sock)
        if answer is not None:
            seen[sock.fileno()] = answer
            return
        try:
            sock.sendall(b"a")
        except OSError:
            seen[sock.fileno()] = b""
            return
        time.sleep(every)


def test_a_trickled_body_is_cut_at_its_deadline(sqlite_url: str, tmp_path: Path) -> None:
    """Login forms trickled one byte a second (under the 5 s stall bound)
    from as many clients as --max-connections held every connection for
    as long as they went on, fresh clients answered 503 throughout; now
    each is cut at the 3 s deadline with a 408, and fresh clients are
    served again."""
    slots, deadline = 4, 3.0
    options = (
        *("--max-connections", str(slots), "--max-connections-per-address", str(slots)),
        *("--body-timeout", "5", "--body-deadline", str(deadline), "--header-timeout", "60"),
    )
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        url = f"http://127.0.0.1:{port}"
        head = (
            b"POST /console/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 900\r\n\r\n"
        )
        time.sleep(0.5)  # the start's own requests let go
        tricklers = [_connect(port) for _ in range(slots)]
        seen: dict[int, bytes] = {}
        try:
            started = time.monotonic()
            for sock in tricklers:
                sock.sendall(head)
            threads = [
                threading.Thread(target=_trickle, args=(s, 1.0, started + 20, seen))
                for s in tricklers
            ]
            for thread in threads:
                thread.start()
            time.sleep(1.0)
            # every connection held: a fresh client is turned away
            busy = httpx.get(f"{url}/health", timeout=10)
            assert busy.status_code == 503 and "too many connections" in busy.text
            assert not seen, seen
            for thread in threads:
                thread.join(30)
            took = time.monotonic() - started
            assert len(seen) == slots, seen
            for answer in seen.values():
                assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
                assert b"the request body took longer than 3 s" in answer
            # cut at the deadline (checked each second past it), long before the 20 s
            assert deadline - 0.5 < took < deadline + 5, took
            # the connections are let go: fresh clients are served
            wait_until(lambda: _served(url), 10, "a fresh client to be served")
        finally:
            for sock in tricklers:
                sock.close()


def test_a_body_at_a_good_rate_goes_on_past_the_deadline(sqlite_url: str, tmp_path: Path) -> None:
    """The deadline is no cap on a body that keeps coming at --body-min-rate:
    a login form sent in 16 bytes every 0.2 s (80 bytes per second) for 3 s,
    past a 1 s deadline, is answered by the application, not cut."""
    options = ("--body-deadline", "1", "--body-min-rate", "40", "--body-timeout", "5")
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        form = b"next=%2Fconsole%2F&token=" + b"x" * 215
        assert len(form) == 240
        with _connect(port) as sock:
            sock.sendall(
                b"POST /console/login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n"
                b"Content-Length: %d\r\n\r\n" % len(form)
            )
            for start in range(0, len(form), 16):
                assert _answered(sock) is None, "cut while the body came fast enough"
                sock.sendall(form[start : start + 16])
                time.sleep(0.2)
            answer = _whole_answer(sock)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:300]  # no such token
        assert b"No such token" in answer


def test_one_address_holds_its_cap_of_connections(sqlite_url: str, tmp_path: Path) -> None:
    """Past --max-connections-per-address from one address, a new
    connection gets a 429 before anything is read, while another address is
    served and the server has room; a proxy named by --forwarded-allow-ips
    has no cap of its own."""
    options = ("--max-connections", "20", "--max-connections-per-address", "3")
    options += ("--header-timeout", "60")
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        url = f"http://127.0.0.1:{port}"
        time.sleep(0.5)  # the start's own requests let go
        idle = [_connect(port) for _ in range(3)]
        try:
            time.sleep(0.2)
            assert all(_answered(sock) is None for sock in idle)  # held, not refused
            with _connect(port) as extra:
                answer = _whole_answer(extra)
            assert answer.startswith(b"HTTP/1.1 429"), answer[:200]
            assert b"too many connections from this address" in answer
            other = httpx.HTTPTransport(local_address="127.0.0.2")
            with httpx.Client(transport=other, timeout=10) as http:
                served = http.get(f"{url}/health")
            assert served.status_code in (200, 503), served.text
            assert "too many connections" not in served.text
            idle.pop().close()  # one given back: room for one more
            wait_until(lambda: _served(url), 10, "room for the address again")
        finally:
            for sock in idle:
                sock.close()
    proxied = tmp_path / "proxied"
    proxied.mkdir()
    options += ("--forwarded-allow-ips", "127.0.0.1")
    with serving_process(sqlite_url, proxied, *options) as (_, port):
        idle = [_connect(port) for _ in range(5)]
        try:
            assert _served(f"http://127.0.0.1:{port}")
        finally:
            for sock in idle:
                sock.close()


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (
            ["--max-connections", "10", "--max-connections-per-address", "11"],
            "error: max-connections-per-address: 11 is more than --max-connections (10)",
        ),
        (["--max-connections-per-address", "0"], "--max-connections-per-address"),
        (["--body-deadline", "0"], "--body-deadline"),
        (["--body-min-rate", "0"], "--body-min-rate"),
    ],
)
def test_the_new_bounds_are_checked(sqlite_url: str, options: list[str], field: str) -> None:
    done = subprocess.run(
        [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", *options],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert field in done.stderr.splitlines()[-1], done.stderr


def _send_until_answered(port: int, head: bytes, megabytes: int) -> tuple[bytes, float]:
    """``head``, then up to ``megabytes`` of body (in chunks when the head
    says so) until the server answers; the answer and the seconds it took."""
    chunk = b"x" * 2**20
    if b"chunked" in head:
        chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    with _connect(port) as sock:
        started = time.monotonic()
        sock.sendall(head)
        for _ in range(megabytes):
            if select.select([sock], [], [], 0)[0]:
                break
            sock.sendall(chunk)
        return _whole_answer(sock), time.monotonic() - started


def test_a_body_on_a_get_is_refused_before_it_is_read(sqlite_url: str, tmp_path: Path) -> None:
    """Four 100 MB bodies sent at once on a GET of a write method's /rpc path
    with a read-only token (they had its 256 MB limit: the server read each
    whole before its 405) are refused from their headers: a 413 at once,
    the server's peak memory unchanged; and the same without a token under
    --open-reads."""
    for open_reads in (False, True):
        folder = tmp_path / str(open_reads)
        folder.mkdir()
        options = (*TOKENS, "--open-reads" if open_reads else "--no-open-reads")
        with serving_process(sqlite_url, folder, *options) as (server, port):
            before = peak_kib(server.pid)
            token = b"" if open_reads else b"Authorization: Bearer %s\r\n" % READER.encode()
            heads = [
                b"GET /rpc/import_tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
                b"Content-Length: %d\r\n\r\n" % (token, 100 * 2**20),
                b"GET /rpc/import_tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
                b"Transfer-Encoding: chunked\r\n\r\n" % token,
            ]
            with ThreadPoolExecutor(4) as pool:
                sent = [pool.submit(_send_until_answered, port, h, 100) for h in heads * 2]
                answers = [future.result() for future in sent]
            for answer, took in answers:
                assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
                assert b"a GET request takes no body" in answer
                assert took < 5, took
            grown = peak_kib(server.pid) - before
            assert grown < 20 * 1024, f"the server's peak memory grew by {grown} KiB"


def _get(port: int, host: str, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", headers={"Host": host}, timeout=10)


def test_on_loopback_only_the_loopback_names_are_answered(sqlite_url: str, tmp_path: Path) -> None:
    """DNS rebinding: a page whose name an attacker points at 127.0.0.1
    reads a loopback server with --open-reads through the victim's browser,
    the Host header naming the page's site. Without --allowed-hosts, such a
    server answered any Host (every task, its arguments); now only
    localhost, 127.0.0.1 and [::1] (any port), and other names when given."""
    secret = "rebound-secret-argument"
    with serving_process(sqlite_url, tmp_path, *TOKENS, "--open-reads") as (_, port):
        writer = {"Authorization": f"Bearer {WRITER}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=writer) as http:
            made = http.post(
                "/task-types", json={"type": "t", "backend_name": "b", "default_interval": "1 day"}
            )
            assert made.status_code == 201, made.text
            made = http.post("/tasks", json={"tasks": [{"type": "t", "args": [secret]}]})
            assert made.status_code == 201, made.text
        for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
            answer = _get(port, host, "/tasks")
            assert answer.status_code == 200 and secret in answer.text, host
        for host in (f"rebound.example:{port}", "rebound.example", f"127.0.0.2:{port}", "x"):
            for path in ("/tasks", "/rpc", "/console/", "/health"):
                answer = _get(port, host, path)
                assert answer.status_code == 400, (host, path, answer.status_code)
                assert "--allowed-hosts" in answer.json()["detail"]
                assert secret not in answer.text
    named = tmp_path / "named"
    named.mkdir()
    # 127.0.0.1 named too: the test waits for the server through it
    options = (*TOKENS, "--open-reads", "--allowed-hosts", "127.0.0.1,scheduler.internal")
    with serving_process(sqlite_url, named, *options) as (_, port):
        answer = _get(port, f"scheduler.internal:{port}", "/tasks")
        assert answer.status_code == 200 and secret in answer.text
        assert _get(port, f"rebound.example:{port}", "/tasks").status_code == 400
