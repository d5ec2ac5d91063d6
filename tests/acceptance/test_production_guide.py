"""The production guide's first deployment, followed step by step.

Every command line of the procedure of ``docs/howto/production.md`` ("A
first deployment on PostgreSQL and RabbitMQ") is read from the page's ``sh``
blocks, in order, and handled by :data:`Guide.HANDLERS`: a line no handler
knows fails the test. The lines that need neither root nor systemd run as
written, in one ``bash`` per line that first replays the lines that set the
shell's state (``UNITS=...``, loading the environment file), with the
page's paths, names and secrets replaced by the test's: the PostgreSQL
commands (without ``sudo -u postgres``) on the test server, the
``rabbitmqctl`` commands as written on a virtual host and a user of the
test's own (deleted afterwards), the environment file written from the
page's ``ini`` block, the ``swh`` commands of this environment. What the
page shows in the ``text`` block after a block is checked against what its
commands printed (``...`` stands for anything, times and ids are masked).

The lines that need root or systemd (``useradd``, the virtual environment
in ``/opt``, copying the units, ``systemctl``) are checked against the units
the package ships instead: the user, the paths, the environment file, each
unit the page names; then each unit's ``ExecStart`` runs as a subprocess
with the page's environment file, as systemd would start it (a free port
for the API and the listener's metrics), and is stopped as its ``KillMode``
says. The last step's task must complete and ``/health`` answer ``ok``."""

from __future__ import annotations

import configparser
import contextlib
import grp
import os
import pwd
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

import httpx
import psycopg
import pytest
import services
from pageshow import first_unshown
from psycopg import sql
from standalone_run import clean_env
from waiting import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.postgresql, pytest.mark.rabbitmq]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "howto" / "production.md"
PROCEDURE = "## A first deployment on PostgreSQL and RabbitMQ"
BIN = Path(sys.executable).parent
#: the page's secrets, replaced by the test's
PLACEHOLDERS = ("DB-PASSWORD", "MQ-PASSWORD", "API-TOKEN")


# --------------------------------------------------------------------------- #
# the page
# --------------------------------------------------------------------------- #


@dataclass
class Block:
    language: str
    text: str
    #: the ``text`` block that follows it on the page, if any
    shown: str | None = None

    def lines(self) -> list[str]:
        """Its command lines (continuations joined, comments left out), as
        ``test_docs_commands.commands`` reads them."""
        found = []
        for line in self.text.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(" ".join(line.split()))
        return found


def procedure(page: Path = PAGE) -> list[Block]:
    """The fenced blocks of the procedure's section, in order."""
    text = page.read_text("utf-8")
    start = text.index(f"\n{PROCEDURE}\n")
    end = text.index("\n## ", start + len(PROCEDURE) + 2)
    blocks: list[Block] = []
    for language, body in re.findall(r"^```(\w+)\n(.*?)^```$", text[start:end], re.S | re.M):
        if language == "text" and blocks and blocks[-1].language == "sh":
            blocks[-1].shown = body
        else:
            blocks.append(Block(language, body))
    return blocks


# --------------------------------------------------------------------------- #
# what a block printed against what the page shows
# --------------------------------------------------------------------------- #

VOLATILE = (
    (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:[+-]\d\d:\d\d)?", "<time>"),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
    (r"\b[0-9a-f]{12,32}\b", "<id>"),
    (r"\b(revision|database:|code:) \d+", r"\1 <revision>"),
)


def normalized(line: str) -> str:
    for pattern, replacement in VOLATILE:
        line = re.sub(pattern, replacement, line)
    return " ".join(line.split())


def assert_shows(shown: str, printed: str, what: str) -> None:
    """Each line the page shows is a line printed, in the same order
    (:mod:`pageshow`)."""
    problem = first_unshown(shown, printed, normalized)
    assert problem is None, f"{what}: {problem}"


# --------------------------------------------------------------------------- #
# the units the package ships
# --------------------------------------------------------------------------- #


