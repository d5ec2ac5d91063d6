"""The origin-visits guide's first round of visits, followed step by step.

The procedure of ``docs/howto/origin-visits.md`` ("A first round of
visits") is read from the page: its ``sh`` blocks in order, each with the
``text`` block that follows it (what the page shows its commands print).
Every command line runs as written in one ``bash`` that lives through the
whole procedure, as the reader's shell does: ``cd`` and ``export`` carry
over, the lines ending in ``&`` (the page server, the listener, the worker)
become jobs of that shell, and the last step's ``kill $(jobs -p)`` stops
them. Three things differ from the reader's machine, and are put back in
what the commands print before it is compared with the page:

- the shell starts in a folder of the test's own, shown as ``/home/you``
  (its ``HOME``), with its own data and configuration folders and no
  ``SWH_SCHEDULER_*``, ``CELERY*`` or proxy variable;
- the broker is a Redis server started for the test alone, in place of the
  machine's 127.0.0.1:6379, whose database 0 may hold another suite's
  messages;
- the page's port 8000 may be taken here: a free port is put in its place
  in the command lines, and so in the urls.

Waits are on conditions, with a bound: the page server's port, the
listener's event queue, and the blocks that read what the background jobs
did (``head`` and ``grep`` of their logs, ``origin visit-stats``), which are
run again until they print what the page shows. At the end, the tutorial's
own database holds one successful and eventful visit whose snapshot is the
page's digest, and the page server's log counts one request for the page."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import services
from pageshow import first_unshown
from waiting import wait_until

from swh_like_scheduler.store import SQLAlchemyStore

pytestmark = [pytest.mark.acceptance, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "howto" / "origin-visits.md"
PROCEDURE = "## A first round of visits"
BIN = Path(sys.executable).parent
#: the reader's home folder, as the page shows it
PAGE_HOME = "/home/you"
#: the page's broker and page server port
PAGE_BROKER = "redis://127.0.0.1:6379/0"
PAGE_PORT = 8000
#: lines that only read what the background jobs did: a block made of
#: them alone is run again until it prints what the page shows
READS = re.compile(r"(head|grep|tail|cat) .*|swh scheduler origin visit-stats .*")
#: a line that starts a job of the shell, its output sent to a file
BACKGROUND = re.compile(r"(?P<command>.*?) > (?P<log>\S+) 2>&1 &")


# --------------------------------------------------------------------------- #
# the page
# --------------------------------------------------------------------------- #


@dataclass
class Block:
    text: str
    #: the ``text`` block that follows it on the page, if any
    shown: str | None = None

    def lines(self) -> list[str]:
        """Its command lines (continuations joined, comments left out)."""
        found = []
        for line in self.text.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(" ".join(line.split()))
        return found


def section(page: Path | None = None) -> str:
    """The procedure: from its heading to the next ``## `` heading."""
    text = (page or PAGE).read_text("utf-8")
    start = text.index(f"\n{PROCEDURE}\n")
    return text[start : text.index("\n## ", start + len(PROCEDURE) + 2)]


def procedure(page: Path | None = None) -> list[Block]:
    """The procedure's ``sh`` blocks, in order, with what the page shows."""
    blocks: list[Block] = []
    for language, body in re.findall(r"^```(\w*)\n(.*?)^```$", section(page), re.S | re.M):
        if language == "text":
            assert blocks and blocks[-1].shown is None, f"a text block follows no command:\n{body}"
            blocks[-1].shown = body
        else:
            assert language == "sh", f"a {language or 'plain'} block in the procedure:\n{body}"
            blocks.append(Block(body))
    return blocks


# --------------------------------------------------------------------------- #
# what a block printed against what the page shows
# --------------------------------------------------------------------------- #

VOLATILE = (
    # ISO 8601 instants, logging's times, http.server's [03/Dec/2026 05:30:20]
    (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[+-]\d\d:\d\d)?", "<time>"),
    (r"\d\d/[A-Z][a-z]{2}/\d{4} \d\d:\d\d:\d\d", "<time>"),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
    # installation and lister ids (a snapshot's 40 digits are compared whole)
    (r"\b[0-9a-f]{12,32}\b", "<id>"),
    (r"\brevision \d+", "revision <revision>"),
    (r"\bin \d+(?:\.\d+)? ?s\b", "in <seconds>"),
    (r"ForkPoolWorker-\d+", "ForkPoolWorker-<n>"),
)


def normalized(line: str) -> str:
    for pattern, replacement in VOLATILE:
        line = re.sub(pattern, replacement, line)
    return " ".join(line.split())


