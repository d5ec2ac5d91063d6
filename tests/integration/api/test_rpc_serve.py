"""``swh scheduler rpc-serve`` as a user starts it (a real process)."""

from __future__ import annotations

import os
import re
import resource
import select
import signal
import socket
import statistics
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from rpc_process import SWH, answers, free_port, peak_kib, serving_process
from waiting import wait_until


def test_serves_with_a_generated_token(sqlite_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--port", str(port)],
            stdout=out,
            stderr=out,
            env=env,
        )
    try:
        wait_until(lambda: "Uvicorn running" in log.read_text(), 30, "the server to start")
        token = re.search(r"generated for this run\): (\S+)", log.read_text())
        assert token is not None, log.read_text()
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/tasks").status_code == 401
        headers = {"Authorization": f"Bearer {token.group(1)}"}
        created = httpx.post(
            f"{url}/task-types", json={"type": "t", "backend_name": "b"}, headers=headers
        )
        assert created.status_code == 201
        assert httpx.get(f"{url}/openapi.json").json()["info"]["title"] == "swh_like_scheduler"
    finally:
        server.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then ends by the signal it was sent
        assert server.wait(30) in (0, -signal.SIGTERM)
    assert "Finished server process" in log.read_text()
    assert log.read_text().count(token.group(1)) == 1  # printed once, never logged