def unit_file(folder: Path, name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string((folder / name).read_text())
    return parser["Service"]


def environment_file(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines, as systemd's ``EnvironmentFile=`` reads them."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


@dataclass
class Started:
    unit: str
    process: subprocess.Popen[bytes]
    log: Path
    kill_mode: str
    stop_timeout: float

    def text(self) -> str:
        return self.log.read_text(errors="replace")


# --------------------------------------------------------------------------- #
# the guide, followed
# --------------------------------------------------------------------------- #


class Guide:
    """The state of the root shell the page's procedure runs in, and what
    each command line does here."""

    def __init__(self, tmp_path: Path, server: str, broker: str) -> None:
        self.tmp_path = tmp_path
        self.etc = tmp_path / "etc" / "swh-scheduler"
        #: the units' WorkingDirectory
        self.home = tmp_path / "var" / "lib" / "swh-scheduler"
        self.home.mkdir(parents=True)
        tag = uuid.uuid4().hex[:8]
        #: the test's names and secrets
        self.role = f"swhprod-{tag}"
        self.database = services.prefixed(f"swhprod_{tag}")
        self.vhost = f"swhprod.{tag}"
        self.secrets = {name: secrets.token_urlsafe(24) for name in PLACEHOLDERS}
        self.api_port, self.metrics_port = services.free_port(), services.free_port()
        pg = urllib.parse.urlsplit(server)
        self.pg_env = {
            "PGHOST": pg.hostname or "127.0.0.1",
            "PGPORT": str(pg.port or 5432),
            "PGUSER": urllib.parse.unquote(pg.username or "postgres"),
        }
        if pg.password:
            self.pg_env["PGPASSWORD"] = urllib.parse.unquote(pg.password)
        self.pg_hostport = f"{self.pg_env['PGHOST']}:{self.pg_env['PGPORT']}"
        mq = urllib.parse.urlsplit(broker)
        self.mq_hostport = f"{mq.hostname or '127.0.0.1'}:{mq.port or 5672}"
        #: the page's names, learned from its commands
        self.page: dict[str, str] = {}
        #: what was made on the servers, to delete
        self.made: set[str] = set()
        self.me = pwd.getpwuid(os.getuid()).pw_name
        self.my_group = grp.getgrgid(os.getgid()).gr_name
        self.env = {k: v for k, v in clean_env(tmp_path).items() if not k.startswith("CELERY")}
        #: the lines that set the shell's state, replayed before each line
        self.prelude: list[str] = []
        self.units: Path | None = None
        self.settings: dict[str, str] = {}
        self.queues: list[str] = []
        self.workers: list[str] = []
        self.started: list[Started] = []
        self.healthy = False

    # -- substitutions ------------------------------------------------------ #

    def paths(self, line: str) -> str:
        """The page's paths, port and token in a shell line, the test's instead."""
        for page, here in (
            ("/opt/swh-scheduler/venv/bin/", f"{BIN}/"),
            ("/etc/swh-scheduler/", f"{self.etc}/"),
            ("127.0.0.1:5008", f"127.0.0.1:{self.api_port}"),
            ("API-TOKEN", self.secrets["API-TOKEN"]),
        ):
            line = line.replace(page, here)
        return line

    def unlocalized(self, printed: str) -> str:
        """What a command printed, with the test's names put back as the page's."""
        pairs = [
            (f"{BIN}/", "/opt/swh-scheduler/venv/bin/"),
            (str(self.etc), "/etc/swh-scheduler"),
            (f" {self.me} {self.my_group} ", " root swh-scheduler "),
            (self.pg_hostport, "127.0.0.1:5432"),
            (self.mq_hostport, "127.0.0.1:5672"),
            (f"127.0.0.1:{self.api_port}", "127.0.0.1:5008"),
            *((secret, name) for name, secret in self.secrets.items()),
            (self.database, self.page.get("database", "scheduler")),
            (self.vhost, self.page.get("vhost", "swh")),
            (self.role, self.page.get("role", "swh-scheduler")),
        ]
        for here, page in sorted(pairs, key=lambda pair: -len(pair[0])):
            printed = printed.replace(here, page)
        return printed

    def names(self, words: list[str]) -> list[str]:
        """The page's role, database, virtual host, user and secrets in a
        command's words, the test's instead."""
        mapping = {
            self.page.get("role"): self.role,
            self.page.get("mq_user"): self.role,
            self.page.get("database"): self.database,
            self.page.get("vhost"): self.vhost,
            **{name: secret for name, secret in self.secrets.items()},
        }
        return [mapping.get(word, word) for word in words]

    # -- running ------------------------------------------------------------ #

    def shell(self, line: str, *, terminal: bool = False) -> str:
        """``line`` in bash, after the lines that set the shell's state: what
        it printed (with ``terminal``, its standard output alone: curl draws
        its progress meter on standard error only when its output is not a
        terminal)."""
        script = "\n".join([*self.prelude, self.paths(line)])
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        return done.stdout if terminal else done.stdout + done.stderr

    def check_alive(self) -> None:
        for unit in self.started:
            assert unit.process.poll() is None, f"{unit.unit} exited:\n{unit.text()[-3000:]}"

    # -- the handlers: each returns what the line printed, or None ---------- #

    def secret(self, line: str) -> str | None:
        printed = self.shell(line).strip()
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", printed), printed
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{32}", s) for s in self.secrets.values())
        return None  # a new one each time: the page's sample is not printed again

    def useradd(self, line: str) -> str | None:
        words = shlex.split(line)
        assert "--system" in words and "--user-group" in words and "--create-home" in words
        user, home = words[-1], words[words.index("--home-dir") + 1]
        self.page["user"] = user
        for name in self.unit_names():
            service = unit_file(self.shipped(), name)
            assert (service["User"], service["Group"]) == (user, user), name
            assert service["WorkingDirectory"] == home, name
        return None

    def venv(self, line: str) -> str | None:
        venv = shlex.split(line)[-1]
        self.page["venv"] = venv
        for name in self.unit_names():
            argv = shlex.split(unit_file(self.shipped(), name)["ExecStart"])
            assert argv[0].startswith(f"{venv}/bin/"), (name, argv[0])
        return None

    def pip_install(self, line: str) -> str | None:
        """This environment stands in for the page's (the wheel and the
        README's install commands have tests of their own)."""
        assert shlex.split(line)[0] == f"{self.page['venv']}/bin/pip"
        assert metadata.version("swh-like-scheduler")
        assert (BIN / "swh").exists() and (BIN / "celery").exists()
        return None

    def set_units(self, line: str) -> str | None:
        self.shell(line)
        self.prelude.append(self.paths(line))
        self.units = Path(self.shell('printf %s "$UNITS"'))
        assert self.units == self.shipped(), self.units
        return ""

    def ls_units(self, line: str) -> str | None:
        printed = self.shell(line)
        assert printed.split() == sorted(p.name for p in self.shipped().iterdir())
        return printed

    def postgres(self, line: str) -> str | None:
        words = shlex.split(line)
        assert words[:3] == ["sudo", "-u", "postgres"], line
        program, *arguments = words[3:]
        if program == "createuser":
            assert "--pwprompt" in arguments
            self.page["role"] = arguments[-1]
            typed = f"{self.secrets['DB-PASSWORD']}\n" * 2
            self.made.add("role")
        else:
            assert program == "createdb"
            assert arguments[arguments.index("--owner") + 1] == self.page["role"]
            self.page["database"] = arguments[-1]
            typed = ""
            self.made.add("database")
        # a session of its own: the password prompts read stdin, not a terminal
        done = subprocess.run(
            [program, *self.names(arguments)],
            input=typed,
            env={**self.env, **self.pg_env},
            capture_output=True,
            text=True,
            timeout=60,
            start_new_session=True,
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        return done.stdout + done.stderr

    def rabbitmqctl(self, line: str) -> str | None:
        words = shlex.split(line)
        if words[1] == "add_vhost":
            self.page["vhost"] = words[2]
            self.made.add("vhost")
        elif words[1] == "add_user":
            self.page["mq_user"] = words[2]
            assert words[3] == "MQ-PASSWORD", "the user's password is the page's MQ-PASSWORD"
            self.made.add("mq_user")
        done = subprocess.run(self.names(words), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        return done.stdout + done.stderr

    def install_environment_file(self, line: str) -> str | None:
        words = shlex.split(line)
        group = words[words.index("-g") + 1]
        assert group == self.page["user"] and words[words.index("-o") + 1] == "root"
        assert words[words.index("-m") + 1] == "0640"
        assert words[-2] == "$UNITS/scheduler.env.example"
        for name in self.unit_names():
            assert unit_file(self.shipped(), name)["EnvironmentFile"] == words[-1], name
        self.page["environment_file"] = words[-1]
        # as written, but owned by whoever runs the test
        mine = line.replace(f"-o root -g {group}", f"-o {self.me} -g {self.my_group}")
        self.shell(mine)
        return ""

    def ls_environment_file(self, line: str) -> str | None:
        printed = self.shell(line)
        assert printed.startswith("-rw-r----- "), printed
        return printed

    def load_environment(self, line: str) -> str | None:
        match = re.fullmatch(r"set -a; \. (\S+); set \+a", line)
        assert match and match.group(1) == self.page["environment_file"], line
        self.prelude.append(self.paths(line))
        self.shell("true")
        return ""

    def swh(self, line: str) -> str | None:
        if " task list" in line or " task runs " in line:
            wait_until(self.task_completed, 60, "the guide's task to complete")
        printed = self.shell(line)
        if line.endswith("| grep queue:"):
            self.queues = [row.split()[-1] for row in printed.splitlines()]
        return printed

    def copy_units(self, line: str) -> str | None:
        assert line == 'cp "$UNITS"/*.service /etc/systemd/system/', line
        return None

    def daemon_reload(self, line: str) -> str | None:
        assert line == "systemctl daemon-reload"
        return None

    def enable(self, line: str) -> str | None:
        words = shlex.split(line)
        assert words[:3] == ["systemctl", "enable", "--now"], line
        for name in words[3:]:
            template, at, instance = name.partition("@")
            unit = f"{template}@.service" if at else f"{name}.service"
            assert (self.shipped() / unit).exists(), f"{unit} is not shipped"
            if at:
                self.workers.append(instance)
            self.start(unit, instance)
        return None

    def journal(self, line: str) -> str | None:
        match = re.fullmatch(r"journalctl -u (\S+) -o cat \| head -(\d+)", line)
        assert match, line
        [unit] = [u for u in self.started if u.unit == f"{match.group(1)}.service"]
        count = int(match.group(2))

        def logged() -> bool:
            self.check_alive()
            return len(unit.text().splitlines()) >= count

        wait_until(logged, 60, f"{count} lines of {unit.unit}'s log")
        return "\n".join(unit.text().splitlines()[:count])

    def curl(self, line: str) -> str | None:
        assert "127.0.0.1:5008/" in line and self.page.get("api_port") == "5008", line
        if not self.healthy:
            wait_until(self.health_ok, 60, "/health to answer ok")
            self.healthy = True
        return self.shell(line, terminal=True)

    HANDLERS: tuple[tuple[str, Callable[[Guide, str], str | None]], ...] = (
        (r"python3 -c 'import secrets; .*'", secret),
        (r"useradd .*", useradd),
        (r"python3 -m venv \S+", venv),
        (r"\S+/bin/pip install .*", pip_install),
        (r"UNITS=\$\(.*\)", set_units),
        (r'ls "\$UNITS"', ls_units),
        (r"sudo -u postgres (createuser|createdb) .*", postgres),
        (r"rabbitmqctl (add_vhost|add_user|set_permissions) .*", rabbitmqctl),
        (r"install -D .*", install_environment_file),
        (r"ls -l /etc/swh-scheduler/\S+", ls_environment_file),
        (r"set -a; .*", load_environment),
        (r"/opt/swh-scheduler/venv/bin/swh scheduler .*", swh),
        (r"cp .*", copy_units),
        (r"systemctl daemon-reload", daemon_reload),
        (r"systemctl enable .*", enable),
        (r"journalctl .*", journal),
        (r"curl .*", curl),
    )

    def run(self, line: str) -> str | None:
        for pattern, handler in self.HANDLERS:
            if re.fullmatch(pattern, line):
                return handler(self, line)
        pytest.fail(f"a command of the procedure that this test neither runs nor checks: {line}")

    # -- the environment file ----------------------------------------------- #

    def edit_environment_file(self, block: Block) -> None:
        """The page's file: the example's lines and keys (less the result
        backend the page deletes), naming the database, the broker and the
        token made above; written with the test's."""
        example = (self.shipped() / "scheduler.env.example").read_text()
        kept = environment_file(block.text)
        for line in block.text.splitlines():
            if line.startswith("#"):
                assert line in example.splitlines(), f"not a line of the example: {line}"
        assert set(environment_file(example)) - set(kept) == {"SWH_SCHEDULER_RESULT_BACKEND"}
        assert set(kept) <= set(environment_file(example))
        role, database = self.page["role"], self.page["database"]
        mq_user, vhost = self.page["mq_user"], self.page["vhost"]
        db_url = f"postgresql://{role}:DB-PASSWORD@127.0.0.1:5432/{database}"
        broker_url = f"amqp://{mq_user}:MQ-PASSWORD@127.0.0.1:5672/{vhost}"
        assert kept["SWH_SCHEDULER_DB_URL"] == db_url
        assert kept["SWH_SCHEDULER_BROKER_URL"] == broker_url
        assert kept["SWH_SCHEDULER_API_TOKENS"] == "API-TOKEN:rw"
        ours = (
            block.text.replace(
                db_url,
                f"postgresql://{self.role}:{self.secrets['DB-PASSWORD']}"
                f"@{self.pg_hostport}/{self.database}",
            )
            .replace(
                broker_url,
                f"amqp://{self.role}:{self.secrets['MQ-PASSWORD']}@{self.mq_hostport}/{self.vhost}",
            )
            .replace("API-TOKEN", self.secrets["API-TOKEN"])
        )
        path = Path(self.paths(self.page["environment_file"]))
        path.write_text(ours)
        assert path.stat().st_mode & 0o777 == 0o640
        self.settings = environment_file(ours)

    # -- the units ---------------------------------------------------------- #

    def shipped(self) -> Path:
        return Path(str(resources.files("swh_like_scheduler").joinpath("docs/systemd")))

    def unit_names(self) -> list[str]:
        return sorted(p.name for p in self.shipped().glob("*.service"))

    def start(self, unit: str, instance: str) -> None:
        """The unit's ``ExecStart``, as systemd would run it here."""
        service = unit_file(self.shipped(), unit)
        assert service["EnvironmentFile"] == self.page["environment_file"]
        argv = shlex.split(service["ExecStart"])
        assert argv[0].startswith(f"{self.page['venv']}/bin/"), argv
        argv[0] = str(BIN / argv[0].rsplit("/", 1)[1])
        argv = [word.replace("%i", instance).replace("%H", socket.gethostname()) for word in argv]
        for option, port in (("--port", self.api_port), ("--metrics-port", self.metrics_port)):
            if option in argv:
                if option == "--port":
                    self.page["api_port"] = argv[argv.index(option) + 1]
                argv[argv.index(option) + 1] = str(port)
        env = {**self.env, **self.settings}
        for assignment in service.get("Environment", "").split():
            key, _, value = assignment.partition("=")
            env[key] = self.paths(value.rstrip("/") + "/").rstrip("/")
        name = unit.replace("@.service", f"@{instance}.service")
        log = self.tmp_path / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv,
                cwd=self.home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append(
            Started(
                name,
                process,
                log,
                service.get("KillMode", "control-group"),
                float(service["TimeoutStopSec"]),
            )
        )

    def stop(self) -> dict[str, int | None]:
        """SIGTERM to every unit at once (to the main process alone with
        ``KillMode=mixed``), then a bounded wait; SIGKILL to what is left
        of its process group. Once: the units are not started again."""
        running = [unit for unit in self.started if unit.process.returncode is None]
        for unit in running:
            with contextlib.suppress(ProcessLookupError):
                if unit.kill_mode == "mixed":
                    os.kill(unit.process.pid, signal.SIGTERM)
                else:
                    os.killpg(unit.process.pid, signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for unit in running:
            try:
                codes[unit.unit] = unit.process.wait(min(unit.stop_timeout, 60))
            except subprocess.TimeoutExpired:
                codes[unit.unit] = None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(unit.process.pid, signal.SIGKILL)
            unit.process.wait(10)
        return codes

    # -- conditions --------------------------------------------------------- #

    def task_completed(self) -> bool:
        self.check_alive()
        url = self.settings["SWH_SCHEDULER_DB_URL"]
        with psycopg.connect(url, connect_timeout=10) as conn:
            row = conn.execute("SELECT status FROM task WHERE id = 1").fetchone()
        return row is not None and row[0] == "completed"

    def health_ok(self) -> bool:
        self.check_alive()
        try:
            answer = httpx.get(f"http://127.0.0.1:{self.api_port}/health", timeout=5)
        except httpx.TransportError:
            return False
        return answer.status_code == 200 and answer.json()["status"] == "ok"

    # -- clean-up ----------------------------------------------------------- #

    def delete(self, server: str) -> None:
        if "database" in self.made:
            services.drop_database(server, self.database)
        if "role" in self.made:
            with psycopg.connect(services.libpq_url(server), autocommit=True) as conn:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(self.role)))
        for made, command in (("vhost", "delete_vhost"), ("mq_user", "delete_user")):
            if made in self.made:
                name = self.vhost if made == "vhost" else self.role
                subprocess.run(
                    ["rabbitmqctl", "-q", command, name], capture_output=True, timeout=60
                )


@pytest.fixture
def guide(tmp_path: Path) -> Iterator[Guide]:
    server = services.require("postgresql", services.postgres_url)
    broker = services.require("rabbitmq", services.amqp_url)
    if subprocess.run(["sh", "-c", "command -v rabbitmqctl"], capture_output=True).returncode:
        message = "rabbitmqctl is not installed here: the guide's RabbitMQ step needs it"
        if services.in_ci():
            pytest.fail(message)
        pytest.skip(message)
    followed = Guide(tmp_path, server, broker)
    try:
        yield followed
    finally:
        followed.stop()
        followed.delete(server)


@pytest.mark.timeout(300)
def test_the_first_deployment_as_the_page_writes_it(guide: Guide) -> None:
    blocks = procedure()
    lines = [line for block in blocks if block.language == "sh" for line in block.lines()]
    assert len(lines) >= 20, lines
    compared = 0
    for block in blocks:
        if block.language == "ini":
            guide.edit_environment_file(block)
            continue
        assert block.language == "sh", block
        printed = [guide.run(line) for line in block.lines()]
        if block.shown is None:
            continue
        if None in printed:  # only the secret's block: a new one each time
            assert block.lines()[0].startswith("python3 -c 'import secrets;"), block
            assert re.fullmatch(r"[A-Za-z0-9_-]{32}\n", block.shown), block.shown
            continue
        shown = "".join(p for p in printed if p is not None)
        assert_shows(block.shown, guide.unlocalized(shown), block.text.strip())
        compared += 1
    assert compared == len([b for b in blocks if b.shown is not None]) - 1

    # every queue of the registered types has its worker, and each is up
    assert guide.queues and sorted(guide.workers) == sorted(guide.queues)
    for worker in guide.workers:
        [unit] = [u for u in guide.started if u.unit.endswith(f"@{worker}.service")]
        ready = f"{worker}@{socket.gethostname()} ready."
        wait_until(lambda unit=unit, ready=ready: ready in unit.text(), 60, ready)
    guide.check_alive()
    # each daemon names the page's database and broker, chosen, not defaults
    for unit in guide.started:
        if "worker" not in unit.unit:
            first = unit.text().splitlines()[0]
            assert "(from SWH_SCHEDULER_DB_URL)" in first, first
            assert "(from SWH_SCHEDULER_BROKER_URL)" in first and "WARNING" not in first, first
    assert guide.task_completed() and guide.healthy

    # each unit stops on SIGTERM, cleanly as systemd sees it
    codes = guide.stop()
    for unit in guide.started:
        assert codes[unit.unit] in (0, -signal.SIGTERM), (unit.unit, unit.text()[-3000:])
