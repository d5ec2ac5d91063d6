"""Starting the whole platform, refreshing the table, stopping everything.

:class:`Platform` starts, each as a child process in its own process group
with its output in ``<run dir>/<name>.log``:

1. the embedded Redis server (unless a broker URL is given): database 0 is the
   broker, database 1 the result backend;
2. the listener (``swh scheduler start-listener``) — first, so it sees the
   events of the very first runs;
3. one Celery worker per task queue
   (``celery -A swh_like_scheduler.celery_app worker -Q QUEUE -E -n TYPE@%h``);
4. the runner (``swh scheduler start-runner --period 1``);
5. the HTTP API and its console (``swh scheduler rpc-serve``) on a free
   loopback port, with a read-write and a read-only token generated for the
   run, written to ``api-token`` and ``api-token-read-only`` in the run
   directory (readable by the user only) and never shown: the console's
   one-time login links are printed at start and kept under the table at
   every redraw, with the command that makes a new one.

Every child gets ``SWH_SCHEDULER_DB_URL``, ``SWH_SCHEDULER_BROKER_URL`` and
``SWH_SCHEDULER_RESULT_BACKEND``, and ``SWH_SCHEDULER_STANDALONE_RUN`` (the run
directory) to be recognisable. ``children.json`` in the run directory lists
their pids. Stopping goes the other way round: runner, workers and API, then the
listener (so it records the last events), then Redis.

Before anything starts, the platform takes its database's lock
(:mod:`.lock`): a second standalone on the same database refuses, naming the
first one's pid and host; the lock is renewed while the platform runs and
released when it stops. A child that exits on its own is started again
(:mod:`.restarts`: 1 s, then twice as long each time, at most 60 s), and
each exit is said in the log and under the table.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import secrets
import shlex
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

import platformdirs
import sqlalchemy as sa

from ..config.settings import APP_NAME
from ..domain.exceptions import SchedulerError
from ..store import SchedulerStore
from .examples import create_examples, register_task_types
from .lock import RENEW_EVERY, DatabaseLock
from .processes import Child, ChildSpec, spawn, stop_children
from .redis import EmbeddedRedis, start_embedded_redis
from .restarts import RestartPolicy, Restarts, exit_text
from .table import ConsoleLink, Snapshot, console_lines, render, snapshot

#: Environment variable naming the run directory, set in every child.
RUN_ENV = "SWH_SCHEDULER_STANDALONE_RUN"
logger = logging.getLogger(__name__)
CELERY_APP = "swh_like_scheduler.celery_app"
_SWH_FALLBACK = "import sys; from swh_like_scheduler.cli import main; main(sys.argv[1:])"


def default_run_dir(now: datetime) -> Path:
    """``<user log dir>/standalone/<UTC time>-<pid>``."""
    stamp = now.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    return Path(platformdirs.user_log_dir(APP_NAME)) / "standalone" / f"{stamp}-{os.getpid()}"


def swh_command() -> list[str]:
    """The ``swh`` console script next to this Python, else the same through
    ``-c``; through ``-c`` too beside a ``swh.*`` package (swh-core's ``swh``,
    whose ``swh scheduler`` is swh-scheduler's, may be the script there)."""
    script = Path(sys.executable).with_name("swh")
    if script.exists() and importlib.util.find_spec("swh") is None:
        return [str(script)]
    return [sys.executable, "-c", _SWH_FALLBACK]


def free_port() -> int:
    """A loopback port free right now (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


@dataclass(frozen=True)
class Options:
    """What ``swh scheduler standalone`` was asked for."""

    db_url: str
    broker_url: str | None = None
    result_backend: str | None = None
    duration: float | None = None
    examples: bool = True
    concurrency: int = 2
    pool: str = "threads"
    refresh: float = 2.0
    run_dir: Path | None = None
    runner_period: float = 1.0
    #: serve the HTTP API (``rpc-serve``) on a free loopback port
    api: bool = True
    #: delays before a child that exited on its own is started again
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    #: a Celery app of the user's (``--app``, as ``celery -A`` takes it): its
    #: workers run the tasks, and the daemons are given it
    app: str | None = None


def _now() -> datetime:
    return datetime.now(tz=UTC)


def display_url(url: str) -> str:
    """``url`` without its password."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def _write_secret(path: Path, text: str) -> None:
    """``text`` in ``path``, readable and writable by the user only."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # a file left by an earlier run keeps its mode
    with os.fdopen(descriptor, "w") as stream:
        stream.write(text + "\n")


def _instant(text: object) -> datetime | None:
    """An ISO 8601 instant the API sent, in UTC (``None`` when it sent none)."""
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Platform:
    """The processes of one standalone run, and the loop that shows the table."""

    def __init__(
        self,
        options: Options,
        store: SchedulerStore,
        out: TextIO,
        *,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.options = options
        self.store = store
        self.out = out
        self.clock = clock
        self.started_at = clock()
        self.run_dir = options.run_dir or default_run_dir(self.started_at)
        self.redis: EmbeddedRedis | None = None
        self.broker_url = options.broker_url
        self.result_backend = options.result_backend
        self.runner: list[Child] = []
        self.workers: list[Child] = []
        self.listener: list[Child] = []
        self.api: list[Child] = []
        #: the API's address and its read-write and read-only tokens
        #: (generated for this run)
        self.api_url: str | None = None
        self.api_token = secrets.token_urlsafe(24)
        self.api_read_token = secrets.token_urlsafe(24)
        #: where the tokens are written (never shown), and the login links
        #: made at start (shown under the table)
        self.token_file = self.run_dir / "api-token"
        self.read_token_file = self.run_dir / "api-token-read-only"
        self.links: list[ConsoleLink] = []
        self.tty = out.isatty()
        self._drawn = False
        self.last: Snapshot | None = None
        #: the database's lock (taken by :meth:`run` before anything starts)
        self.lock = DatabaseLock(store, display_url(options.db_url))
        self.restarts = Restarts(options.restart)

    # -- starting ------------------------------------------------------------

    def say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def prepare_store(self) -> None:
        """Register the installed task types; create the examples on an empty
        database (neither with an app of the user's: its tasks are its own)."""
        if self.options.app is not None:
            self.say(
                f"Your app {self.options.app}: its workers run the task types in the "
                "database (no example types or tasks)"
            )
            return
        created = register_task_types(self.store)
        if created:
            self.say(f"Registered task types: {', '.join(created)}")
        if self.options.examples:
            tasks = create_examples(self.store, self.clock())
            if tasks:
                names = sorted({t.type for t in tasks})
                self.say(f"Created {len(tasks)} example tasks ({', '.join(names)})")

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SWH_SCHEDULER_DB_URL"] = self.options.db_url
        assert self.broker_url is not None
        env["SWH_SCHEDULER_BROKER_URL"] = self.broker_url
        if self.result_backend:
            env["SWH_SCHEDULER_RESULT_BACKEND"] = self.result_backend
        else:
            env.pop("SWH_SCHEDULER_RESULT_BACKEND", None)
        env["PYTHONUNBUFFERED"] = "1"
        env[RUN_ENV] = str(self.run_dir)
        if self.options.app is not None:
            env["SWH_SCHEDULER_APP"] = self.options.app  # the daemons' --app
        else:
            env.pop("SWH_SCHEDULER_APP", None)
        return env

    def worker_specs(self, env: dict[str, str]) -> list[ChildSpec]:
        """One Celery worker per queue of the registered task types (with an
        app of the user's, one worker of that app on all of them)."""
        queues: dict[str, list[str]] = {}
        for task_type in self.store.get_task_types():
            queues.setdefault(task_type.effective_queue, []).append(task_type.type)
        if self.options.app is not None:
            return [self._app_worker(sorted(queues), env)] if queues else []
        specs = []
        for queue, names in sorted(queues.items(), key=lambda item: item[1][0]):
            name = _safe("+".join(sorted(names)))
            argv = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                CELERY_APP,
                "worker",
                "-Q",
                queue,
                "-E",
                "-n",
                f"{name}@%h",
                "-c",
                str(self.options.concurrency),
                "--pool",
                self.options.pool,
                "--loglevel",
                "INFO",
                "--without-mingle",
                "--pidfile",
                str(self.run_dir / f"worker-{name}.pid"),
            ]
            specs.append(
                ChildSpec(f"worker {name}", argv, self.run_dir / f"worker-{name}.log", env)
            )
        return specs

    def _app_worker(self, queues: list[str], env: dict[str, str]) -> ChildSpec:
        """A worker of the user's app (``celery -A APP worker -Q ... -E``)."""
        assert self.options.app is not None
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            self.options.app,
            "worker",
            "-Q",
            ",".join(queues),
            "-E",
            "-n",
            "standalone@%h",
            "-c",
            str(self.options.concurrency),
            "--pool",
            self.options.pool,
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--pidfile",
            str(self.run_dir / "worker-app.pid"),
        ]
        return ChildSpec("worker app", argv, self.run_dir / "worker-app.log", env)

    def start(self) -> None:
        """Start the broker (if needed) and every daemon; on failure, stop what started."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.say(f"Logs and pids of this run: {self.run_dir}")
        self.prepare_store()
        if self.broker_url is None:
            self.redis = start_embedded_redis(self.run_dir / "redis.log")
            self.broker_url = self.redis.broker_url
            self.result_backend = self.redis.result_backend
            self.say(
                f"Started the embedded Redis broker on {self.broker_url} "
                f"(pid {self.redis.child.pid})"
            )
        env = self.child_env()
        swh = [*swh_command(), "scheduler"]
        self.listener = [
            spawn(
                ChildSpec(
                    "listener",
                    [*swh, "start-listener", "--catch-up-every", "15", "--catch-up-delay", "15"],
                    self.run_dir / "listener.log",
                    env,
                )
            )
        ]
        self.workers = [spawn(spec) for spec in self.worker_specs(env)]
        # the embedded broker starts empty: the messages of runs left open by a
        # previous run are gone, so send them again after a minute, not five
        republish = ["--republish-after", "1 min"] if self.redis is not None else []
        self.runner = [
            spawn(
                ChildSpec(
                    "runner",
                    [*swh, "start-runner", "--period", str(self.options.runner_period), *republish],
                    self.run_dir / "runner.log",
                    env,
                )
            )
        ]
        if self.options.api:
            self.start_api(swh, env)
        self.write_pids()
        if self.api:
            self.announce_console()

    def start_api(self, swh: list[str], env: dict[str, str]) -> None:
        """``rpc-serve`` on a free loopback port, with this run's token (in its
        environment, not on its command line)."""
        port = free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        serve = [*swh, "rpc-serve", "--host", "127.0.0.1", "--port", str(port)]
        tokens = f"{self.api_token}:rw,{self.api_read_token}:ro"
        api_env = {**env, "SWH_SCHEDULER_API_TOKENS": tokens}
        _write_secret(self.token_file, self.api_token)
        _write_secret(self.read_token_file, self.api_read_token)
        self.api = [spawn(ChildSpec("api", serve, self.run_dir / "api.log", api_env))]
        self.say(f"HTTP API on {self.api_url} (docs: {self.api_url}/docs)")
        self.say(
            f"  tokens: {self.token_file.name} (read-write), {self.read_token_file.name} "
            f"(read-only) in {self.run_dir}"
        )
        self.say(
            f'  curl -H "Authorization: Bearer $(cat {shlex.quote(str(self.token_file))})" '
            f"{self.api_url}/conditions"
        )

    def announce_console(self) -> None:
        """Print the console's one-time login links, made by the API once it
        answers: a link opens one session and holds no token, so a
        browser's history keeps nothing worth stealing."""
        writer = self.console_link(self.api_token, "read-write")
        reader = self.console_link(self.api_read_token, "read-only") if writer else None
        self.links = [writer, reader] if writer is not None and reader is not None else []
        for line in self.console_lines():
            self.say(line)

    def link_command(self) -> str:
        """The command that makes a new login link, its token read from the
        token file (not shown)."""
        return (
            f"SWH_SCHEDULER_API_TOKEN=$(cat {shlex.quote(str(self.token_file))}) "
            f"swh scheduler console-link --url {self.api_url}"
        )

    def console_lines(self, now: datetime | None = None) -> list[str]:
        """The console's links and how to make another (empty without the API)."""
        if self.api_url is None:
            return []
        return console_lines(
            self.links,
            console_url=f"{self.api_url}/console/",
            new_link=self.link_command(),
            token_file=str(self.token_file),
            now=now,
        )

    def console_link(self, token: str, access: str, *, within: float = 30.0) -> ConsoleLink | None:
        """A one-time login link for ``token``, asked of the API as soon as
        it answers (``None`` when it did not within ``within`` seconds)."""
        import httpx

        deadline = time.monotonic() + within
        headers = {"Authorization": f"Bearer {token}"}
        while time.monotonic() < deadline and all(c.exit_code() is None for c in self.api):
            try:
                answer = httpx.post(f"{self.api_url}/console/links", headers=headers, timeout=5)
            except httpx.HTTPError:
                time.sleep(0.2)  # not listening yet
                continue
            if answer.status_code == 201:
                made = answer.json()
                return ConsoleLink(access, str(made["url"]), _instant(made.get("expires_at")))
            logger.warning("the API made no login link: HTTP %s", answer.status_code)
            return None
        return None

    def children(self) -> list[Child]:
        redis = [self.redis.child] if self.redis is not None else []
        return [*redis, *self.listener, *self.workers, *self.runner, *self.api]

    def write_pids(self) -> None:
        data = {
            "run_dir": str(self.run_dir),
            "broker_url": self.broker_url,
            "children": {c.name: c.pid for c in self.children()},
        }
        # written whole, then renamed: a reader never sees half of it
        path = self.run_dir / "children.json"
        partial = path.with_suffix(".json.tmp")
        partial.write_text(json.dumps(data, indent=2) + "\n")
        partial.replace(path)

    # -- stopping ------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop every child (runner and workers, then the listener, then the
        broker); the names of the children that had to be killed."""
        killed = stop_children([[*self.runner, *self.workers, *self.api], self.listener])
        if self.redis is not None:
            killed += stop_children([[self.redis.child]])
            shutil.rmtree(self.redis.data_dir, ignore_errors=True)
        return killed

    # -- the table -----------------------------------------------------------

    def screen(self, snap: Snapshot | None, note: str = "") -> str:
        now = snap.taken_at if snap is not None else self.clock()
        uptime = timedelta(seconds=int((now - self.started_at).total_seconds()))
        width = shutil.get_terminal_size((120, 40)).columns if self.tty else None
        broker = display_url(self.broker_url) if self.broker_url else "-"
        if self.redis is not None:
            broker += " (embedded Redis)"
        lines = [
            f"swh scheduler standalone - {now:%Y-%m-%d %H:%M:%S} UTC - up {uptime}"
            + (" - Ctrl-C stops everything" if self.tty else ""),
            f"database {display_url(self.options.db_url)}",
            f"broker   {broker}",
            *(
                [
                    f"api      {self.api_url} (tokens: {self.token_file.name}, "
                    f"{self.read_token_file.name} in the logs folder)",
                    f"console  {self.api_url}/console/ (login links under the table)",
                ]
                if self.api_url
                else []
            ),
            f"logs     {self.run_dir}",
            "",
        ]
        console = self.console_lines(now)
        if snap is not None:
            lines.append(render(snap.rows, now=now, width=width, console=console))
        elif console:
            lines += console
        if self.restarts.notes:
            lines += ["", "Children that exited on their own (started again):"]
            lines += [f"  {line}" for line in self.restarts.notes]
        if note:
            lines += ["", note]
        return "\n".join(lines)

    def show(self, text: str) -> None:
        if self.tty:
            prefix = "\x1b[H" if self._drawn else "\x1b[2J\x1b[H"
            body = "\n".join(line + "\x1b[K" for line in text.splitlines())
            self.out.write(prefix + body + "\n\x1b[J")
            self._drawn = True
        else:
            self.out.write(text + "\n\n")
        self.out.flush()

    # -- children that exit on their own -------------------------------------

    def tell(self, line: str) -> None:
        """A line about a child's exit or restart: in the log and under the table."""
        logger.warning("%s", line)
        self.restarts.note(f"{self.clock():%H:%M:%S} {line}")

    def supervise(self, now: float) -> None:
        """Plan the restart of every child that exited (``now``: monotonic
        seconds), and start again those whose delay has passed."""
        for child in self.children():
            code = child.exit_code()
            if code is None or child.name in self.restarts.pending:
                continue
            planned = self.restarts.exited(child.name, uptime=now - child.started, now=now)
            self.tell(
                f"{child.name} (pid {child.pid}) exited on its own, {exit_text(code)}, after "
                f"running {timedelta(seconds=int(now - child.started))}; starting it again in "
                f"{planned.delay:g} s (restart {planned.restart}); its log: {child.spec.log_path}"
            )
        restarted = False
        for planned in self.restarts.due(now):
            old = next((c for c in self.children() if c.name == planned.name), None)
            if old is None:  # pragma: no cover - every planned child is in a list
                continue
            try:
                new = spawn(old.spec)
            except OSError as error:
                self.tell(f"{planned.name} could not be started again: {error}")
                self.restarts.exited(planned.name, uptime=0.0, now=now)
                continue
            self.replace(old, new)
            restarted = True
            self.tell(f"{planned.name} started again (pid {new.pid})")
        if restarted:
            self.write_pids()

    def replace(self, old: Child, new: Child) -> None:
        """Put ``new`` where ``old`` was (its list, or the embedded broker)."""
        for group in (self.listener, self.workers, self.runner, self.api):
            for i, child in enumerate(group):
                if child is old:
                    group[i] = new
        if self.redis is not None and self.redis.child is old:
            self.redis.child = new

    def renew_lock(self) -> bool:
        """Renew the database's lock; False once another process took it
        (this one was stopped, or away from the database, longer than the
        lock lives). A database error is logged: the next renewal retries."""
        try:
            return self.lock.renew()
        except SchedulerError as error:
            logger.warning("could not renew the database lock: %s", error)
            return True

    def loop(self, stop: threading.Event) -> int:
        """Refresh the table until ``stop`` is set or the duration has passed
        (exit code 0), restarting the children that exit on their own;
        exit code 1 if the database's lock was taken by another process."""
        end = None if self.options.duration is None else time.monotonic() + self.options.duration
        renew_at = time.monotonic() + RENEW_EVERY.total_seconds()
        previous: Snapshot | None = None
        while not stop.is_set():
            note = ""
            try:
                previous = self.last = snapshot(self.store, self.clock(), previous)
            except SchedulerError as error:  # a busy database: show it, try again
                note = f"(the table could not be read: {error})"
            now = time.monotonic()
            if now >= renew_at:
                renew_at = now + RENEW_EVERY.total_seconds()
                if not self.renew_lock():
                    self.show(
                        self.screen(
                            previous,
                            "Another process took this database's lock (this one was "
                            "stopped, or away from the database, for longer than the lock "
                            "lives): stopping.",
                        )
                    )
                    return 1
            if not stop.is_set():
                self.supervise(now)
            self.show(self.screen(previous, note))
            wait = min(self.options.refresh, max(0.0, renew_at - now))
            due = self.restarts.next_due()
            if due is not None:
                wait = min(wait, max(0.05, due - time.monotonic()))
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, left)
            stop.wait(wait)
        return 0

    def run(self, stop: threading.Event) -> int:
        """Take the database's lock (or raise
        :class:`~.lock.StandaloneRunning`, nothing started), start, loop,
        stop, give the lock up; the exit code."""
        self.lock.take()
        code = 1
        try:
            self.start()
            code = 0 if stop.is_set() else self.loop(stop)
        finally:
            if self.children():
                self.say("Stopping...")
            killed = self.stop()
            if killed:
                self.say(f"Killed after the stop timeout: {', '.join(killed)}")
            self.lock.release()
        try:
            final = snapshot(self.store, self.clock(), self.last)
        except SchedulerError:
            final = None
        if final is not None:
            self.show(self.screen(final, f"Stopped {len(self.children())} processes."))
        return code
