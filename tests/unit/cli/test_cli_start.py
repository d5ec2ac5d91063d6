"""The command line answers at once: a command's module, and what it needs
(SQLAlchemy, Celery, FastAPI, SimPy...), is imported only when that command
runs; help imports none of the heavy libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from swh_like_scheduler.cli import scheduler
from swh_like_scheduler.cli.groups import Lazy, SchedulerGroup
from swh_like_scheduler.cli.tree import SCHEDULER

#: libraries no help text needs (top-level module names)
HEAVY = (
    "alembic",
    "amqp",
    "celery",
    "confluent_kafka",
    "fastapi",
    "httpx",
    "jinja2",
    "kombu",
    "matplotlib",
    "psycopg",
    "redis",
    "simpy",
    "sqlalchemy",
    "starlette",
    "uvicorn",
)

#: forks once per command line given (JSON lists on argv[1]) after importing
#: the CLI, runs it, and prints the heavy modules each child had loaded
PROBE = """
import json, os, sys
from swh_like_scheduler.cli import swh

heavy = set(json.loads(sys.argv[2]))
def loaded():
    return sorted({m.partition('.')[0] for m in sys.modules} & heavy)

found = {"<cli>": loaded()}
for argv in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        try:
            swh.main(args=argv, prog_name="swh", standalone_mode=False)
        except BaseException as error:
            os.write(2, f"{argv}: {error!r}\\n".encode())
        os.write(write, json.dumps(loaded()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        found[" ".join(argv)] = json.loads(pipe.read() or "null")
    os.waitpid(pid, 0)
print(json.dumps(found))
"""


def every_command() -> list[list[str]]:
    """Each command of the tree, as the words that name it."""
    found = []
    for name, entry in SCHEDULER.items():
        if isinstance(entry, SchedulerGroup):
            found.extend([name, sub] for sub in entry.lazy)
        else:
            found.append([name])
    return found


def probe(commands: list[list[str]], env: dict[str, str] | None = None) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(commands), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def test_help_of_every_command_loads_no_heavy_library() -> None:
    commands = [["--help"], ["scheduler", "--help"]]
    commands += [["scheduler", *words, "--help"] for words in every_command()]
    found = probe(commands)
    assert len(found) == len(commands) + 1
    assert {line: mods for line, mods in found.items() if mods} == {}


def test_a_command_runs_with_only_its_own_libraries(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    env = {**os.environ, "SWH_SCHEDULER_DB_URL": url}
    swh = str(Path(sys.executable).with_name("swh"))
    for setup in (
        ["db", "init"],
        ["task-type", "register"],
        ["task", "add", "sleep", "--interval", "1h", "duration=1"],
    ):
        subprocess.run([swh, "scheduler", *setup], check=True, env=env, capture_output=True)
    reads = [
        ["task-type", "list"],
        ["task", "list"],
        ["task", "status"],
        ["task", "explain", "1"],
        ["task", "runs", "1"],
        ["task", "list-pending", "sleep"],
        ["db", "version"],
    ]
    found = probe([["scheduler", *words] for words in reads], env)
    # the database (SQLAlchemy) but no broker, server, simulator or Alembic
    assert {line: mods for line, mods in found.items() if mods != ["sqlalchemy"]} == {"<cli>": []}


def test_every_entry_of_the_tree_is_the_command_it_names() -> None:
    for words in every_command():
        group: click.Group = scheduler
        for word in words[:-1]:
            sub = group.get_command(click.Context(group), word)
            assert isinstance(sub, click.Group)
            group = sub
        assert isinstance(group, SchedulerGroup)
        entry = group.lazy[words[-1]]
        assert isinstance(entry, Lazy)
        assert "\n" not in entry.summary and len(entry.summary) <= 60, words
        command = group.get_command(click.Context(group), words[-1])
        assert command is not None and command.name == words[-1], words
        assert command.get_short_help_str() == entry.summary


def _best(argv: list[str], tries: int = 5) -> float:
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=60)
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.mark.parametrize("words", [["--help"], ["scheduler", "task", "list", "--help"]])
def test_help_answers_within_a_few_bare_interpreter_starts(words: list[str]) -> None:
    # a ratio to the interpreter's own start measured in the same run (the
    # best of 5 each): about 5x and 8x on an idle machine; 35x before
    # commands were loaded on first use
    swh = str(Path(sys.executable).with_name("swh"))
    bare = _best([sys.executable, "-c", "pass"])
    took = _best([swh, *words])
    assert took / bare < 16, f"swh {' '.join(words)}: {took:.3f}s against {bare:.3f}s bare"


def test_rpc_serve_spells_the_connection_bounds_of_the_server() -> None:
    """``rpc-serve``'s defaults are the server's (spelled in the command so
    that its help loads no web framework)."""
    from swh_like_scheduler.api.serving import Bounds
    from swh_like_scheduler.cli import api

    assert (Bounds.header_timeout, Bounds.body_timeout) == (api.HEADER_TIMEOUT, api.BODY_TIMEOUT)
    assert (Bounds.body_deadline, Bounds.body_min_rate) == (api.BODY_DEADLINE, api.BODY_MIN_RATE)
    assert (
        Bounds.keep_alive_timeout,
        Bounds.max_connections,
    ) == (api.KEEP_ALIVE_TIMEOUT, api.MAX_CONNECTIONS)


def test_rpc_serve_spells_the_health_and_console_defaults() -> None:
    from swh_like_scheduler.api import ApiSettings
    from swh_like_scheduler.cli import api
    from swh_like_scheduler.console import session

    settings = ApiSettings()
    assert (settings.health_stale_after, settings.clock_bound) == (
        api.HEALTH_STALE_AFTER,
        api.CLOCK_BOUND,
    )
    assert (settings.console_idle, session.IDLE, session.LIFETIME) == (
        api.CONSOLE_IDLE,
        api.CONSOLE_IDLE,
        api.CONSOLE_LIFETIME,
    )