def mismatch(shown: str, printed: str) -> str | None:
    """None when each line the page shows is a line printed (:mod:`pageshow`);
    else the first line that was not printed."""
    return first_unshown(shown, printed, normalized)


# --------------------------------------------------------------------------- #
# the reader's shell
# --------------------------------------------------------------------------- #


def gone(pid: int) -> bool:
    """The process ended (a zombie its shell has not reaped yet counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


class Shell:
    """One ``bash`` in a session of its own, fed one line at a time on its
    standard input; what it prints (both streams) is read by a thread."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.output = bytearray()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        #: the process ids of the jobs the page's lines started
        self.jobs: list[int] = []

    def _read(self) -> None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while chunk := os.read(fd, 65536):
            with self.lock:
                self.output += chunk

    def run(self, line: str, timeout: float = 60) -> tuple[int, str]:
        """``line`` in the shell, as typed: its exit code and what it printed."""
        assert self.process.stdin is not None
        marker = f"--end-{uuid.uuid4().hex}--"
        ended = re.compile(rf"\n{marker} (\d+)\n".encode())
        with self.lock:
            start = len(self.output)
        self.process.stdin.write(f"{line}\nprintf '\\n{marker} %d\\n' \"$?\"\n".encode())
        self.process.stdin.flush()
        found: list[re.Match[bytes]] = []

        def finished() -> bool:
            with self.lock:
                match = ended.search(self.output, start)
            if match is not None:
                found.append(match)
                return True
            assert self.process.poll() is None, f"the shell exited at {line!r}"
            return False

        wait_until(finished, timeout, f"{line!r} to finish")
        with self.lock:
            printed = self.output[start : found[0].start()].decode(errors="replace")
        return int(found[0].group(1)), printed

    def cwd(self) -> Path:
        code, printed = self.run("pwd")
        assert code == 0
        return Path(printed.strip())

    def stop(self) -> None:
        """SIGTERM to the jobs still running, a bounded wait, then SIGKILL
        to whatever is left in the shell's process group, the shell too."""
        for pid in self.jobs:
            if not gone(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(AssertionError):
            wait_until(lambda: all(gone(pid) for pid in self.jobs), 15, "the jobs to stop")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.reader.join(10)


# --------------------------------------------------------------------------- #
# the guide, followed
# --------------------------------------------------------------------------- #


class Guide:
    def __init__(self, tmp_path: Path, broker: str) -> None:
        self.tmp_path = tmp_path
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.broker = broker
        self.port = services.free_port()
        drop = ("SWH_SCHEDULER_", "CELERY", "PYTHONPATH")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(drop) and not k.lower().endswith("_proxy")
        }
        env.update(
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            HOME=str(self.home),
            XDG_DATA_HOME=str(tmp_path / "data"),
            XDG_CONFIG_HOME=str(tmp_path / "config"),
            XDG_STATE_HOME=str(tmp_path / "state"),
        )
        self.env = env
        self.shell = Shell(self.home, env)

    def localized(self, line: str) -> str:
        """The page's broker and port in a line, the test's instead (the
        port: 8000 may be taken on this machine)."""
        return (
            line.replace(PAGE_BROKER, self.broker)
            .replace(f"127.0.0.1:{PAGE_PORT}", f"127.0.0.1:{self.port}")
            .replace(f"http.server {PAGE_PORT} ", f"http.server {self.port} ")
        )

    def unlocalized(self, printed: str) -> str:
        """What a command printed, with the test's folder, broker and port
        put back as the page's."""
        redis = self.broker.split("//", 1)[1].split("/", 1)[0]
        pairs = [
            (str(self.home), PAGE_HOME),
            (redis, "127.0.0.1:6379"),
            (f"127.0.0.1:{self.port}", f"127.0.0.1:{PAGE_PORT}"),
        ]
        for here, page in sorted(pairs, key=lambda pair: -len(pair[0])):
            printed = printed.replace(here, page)
        return printed

    def run(self, line: str) -> str:
        """A line of the page, which must succeed: what it printed."""
        code, printed = self.shell.run(self.localized(line))
        assert code == 0, f"{line!r} exited with {code}:\n{printed}"
        if line.endswith(" &"):
            self.started(line)
        elif line == "kill $(jobs -p)":
            assert self.shell.jobs, "nothing to stop"
            wait_until(lambda: all(gone(pid) for pid in self.shell.jobs), 30, "the jobs to stop")
        return self.unlocalized(printed)

    def started(self, line: str) -> None:
        """A job started: its pid, and, for the page server and the
        listener, the condition that says it is ready."""
        match = BACKGROUND.fullmatch(line)
        assert match, f"a job whose output is not sent to a file: {line}"
        code, pid = self.shell.run("echo $!")
        assert code == 0
        self.shell.jobs.append(int(pid))
        command, log = match.group("command"), self.shell.cwd() / match.group("log")

        def alive() -> None:
            assert not gone(int(pid)), f"{command} exited:\n{log.read_text(errors='replace')}"

        if command.startswith("python3 -m http.server"):

            def serving() -> bool:
                alive()
                with socket.socket() as sock:
                    sock.settimeout(1)
                    return sock.connect_ex(("127.0.0.1", self.port)) == 0

            wait_until(serving, 30, "the page server to listen")
        elif command.startswith("swh scheduler start-listener"):
            # its event queue is bound once it says so: events sent before are lost
            def listening() -> bool:
                alive()
                return log.exists() and "listening on" in log.read_text(errors="replace")

            wait_until(listening, 30, "the listener's event queue")

    def block(self, block: Block) -> bool:
        """Run a block; check what it printed against what the page shows.
        True when there was something to compare."""
        lines = block.lines()
        if block.shown is None:
            for line in lines:
                self.run(line)
            return False
        if not all(READS.fullmatch(line) for line in lines):
            printed = "".join(self.run(line) for line in lines)
            problem = mismatch(block.shown, printed)
            assert problem is None, f"{block.text.strip()}: {problem}"
            return True
        # reads what the jobs did: again, until it shows what the page does
        last: list[str] = []

        def as_shown() -> bool:
            printed = ""
            for line in lines:
                code, out = self.shell.run(self.localized(line))
                if code != 0:  # grep that found nothing yet, no visit yet
                    last[:] = [f"{line!r} exited with {code}:\n{out}"]
                    return False
                printed += self.unlocalized(out)
            problem = mismatch(block.shown or "", printed)
            last[:] = [problem or ""]
            return problem is None

        try:
            wait_until(as_shown, 30, f"{block.text.strip()} to show what the page shows")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{last[0] if last else ''}") from None
        return True