def test_short_tokens_are_refused(sqlite_url: str) -> None:
    done = subprocess.run(
        [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--tokens", "abc:rw"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    # after the first log line (the database it uses), the refusal
    assert done.stderr.splitlines()[0].endswith(f"rpc-serve: database {sqlite_url} (from --db-url)")
    assert done.stderr.splitlines()[-1].startswith(
        "error: tokens: token 1 is shorter than 16 characters"
    )


def _send_without_token(port: int, head: bytes, body: Iterator[bytes]) -> bytes:
    """Send ``head`` and as much of ``body`` as the server takes; its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        try:
            for chunk in body:
                sock.sendall(chunk)
        except OSError:  # the server answered and closed: it read no further
            pass
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_a_large_body_without_a_token_costs_the_server_nothing(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The token is checked from the headers: a 200 MB body sent without one
    (declared, or chunked without a length) gets its 401 without the server
    reading it (its peak memory does not grow by the body), and a malformed
    body without a token is a 401, not a 422."""
    secret = "gate-secret-0123456789"
    with serving_process(sqlite_url, tmp_path, "--tokens", f"{secret}:rw") as (server, port):
        url = f"http://127.0.0.1:{port}"
        before = peak_kib(server.pid)
        megabyte = b"x" * 2**20
        declared = _send_without_token(
            port,
            b"POST /tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (200 * 2**20),
            iter([megabyte] * 200),
        )
        chunked = _send_without_token(
            port,
            b"POST /rpc/import_tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            iter([b"%x\r\n%s\r\n" % (len(megabyte), megabyte)] * 200),
        )
        for answer in (declared, chunked):
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
            assert b"www-authenticate: bearer" in answer.lower()
        grown = peak_kib(server.pid) - before
        assert grown < 20 * 1024, f"the server's peak memory grew by {grown} KiB"
        malformed = httpx.post(f"{url}/tasks", content=b"{not json")
        assert malformed.status_code == 401
        assert httpx.get(f"{url}/rpc").status_code == 401  # the method list is not open
        assert httpx.get(f"{url}/health").status_code in (200, 503)  # open
        reader = httpx.post(
            f"{url}/tasks", content=b"{not json", headers={"Authorization": f"Bearer {secret}"}
        )
        assert reader.status_code == 422


def test_a_client_past_its_rate_gets_429_and_each_request_is_logged(
    sqlite_url: str, tmp_path: Path
) -> None:
    secret = "rate-secret-0123456789"
    log = tmp_path / "serve.log"
    options = ("--tokens", f"{secret}:ro", "--rate-limit", "5", "--access-log")
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        headers = {"Authorization": f"Bearer {secret}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
            codes = [client.get("/task-types").status_code for _ in range(40)]
            limited = client.get("/task-types")
        assert 200 in codes and 429 in codes, codes
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert "detail" in limited.json()
        wait_until(lambda: "GET /task-types 429" in log.read_text(), 10, "the access log")
        text = log.read_text()
        assert "GET /task-types 200" in text and "token 1" in text
        assert secret not in text


def test_beyond_loopback_the_hosts_must_be_named(sqlite_url: str, tmp_path: Path) -> None:
    """A server other machines reach answers for its own names only: without
    --allowed-hosts it does not start; with them, another Host is a 400."""
    command = [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--host", "0.0.0.0"]
    for options, field in (
        ([], "allowed-hosts"),
        (["--allowed-hosts", "http://api.example.org/"], "allowed-hosts"),
        (
            ["--allowed-hosts", "api.example.org", "--forwarded-allow-ips", "proxy"],
            "forwarded-allow-ips",
        ),
    ):
        done = subprocess.run([*command, *options], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[-1].startswith(f"error: {field}: "), done.stderr
    assert (
        "needs --allowed-hosts"
        in subprocess.run(command, capture_output=True, text=True, timeout=60).stderr
    )
    options = ("--host", "0.0.0.0", "--allowed-hosts", "127.0.0.1,api.example.org")
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/health", headers={"Host": "api.example.org"}).status_code in (
            200,
            503,
        )
        refused = httpx.get(f"{url}/health", headers={"Host": "rebound.example"})
        assert refused.status_code == 400 and "--allowed-hosts" in refused.json()["detail"]


def test_forwarded_addresses_count_from_named_proxies_only(sqlite_url: str, tmp_path: Path) -> None:
    """X-Forwarded-For rotated by a client does not escape its rate limit nor
    forge the access log; from a proxy named by --forwarded-allow-ips it
    gives the client's address."""
    for proxy in (False, True):
        folder = tmp_path / ("proxied" if proxy else "direct")
        folder.mkdir()
        options = ["--rate-limit", "1", "--access-log"]
        if proxy:
            options += ["--forwarded-allow-ips", "127.0.0.1"]
        with serving_process(sqlite_url, folder, *options) as (_, port):
            with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
                codes = [
                    http.get("/health", headers={"X-Forwarded-For": f"203.0.113.{n}"}).status_code
                    for n in range(1, 31)
                ]
            log = folder / "serve.log"
            last = "203.0.113.30" if proxy else "GET /health 429"
            wait_until(lambda: last in log.read_text(), 10, "the access log")  # noqa: B023
        text = log.read_text()
        if proxy:  # each address its own client: none past its rate
            assert 429 not in codes, codes
            assert "GET /health 200" in text and "203.0.113.30" in text
        else:  # one client, the connection's address
            assert 429 in codes, codes
            assert "203.0.113." not in text and "127.0.0.1" in text


def _open(sock: socket.socket) -> bool:
    """Whether the server still holds ``sock``'s connection (no end read)."""
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _health_seconds(http: httpx.Client) -> float:
    """The median time /health takes to answer, over 21 requests."""
    times = []
    for _ in range(21):
        started = time.perf_counter()
        assert http.get("/health").status_code in (200, 503)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def test_slow_clients_neither_starve_the_server_nor_stay(sqlite_url: str, tmp_path: Path) -> None:
    """A thousand clients that send half a request line and then nothing
    (each held a connection and a descriptor for ever) do not keep /health
    from answering about as fast as before them, and are disconnected once
    the header timeout has passed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    timeout = 8.0
    # one address may hold them all here (its cap is another test's)
    options = ("--header-timeout", str(timeout), "--rate-limit", "0")
    options += ("--max-connections-per-address", "4096")
    slow: list[socket.socket] = []
    try:
        with serving_process(sqlite_url, tmp_path, *options) as (_, port):
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                baseline = _health_seconds(http)
                started = time.monotonic()
                for _ in range(1000):
                    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                    sock.sendall(b"GET /hea")
                    slow.append(sock)
                loaded = _health_seconds(http)
                held = sum(map(_open, slow))
                elapsed = time.monotonic() - started
                assert loaded < 10 * baseline + 0.05, (baseline, loaded)
                # still held unless the timeout passed meanwhile (a very slow machine)
                assert held == 1000 or elapsed > timeout, (held, elapsed)
                wait_until(
                    lambda: not any(map(_open, slow)), timeout + 20, "the slow clients to be let go"
                )
                assert http.get("/health").status_code in (200, 503)
            # one more: its connection ends at the timeout, not before
            with socket.create_connection(("127.0.0.1", port), timeout=timeout + 60) as sock:
                sock.sendall(b"POST /rpc/search_tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
                opened = time.monotonic()
                assert sock.recv(1) == b""
                assert time.monotonic() - opened > timeout - 1
    finally:
        for sock in slow:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_past_the_connection_limit_a_new_connection_gets_a_503(
    sqlite_url: str, tmp_path: Path
) -> None:
    options = ("--max-connections", "20", "--header-timeout", "60", "--keep-alive-timeout", "60")
    options += ("--max-connections-per-address", "20")  # all from 127.0.0.1
    idle: list[socket.socket] = []
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        try:
            # the start's own /health checks may linger: fill the rest
            idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(20)]
            with socket.create_connection(("127.0.0.1", port), timeout=30) as extra:
                answer = extra.recv(65536)
            assert answer.startswith(b"HTTP/1.1 503"), answer
            assert b"too many connections" in answer
        finally:
            for sock in idle:
                sock.close()
        wait_until(lambda: answers(f"http://127.0.0.1:{port}"), 30, "room again")


def _stream(port: int, head: bytes, chunks: Iterator[bytes]) -> bytes:
    """Send ``head``, then ``chunks`` until the server answers; its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head)
        for chunk in chunks:
            if select.select([sock], [], [], 0)[0]:  # answered: send no more
                break
            sock.sendall(chunk)
        return sock.recv(65536)


def test_large_read_bodies_at_once_cost_the_server_little(sqlite_url: str, tmp_path: Path) -> None:
    """Three 250 MB bodies sent at once to a read method with a read-only
    token (each was read whole: 1.97 GB at peak) are refused past the
    plain limit; the server's peak memory hardly grows."""
    secret = "reader-secret-0123456789"
    with serving_process(sqlite_url, tmp_path, "--tokens", f"{secret}:ro") as (server, port):
        before = peak_kib(server.pid)
        megabyte = b"x" * 2**20
        head = (
            b"POST /rpc/search_tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            % secret.encode()
        )
        with ThreadPoolExecutor(3) as pool:
            answers = list(
                pool.map(
                    lambda _: _stream(
                        port, head, iter([b"%x\r\n%s\r\n" % (len(megabyte), megabyte)] * 250)
                    ),
                    range(3),
                )
            )
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        grown = peak_kib(server.pid) - before
        assert grown < 50 * 1024, f"the server's peak memory grew by {grown} KiB"
