"""The command line through a server: ``--db-url http://…``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from api_server import READER, WRITER, serving
from click.testing import CliRunner, Result

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app


@pytest.fixture
def server(sqlite_url: str) -> Iterator[tuple[str, SQLAlchemyStore]]:
    store = SQLAlchemyStore.from_url(sqlite_url)
    settings = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw,{READER}:ro"))
    with serving(create_app(store, settings)) as url:
        yield url, store
    store.close()


def cli(url: str, token: str, *args: str) -> Result:
    env = {"SWH_SCHEDULER_DB_URL": url, "SWH_SCHEDULER_API_TOKEN": token}
    return CliRunner().invoke(swh, ["scheduler", *args], env=env)


def test_task_and_job_commands_work_through_a_server(
    server: tuple[str, SQLAlchemyStore],
) -> None:
    url, store = server
    done = cli(url, WRITER, "task-type", "add", "notify", "swh_like_workers.notify.notify")
    assert done.exit_code == 0, done.output
    # checked where the command runs: notify's payload is required
    missing = cli(url, WRITER, "task", "add", "notify", "queue=q", "--interval", "1h")
    assert missing.exit_code == 2 and "missing a required argument: 'payload'" in missing.stderr
    done = cli(
        url,
        WRITER,
        "task",
        "add",
        "notify",
        "queue=q",
        "payload={}",
        "--interval",
        "1h",
        "--key",
        "k",
    )
    assert done.exit_code == 0 and done.output.startswith("Created 1 task"), done.output
    listed = cli(url, READER, "task", "list", "--json")
    assert [t["key"] for t in json.loads(listed.output)] == ["k"]
    job = cli(url, WRITER, "job", "put", "j", "--at", "2030-01-01T10:00:00Z", "--queue", "q")
    assert job.exit_code == 0, job.output
    assert store.count_tasks() == 2  # written in the server's database
    status = cli(url, READER, "task", "status", "--json")
    assert json.loads(status.output)["counts"]["notify"]["OK"] == 2
    # the one-line list counts what its limit cut through the server's store
    first = cli(url, READER, "task", "list", "--limit", "1").output.splitlines()
    assert first[0] == "Showing 1 of 2 tasks (use --limit, or --after-id 1 for the next)"
    assert first[1] == "Times in UTC" and len(first) == 5


def test_a_server_refusal_is_one_line(server: tuple[str, SQLAlchemyStore]) -> None:
    url, _ = server
    refused = cli(url, READER, "task-type", "add", "t", "b")
    assert refused.exit_code == 1
    assert refused.stderr.strip().endswith("this token may only read (set SWH_SCHEDULER_API_TOKEN)")
    unknown = cli(url, WRITER, "task", "add", "nope")
    assert unknown.exit_code == 2 and "nope" in unknown.stderr
    daemon = cli(url, WRITER, "start-runner", "--once")
    assert daemon.exit_code == 2
    assert "start-runner needs the database itself, not a server" in daemon.stderr
    down = cli("http://127.0.0.1:9", WRITER, "task", "list")
    assert down.exit_code == 1 and "ConnectError" in down.stderr


def test_pause_and_resume_through_a_server(server: tuple[str, SQLAlchemyStore]) -> None:
    url, store = server
    assert cli(url, WRITER, "task-type", "add", "notify", "x.notify").exit_code == 0
    refused = cli(url, READER, "task-type", "pause", "notify")
    assert refused.exit_code == 1 and "may only read" in refused.stderr
    paused = cli(url, WRITER, "task-type", "pause", "notify")
    assert paused.exit_code == 0 and paused.output.startswith("Task type notify paused at ")
    found = store.get_task_type("notify")
    assert found is not None and found.paused_at is not None  # in the server's database
    assert "PAUSED since" in cli(url, READER, "task-type", "list").output
    resumed = cli(url, WRITER, "task-type", "resume", "notify")
    assert resumed.exit_code == 0 and "resumed" in resumed.output, resumed.output
    unknown = cli(url, WRITER, "task-type", "pause", "nope")
    assert unknown.exit_code == 2 and "unknown task type 'nope'" in unknown.stderr