@pytest.fixture
def guide(tmp_path: Path) -> Iterator[Guide]:
    try:
        redis = services.start_embedded_redis()
    except services.ServiceUnavailable as error:
        message = f"no private Redis server for the guide's broker: {error}"
        if services.in_ci():
            pytest.fail(message)
        pytest.skip(message)
    followed = Guide(tmp_path, redis.url)
    try:
        yield followed
    finally:
        followed.shell.stop()
        redis.stop()


@pytest.mark.timeout(120)
def test_the_first_round_of_visits_as_the_page_writes_it(guide: Guide) -> None:
    started = time.monotonic()
    steps = [int(n) for n in re.findall(r"^### (\d+)\. ", section(), re.M)]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 8, steps
    blocks = procedure()
    lines = [line for block in blocks for line in block.lines()]
    assert lines[-1] == "kill $(jobs -p)", "the procedure ends by stopping its jobs"
    assert sum(line.endswith(" &") for line in lines) == 3, lines
    assert any(f"127.0.0.1:{PAGE_PORT}/" in line for line in lines)
    assert any(PAGE_BROKER in line for line in lines)

    compared = sum(guide.block(block) for block in blocks)
    assert compared == len([block for block in blocks if block.shown is not None])

    # the page's own database, in the tutorial's folder; the data folder's
    # default was never made
    folder = guide.home / "visits"
    assert not (guide.tmp_path / "data" / "swh-like-scheduler").exists()
    url = f"http://127.0.0.1:{guide.port}/"
    store = SQLAlchemyStore.from_url(f"sqlite:///{folder / 'visits.sqlite'}")
    try:
        [stats] = store.origin_visit_stats_get([(url, "page")])
    finally:
        store.close()
    page = (folder / "site" / "index.html").read_bytes()
    assert page == b"hello\n"
    assert stats.last_visit_status == "successful", stats
    assert stats.last_snapshot == hashlib.sha256(page).hexdigest()[:40]
    assert stats.last_visit is not None and stats.last_successful == stats.last_visit
    # eventful: the offset dropped by 2 from a new origin's 4; due 2^2 h later
    assert stats.next_position_offset == 2 and stats.successive_visits == 1, stats
    assert stats.next_visit_due == stats.last_visit + timedelta(hours=4)

    # the page server, stopped with the rest, was asked for the page once
    log = (folder / "server.log").read_text(errors="replace")
    assert len(re.findall(r'"GET / HTTP/1\.[01]" 200', log)) == 1, log
    assert all(gone(pid) for pid in guide.shell.jobs)
    assert time.monotonic() - started < 60
