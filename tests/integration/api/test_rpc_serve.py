"""``swh scheduler rpc-serve`` as a user starts it (a real process)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from waiting import wait_until

SWH = str(Path(sys.executable).with_name("swh"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serves_with_a_generated_token(sqlite_url: str, tmp_path: Path) -> None:
    port = _free_port()
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
    assert done.stderr.startswith("error: tokens: token 1 is shorter than 16 characters")


def _peak_kib(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


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
    with _serving(sqlite_url, tmp_path, "--tokens", f"{secret}:rw") as (server, port):
        url = f"http://127.0.0.1:{port}"
        before = _peak_kib(server.pid)
        megabyte = b"x" * 2**20
        declared = _send_without_token(
            port,
            b"POST /tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (200 * 2**20),
            iter([megabyte] * 200),
        )
        chunked = _send_without_token(
            port,
            b"POST /rpc/import_tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            iter([b"%x\r\n%s\r\n" % (len(megabyte), megabyte)] * 200),
        )
        for answer in (declared, chunked):
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
            assert b"www-authenticate: bearer" in answer.lower()
        grown = _peak_kib(server.pid) - before
        assert grown < 20 * 1024, f"the server's peak memory grew by {grown} KiB"
        malformed = httpx.post(f"{url}/tasks", content=b"{not json")
        assert malformed.status_code == 401
        assert httpx.get(f"{url}/rpc").status_code == 401  # the method list is not open
        assert httpx.get(f"{url}/health").status_code in (200, 503)  # open
        reader = httpx.post(
            f"{url}/tasks", content=b"{not json", headers={"Authorization": f"Bearer {secret}"}
        )
        assert reader.status_code == 422


@contextmanager
def _serving(
    sqlite_url: str, tmp_path: Path, *options: str
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``rpc-serve`` with ``options`` (its log in ``serve.log``), until it answers."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWH_SCHEDULER_")}
    command = [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", "--port", str(port)]
    with open(tmp_path / "serve.log", "wb") as out:
        server = subprocess.Popen([*command, *options], stdout=out, stderr=out, env=env)
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}"), 30, "the server to start")
        yield server, port
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health").status_code in (200, 503)
    except httpx.HTTPError:
        return False


def test_a_client_past_its_rate_gets_429_and_each_request_is_logged(
    sqlite_url: str, tmp_path: Path
) -> None:
    secret = "rate-secret-0123456789"
    log = tmp_path / "serve.log"
    options = ("--tokens", f"{secret}:ro", "--rate-limit", "5", "--access-log")
    with _serving(sqlite_url, tmp_path, *options) as (_, port):
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
