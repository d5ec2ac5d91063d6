"""The ``swh scheduler`` command line through click's runner, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore, migrations


@pytest.fixture
def run(db_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], input=input)

    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.output


def refused(result: Result, *fragments: str) -> str:
    """The command failed with exit code 2 and one line naming the problem."""
    assert result.exit_code == 2, (result.output, result.stderr)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "Traceback" not in result.output + result.stderr
    for fragment in fragments:
        assert fragment in message
    return message


@pytest.fixture
def registered(run) -> None:  # type: ignore[no-untyped-def]
    assert "sleep (from sleep): created" in ok(run("task-type", "register"))


def count_tasks(db_url: str) -> int:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        return store.count_tasks()
    finally:
        store.close()


def test_task_type_listing_follows_swh_layout(run, registered) -> None:  # type: ignore[no-untyped-def]
    listing = ok(run("task-type", "list")).splitlines()
    assert listing[0] == "Known task types:"
    assert listing[1::2] == ["check-page:", "load-page:", "notify:", "sleep:", "webhook:"]
    assert "  Sleep or burn CPU for a while, failing at a given rate" in listing
    verbose = ok(run("task-type", "list", "-v", "-t", "sleep")).splitlines()
    assert verbose[:4] == [
        "Known task types:",
        "sleep: swh_like_workers.sleep.sleep",
        "  Sleep or burn CPU for a while, failing at a given rate",
        "  queue: swh_like_workers.sleep.sleep",
    ]
    assert "  interval: 1:00:00 [0:01:00, 1 day, 0:00:00]" in verbose
    assert "  backoff_factor: 2.0" in verbose
    assert "  max_queue_length: 10000" in verbose
    assert "  num_retries: None" in verbose
    [data] = json.loads(ok(run("task-type", "list", "--json", "-t", "sleep")))
    assert data["type"] == "sleep" and data["max_queue_length"] == 10000
    assert "already registered" in ok(run("task-type", "register"))


def test_task_type_add(run) -> None:  # type: ignore[no-untyped-def]
    ok(
        run(
            "task-type",
            "add",
            "load-git",
            "loader.git.Update",
            "Update a git origin",
            "-i",
            "64 days",
            "--min-interval",
            "12:00:00",
            "--max-interval",
            "64 days",
            "-f",
            "2",
            "--max-queue-length",
            "5000",
            "--lease",
        )
    )
    verbose = ok(run("task-type", "list", "-v"))
    assert "load-git: loader.git.Update" in verbose
    assert "interval: 64 days, 0:00:00 [12:00:00, 64 days, 0:00:00]" in verbose
    assert "lease: yes" in verbose


def test_bad_input_is_refused_with_a_message_naming_the_field(  # type: ignore[no-untyped-def]
    run, registered, db_url: str, tmp_path: Path
) -> None:
    refused(run("task", "add", "nope", "x"), "type", "unknown task type 'nope'")
    refused(run("task", "add", "sleep", "--interval", "3 dayz"), "interval", "3 dayz")
    refused(run("task", "add", "sleep", "--tz", "Mars/Base", "x"), "tz", "Mars/Base")
    refused(
        run("task", "add", "sleep", "--cron", "61 * * * *", "--cron-max-duration", "1h"),
        "cron",
        "61 * * * *",
    )
    refused(run("task", "add", "sleep", "--kind", "cron"), "cron", "needs one")
    refused(run("task", "add", "sleep", "--kind", "periodic"), "period", "needs one")
    refused(run("task-type", "add", "t2", "x.y", "--max-queue-length", "-5"), "max_queue_length")
    refused(run("task-type", "add", "sleep", "x.y"), "type", "already exists")
    refused(run("task", "add", "sleep", "--blackout", "25:00-01:00", "x"), "blackout_periods")
    refused(
        run("task", "add", "sleep", "--policy", "oneshot", "--next-run", "tomorrow"), "next_run"
    )
    bad = tmp_path / "tasks.csv"
    lines = ["type,args,kwargs"] + [f'sleep,"[{n}]",{{}}' for n in range(1, 6)]
    bad.write_text("\n".join([*lines, 'sleep,"[7",{}', 'sleep,"[8]",{}']) + "\n")
    refused(run("task", "schedule", "-q", str(bad)), "line 7", "args")
    assert count_tasks(db_url) == 0
    types = [t.type for t in SQLAlchemyStore.from_url(db_url).get_task_types()]
    assert types == ["check-page", "load-page", "notify", "sleep", "webhook"]


def test_add_list_and_pending_order(run, registered) -> None:  # type: ignore[no-untyped-def]
    past = (datetime.now(tz=UTC) - timedelta(hours=2)).isoformat()
    out = ok(run("task", "add", "sleep", "https://example.org", "seed=2", "cpu=true"))
    assert out.startswith("Created 1 task\nTimes in UTC\n\nTask 1\n")
    assert "  Type: sleep" in out and "  Policy: recurring" in out
    assert "    'https://example.org'" in out and "    seed: 2" in out
    ok(run("task", "add", "sleep", "late", "--next-run", past, "--priority", "low"))
    ok(run("task", "add", "sleep", "first", "--priority", "high"))
    ok(
        run(
            "task",
            "add",
            "sleep",
            "future",
            "--policy",
            "oneshot",
            "--next-run",
            "2999-01-01T00:00:00Z",
        )
    )
    pending = ok(run("task", "list-pending", "sleep"))
    assert pending.startswith("Found 3 sleep tasks")
    order = [line.split()[1] for line in pending.splitlines() if line.startswith("Task ")]
    assert order == ["3", "1", "2"]
    listed = json.loads(ok(run("task", "list", "--json")))
    assert [t["id"] for t in listed] == [1, 2, 3, 4]
    assert listed[0]["kwargs"] == {"seed": 2, "cpu": True}
    assert json.loads(ok(run("task", "list", "--json", "-p", "oneshot")))[0]["id"] == 4
    assert [
        t["id"] for t in json.loads(ok(run("task", "list", "--json", "-i", "2", "-i", "1")))
    ] == [2, 1]
    page = json.loads(ok(run("task", "list", "--json", "--after-id", "2", "--limit", "1")))
    assert [t["id"] for t in page] == [3]


def test_actions_on_tasks(run, registered) -> None:  # type: ignore[no-untyped-def]
    ok(run("task", "add", "sleep", "a"))
    ok(run("task", "add", "sleep", "b"))
    assert "Task 1: disabled" in ok(run("task", "disable", "1"))
    assert json.loads(ok(run("task", "list", "--json", "-s", "disabled")))[0]["id"] == 1
    assert "Task 1: enabled" in ok(run("task", "enable", "1"))
    assert "Task 2: cancelled (status cancelled)" in ok(run("task", "cancel", "2"))
    respawned = json.loads(
        ok(run("task", "respawn", "2", "--json", "--next-run", "2030-01-01T00:00:00+00:00"))
    )
    assert respawned[0]["status"] == "waiting"
    assert respawned[0]["next_run"] == "2030-01-01T00:00:00+00:00"
    result = run("task", "disable", "99")
    assert result.exit_code == 2 and "no task with id 99" in result.stderr
    assert "Found 0 runs of task 1" in ok(run("task", "runs", "1"))
    assert json.loads(ok(run("task", "runs", "1", "--json"))) == []
    refused(run("task", "runs", "42"), "no task with id 42")


def test_runs_are_listed(run, registered, db_url: str) -> None:  # type: ignore[no-untyped-def]
    ok(run("task", "add", "sleep", "a"))
    store = SQLAlchemyStore.from_url(db_url)
    [claimed] = store.claim_ready_tasks("sleep", now=datetime.now(tz=UTC), limit=5)
    store.close()
    out = ok(run("task", "runs", "1")).splitlines()
    assert out[:2] == ["Found 1 run of task 1", "Times in UTC"]
    assert out[2].split() == [
        "RUN",
        "CELERY",
        "ID",
        "STATUS",
        "SCHEDULED",
        "STARTED",
        "ENDED",
        "WORKER",
        "ERROR",
    ]
    assert claimed.backend_id in out[3] and "scheduled" in out[3]
    [data] = json.loads(ok(run("task", "runs", "1", "--json")))
    assert data["backend_id"] == claimed.backend_id


def test_schedule_csv_and_json_lines(  # type: ignore[no-untyped-def]
    run, registered, db_url: str, tmp_path: Path
) -> None:
    csv_file = tmp_path / "tasks.csv"
    csv_file.write_text(
        "type,args,kwargs,key,period,cron,cron_max_duration,tz\n"
        + "".join(f'sleep,"[{n}]","{{""seed"": {n}}}",k{n},,,,\n' for n in range(2500))
        + "sleep,[],{},p,1 day,,,\n"
        + "sleep,[],{},c,,0 3 * * *,2h,Europe/Paris\n"
    )
    out = ok(run("task", "schedule", str(csv_file), "--batch-size", "1000"))
    assert "Created 2502 tasks (0 already existed)" in out
    again = ok(run("task", "schedule", "-q", str(csv_file)))
    assert "Created 0 tasks (2502 already existed)" in again
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(
        json.dumps({"args": ["x"], "kind": "oneshot", "next_run": "2030-01-01T00:00:00Z"})
        + "\n"
        + "\n"
        + json.dumps({"type": "sleep", "args": ["y"], "interval": "2h"})
        + "\n"
    )
    assert "Created 2 tasks" in ok(run("task", "schedule", "-t", "sleep", str(jsonl)))
    assert count_tasks(db_url) == 2504
    headerless = "sleep,[9999]\n"
    assert "Created 1 task (" in ok(
        run("task", "schedule", "-c", "type,args", "-", input=headerless)
    )


def test_unreachable_database_is_one_line_exit_1() -> None:
    result = CliRunner().invoke(
        swh, ["scheduler", "--db-url", "postgresql://x@127.0.0.1:1/x", "task", "list"]
    )
    assert result.exit_code == 1
    assert "cannot reach the database" in result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_uninitialised_database_says_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    # (a file that does not exist is refused before it is created: test_cli_traps.py)
    (tmp_path / "new.sqlite").touch()
    result = CliRunner().invoke(swh, ["scheduler", "--db-url", url, "task-type", "list"])
    assert result.exit_code == 1
    assert "swh scheduler db init" in result.stderr
    initialised = CliRunner().invoke(swh, ["scheduler", "--db-url", url, "db", "init"])
    assert f"at revision {migrations.head_revision()}" in initialised.output
    listed = CliRunner().invoke(swh, ["scheduler", "--db-url", url, "task-type", "list"])
    assert listed.exit_code == 0 and listed.output == "Known task types:\n"


def test_default_database_is_created_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SWH_SCHEDULER_DB_URL", raising=False)
    result = CliRunner().invoke(swh, ["scheduler", "task-type", "list"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "data" / "swh-like-scheduler" / "scheduler.sqlite").exists()


def test_config_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "from-file.sqlite"
    config = tmp_path / "config.toml"
    config.write_text(f'[scheduler]\ndb_url = "sqlite:///{db}"\n')
    monkeypatch.delenv("SWH_SCHEDULER_DB_URL", raising=False)
    result = CliRunner().invoke(swh, ["scheduler", "-C", str(config), "db", "init"])
    assert result.exit_code == 0 and db.exists()
    other = tmp_path / "from-env.sqlite"
    monkeypatch.setenv("SWH_SCHEDULER_DB_URL", f"sqlite:///{other}")
    CliRunner().invoke(swh, ["scheduler", "-C", str(config), "db", "init"])
    assert other.exists()
    config.write_text('[scheduler]\ndb_uri = "x"\n')
    result = CliRunner().invoke(swh, ["scheduler", "-C", str(config), "task", "list"])
    assert result.exit_code == 2 and "unknown setting 'db_uri'" in result.stderr


def test_arguments_have_a_size_limit(run, registered, db_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """100 kB on the command line, and in the second line of a file: one line
    naming the limit, nothing written; a lower limit from the environment."""
    big = "x" * 100_000
    refused(run("task", "add", "sleep", f"seed={big}"), "arguments:", "max_argument_bytes")
    rows = tmp_path / "tasks.jsonl"
    rows.write_text(
        json.dumps({"args": [1]}) + "\n" + json.dumps({"args": [big]}) + "\n",
        encoding="utf-8",
    )
    refused(run("task", "schedule", "-q", "-t", "sleep", str(rows)), "line 2: arguments:")
    assert count_tasks(db_url) == 0
    small = CliRunner(env={"SWH_SCHEDULER_MAX_ARGUMENT_BYTES": "40"}).invoke(
        swh, ["scheduler", "--db-url", db_url, "task", "add", "sleep", "seed=" + "y" * 50]
    )
    refused(small, "more than the limit of 40")
    ok(run("task", "add", "sleep", "seed=fits"))
    assert count_tasks(db_url) == 1


def test_a_type_without_description_lists_as_its_name(run, registered) -> None:  # type: ignore[no-untyped-def]
    ok(run("task-type", "add", "bare", "x.bare"))
    listing = ok(run("task-type", "list")).splitlines()
    assert "bare" in listing and "bare:" not in listing
    assert "" not in listing  # no empty description line
    verbose = ok(run("task-type", "list", "-v", "-t", "bare")).splitlines()
    assert verbose[1] == "bare: x.bare" and verbose[2].startswith("  queue:")


def test_pause_and_resume_a_task_type(run, registered, db_url: str) -> None:  # type: ignore[no-untyped-def]
    said = ok(run("task-type", "pause", "sleep")).splitlines()
    assert len(said) == 1 and said[0].startswith("Task type sleep paused at "), said
    instant = said[0].removeprefix("Task type sleep paused at ")
    again = ok(run("task-type", "pause", "sleep")).strip()
    assert again == f"Task type sleep was already paused since {instant}"  # the first instant
    listing = ok(run("task-type", "list")).splitlines()
    sleep = listing.index("sleep:")
    assert listing[sleep + 2] == f"  PAUSED since {instant}"
    assert not any("PAUSED" in line for line in listing[: sleep + 2])  # only sleep is paused
    verbose = ok(run("task-type", "list", "-v", "-t", "sleep", "-t", "notify")).splitlines()
    assert f"  paused: {instant}" in verbose and "  paused: no" in verbose
    [data] = json.loads(ok(run("task-type", "list", "--json", "-t", "sleep")))
    paused_at = datetime.fromisoformat(data["paused_at"])
    assert paused_at.replace(microsecond=0) == datetime.fromisoformat(instant)
    resumed = ok(run("task-type", "resume", "sleep")).strip()
    assert resumed == f"Task type sleep resumed (it was paused since {instant})"
    assert ok(run("task-type", "resume", "sleep")).strip() == "Task type sleep was not paused"
    assert "PAUSED" not in ok(run("task-type", "list"))
    store = SQLAlchemyStore.from_url(db_url)
    try:
        found = store.get_task_type("sleep")
        assert found is not None and found.paused_at is None
    finally:
        store.close()
    refused(run("task-type", "pause", "nope"), "unknown task type 'nope'")
    refused(run("task-type", "resume", "nope"), "unknown task type 'nope'")


def test_cron_without_a_duration_bound_gets_its_shortest_gap(run, registered) -> None:  # type: ignore[no-untyped-def]
    """``--cron`` alone: the firing has until the next one (the shortest gap
    over a year), or the max_allowed_duration when one is given."""
    daily = json.loads(ok(run("task", "add", "sleep", "seed=1", "--cron", "0 3 * * *", "--json")))
    quarter = json.loads(
        ok(run("task", "add", "sleep", "seed=2", "--cron", "*/15 * * * *", "--json"))
    )
    bounded = json.loads(
        ok(
            run(
                "task", "add", "sleep", "seed=3", "--cron", "0 3 * * *",
                "--max-allowed-duration", "2h", "--json",
            )
        )
    )  # fmt: skip
    durations = [t[0]["cron_max_duration"] for t in (daily, quarter, bounded)]
    assert durations == [86400.0, 900.0, 7200.0], durations


def test_a_oneshot_key_at_another_instant_is_refused(run, registered) -> None:  # type: ignore[no-untyped-def]
    at = "2030-01-01T10:00:00+00:00"
    add = ("task", "add", "notify", "queue=q", "payload={}", "--policy", "oneshot", "--key", "r1")
    assert ok(run(*add, "--next-run", at)).startswith("Created 1 task\n")
    assert ok(run(*add, "--next-run", at)).startswith("Task 1 already existed\n")
    refused(run(*add, "--next-run", "2030-01-02T10:00:00Z"), "key: key 'r1' already names task 1")
    # without an instant ("now"), the command stays idempotent
    ok(run(*add[:-2], "--key", "r2"))
    assert ok(run(*add[:-2], "--key", "r2")).startswith("Task 2 already existed\n")


def test_jobs_by_key(run, registered, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    body = {
        "key": "training-invitations-42",
        "schedules": ["2030-12-24T14:00:00Z", "2030-12-25T14:00:00Z"],
        "callback": {"type": "rabbitmq", "data": {"queue": "q", "payload": {"id": "42"}}},
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(body))
    out = ok(run("job", "put", "training-invitations-42", "--file", str(path)))
    assert out.startswith("Added 2, removed 0, kept 0 instant(s)\nJob training-invitations-42\n")
    out = ok(
        run(
            "job",
            "put",
            "training-invitations-42",
            "--at",
            "2030-12-25T14:00:00Z",
            "--queue",
            "q",
            "--payload",
            '{"id": "42"}',
        )
    )
    assert out.startswith("Added 0, removed 1, kept 1 instant(s)")
    shown = json.loads(ok(run("job", "get", "training-invitations-42", "--json")))
    assert [i["state"] for i in shown["instants"]] == ["cancelled", "pending"]
    assert ok(run("job", "delete", "training-invitations-42")).startswith("Cancelled 1 instant(s)")
    refused(run("job", "get", "nope"), "no job with key 'nope'")
    refused(run("job", "put", "k", "--at", "2030-01-01T00:00:00Z"), "callback: give --queue")
    refused(
        run("job", "put", "k", "--at", "someday", "--queue", "q"), "schedules.0: 'someday' is not"
    )
    refused(run("job", "put", "k", "--queue", "q"), "schedules: holds no instant")
