"""``swh scheduler lister …`` and ``origin …`` through click's runner, on
SQLite and PostgreSQL: files checked whole before anything is written,
bad lines named by number, statuses applied once, metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore


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
    assert result.exit_code == 2, (result.output, result.stderr, result.exception)
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in result.output, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def lines(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def origin_rows(count: int, **fields: Any) -> list[dict[str, Any]]:
    return [
        {
            "lister_name": "gitlab",
            "lister_instance_name": "framagit",
            "url": f"https://framagit.org/group/p{n:04d}",
            "visit_type": "git",
            "last_update": "2026-11-20T10:00:00Z" if n % 2 else None,
            "extra_loader_arguments": {},
            "enabled": True,
            "is_fork": False,
            **fields,
        }
        for n in range(count)
    ]


@pytest.fixture
def load_git(run) -> None:  # type: ignore[no-untyped-def]
    ok(run("task-type", "add", "load-git", "swh.loader.git.tasks.UpdateGitRepository"))


def listed(db_url: str) -> int:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        return len(store.get_listed_origins(enabled=None, limit=10_000).origins)
    finally:
        store.close()


def test_record_creates_the_lister_when_asked_and_is_idempotent(  # type: ignore[no-untyped-def]
    run, load_git, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "origins.jsonl"
    path.write_text(lines(origin_rows(1500)))  # two batches
    first = json.loads(ok(run("origin", "record", str(path), "--create-lister", "--json")))
    assert first["recorded"] == 1500 and len(first["listers"]) == 1
    again = json.loads(ok(run("origin", "record", "-", "--json", input=path.read_text())))
    # the second time the lister exists: no flag needed
    assert again["listers"] == first["listers"] and listed(db_url) == 1500
    [lister] = json.loads(ok(run("lister", "list", "--json")))
    assert (lister["name"], lister["instance_name"]) == ("gitlab", "framagit")
    assert "gitlab" in ok(run("lister", "add", "gitlab", "--instance", "framagit"))
    assert len(json.loads(ok(run("lister", "list", "--json")))) == 1


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        ({"visit_type": "svn"}, ("line 3", "visit_type", "load-svn")),
        ({"url": "framagit.org/x"}, ("line 3", "url", "not a URL")),
        ({"last_update": "2026-11-20T10:00:00"}, ("line 3", "last_update", "no zone")),
        ({"lister_name": None}, ("line 3", "lister_name")),
        ({"enabled": "yes"}, ("line 3", "enabled")),
        ({"colour": "red"}, ("line 3", "colour", "is not a field")),
    ],
)
def test_one_bad_line_refuses_the_whole_file(  # type: ignore[no-untyped-def]
    run, load_git, db_url: str, change: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    rows = origin_rows(4)
    rows[2] = {**rows[2], **change}
    refused(run("origin", "record", "--create-lister", "-", input=lines(rows) + "\n"), *fragments)
    assert listed(db_url) == 0
    assert json.loads(ok(run("lister", "list", "--json"))) == []  # no lister made either
    refused(run("origin", "record", "-", input='{"url": \n'), "line 1", "not valid JSON")


def test_visit_statuses_then_stats_and_metrics(  # type: ignore[no-untyped-def]
    run, load_git, tmp_path: Path
) -> None:
    ok(run("origin", "record", "--create-lister", "-", input=lines(origin_rows(10))))
    statuses = [
        {
            "origin": f"https://framagit.org/group/p{n:04d}",
            "visit_type": "git",
            "date": "2026-11-10T10:00:00+00:00",
            "status": "full" if n < 6 else "not_found",
            "snapshot": f"{n:040x}" if n < 6 else None,
        }
        for n in range(8)
    ]
    statuses.append({**statuses[0], "status": "ongoing", "date": "2026-11-11T00:00:00Z"})
    text = lines(statuses)
    assert json.loads(ok(run("origin", "record-visit-status", "-", "--json", input=text))) == {
        "changed": 8,
        "ignored": 1,
    }
    again = json.loads(ok(run("origin", "record-visit-status", "-", "--json", input=text)))
    assert again == {"changed": 0, "ignored": 9}
    stats = json.loads(
        ok(run("origin", "visit-stats", "https://framagit.org/group/p0006", "git", "--json"))
    )
    assert stats["last_visit_status"] == "not_found" and stats["last_successful"] is None
    [metrics] = json.loads(ok(run("origin", "update-metrics", "--json")))
    # p0006 and p0007 (not found) were never visited successfully, as p0008 and p0009
    assert metrics["origins_known"] == 10 and metrics["origins_never_visited"] == 4
    # p0001, p0003, p0005: changed on the forge after their visit
    assert metrics["origins_with_pending_changes"] == 3
    assert json.loads(ok(run("origin", "metrics", "--json"))) == [metrics]
    # the table: p0008 and p0009 were never tried (no visit ended at all)
    header, row = ok(run("origin", "metrics")).splitlines()
    assert header.split()[2:6] == ["known", "enabled", "never", "untried"]
    assert row.split()[2:6] == ["10", "10", "4", "2"]
    bad = lines([{**statuses[0], "snapshot": "zz"}])
    refused(run("origin", "record-visit-status", "-", input=bad), "line 1", "snapshot")
    missing = run("origin", "visit-stats", "https://framagit.org/none", "git")
    assert missing.exit_code == 2 and "no visit" in missing.stderr


def test_schedule_recurrent_refuses_an_unknown_visit_type_and_a_bad_mix(  # type: ignore[no-untyped-def]
    run, load_git, db_url: str, tmp_path: Path
) -> None:
    refused(
        run("schedule-recurrent", "--once", "--visit-type", "svn"),
        "visit-type",
        "load-svn",
    )
    config = tmp_path / "config.toml"
    config.write_text(f'db_url = "{db_url}"\n[visits.policies.git]\nnewest_first = 3\n')
    result = CliRunner().invoke(
        swh, ["scheduler", "--config-file", str(config), "schedule-recurrent", "--once"]
    )
    refused(result, "visits.policies.git.newest_first", "not a policy")


def test_peek_and_grab_next_in_the_policys_order(run, load_git) -> None:  # type: ignore[no-untyped-def]
    ok(run("origin", "record", "--create-lister", "-", input=lines(origin_rows(6))))
    peeked = json.loads(
        ok(run("origin", "peek-next", "git", "3", "--policy", "never_visited_oldest_update_first",
               "--json"))
    )  # fmt: skip
    # the dated ones (odd numbers), all of one date: by url
    assert [o["url"].rsplit("/", 1)[1] for o in peeked] == ["p0001", "p0003", "p0005"]
    assert all(o["visit_type"] == "git" for o in peeked)
    grabbed = run("origin", "grab-next", "git", "2", "--policy", "oldest_scheduled_first")
    ok(grabbed)
    assert "2 origins marked scheduled" in grabbed.stderr
    assert grabbed.stdout.split() == [
        "https://framagit.org/group/p0000",
        "https://framagit.org/group/p0001",
    ]
    again = json.loads(
        ok(run("origin", "peek-next", "git", "10", "--policy", "oldest_scheduled_first", "--json"))
    )
    assert len(again) == 4  # the two grabbed are cooling down
    refused(run("origin", "peek-next", "git", "1", "--policy", "newest"), "policy", "newest")


def test_record_refuses_a_lister_that_is_not_registered(  # type: ignore[no-untyped-def]
    run, load_git, db_url: str
) -> None:
    """Issue 57: a mistyped lister name made a new lister, silently."""
    text = lines(origin_rows(3))
    refused(
        run("origin", "record", "-", input=text),
        "line 1: lister_name: unknown lister 'gitlab' (instance 'framagit').",
        "No lister is registered yet.",
        "`swh scheduler lister add gitlab --instance framagit`",
        "--create-lister",
    )
    assert listed(db_url) == 0 and json.loads(ok(run("lister", "list", "--json"))) == []
    ok(run("lister", "add", "gitlab", "--instance", "framagit"))
    ok(run("lister", "add", "cgit"))
    assert json.loads(ok(run("origin", "record", "-", "--json", input=text)))["recorded"] == 3
    # the mistyped name on line 2: named, with the close one and the registered ones
    rows = origin_rows(3)
    rows[1] = {**rows[1], "lister_name": "gitlba"}
    rows[2] = {**rows[2], "lister_name": "gogs", "lister_instance_name": None}
    message = refused(run("origin", "record", "-", input=lines(rows)))
    assert message == (
        "error: line 2: lister_name: unknown lister 'gitlba' (instance 'framagit') "
        "(and 1 more unknown). Did you mean 'gitlab' (instance 'framagit')? "
        "Registered: 'cgit', 'gitlab' (instance 'framagit'). Create it with "
        "`swh scheduler lister add gitlba --instance framagit`, or record with --create-lister."
    )
    assert listed(db_url) == 3 and len(json.loads(ok(run("lister", "list", "--json")))) == 2
    made = json.loads(
        ok(run("origin", "record", "--create-lister", "-", "--json", input=lines(rows)))
    )
    assert len(made["listers"]) == 3
    assert len(json.loads(ok(run("lister", "list", "--json")))) == 4


def test_a_lister_id_of_no_lister_is_refused(run, load_git) -> None:  # type: ignore[no-untyped-def]
    """A mistyped --lister-id answered as a lister with nothing would."""
    ok(run("origin", "record", "--create-lister", "-", input=lines(origin_rows(2))))
    [lister] = json.loads(ok(run("lister", "list", "--json")))
    for command in (
        ("origin", "metrics"),
        ("origin", "update-metrics"),
        ("origin", "peek-next", "git", "3", "--policy", "oldest_scheduled_first"),
        ("origin", "grab-next", "git", "3", "--policy", "oldest_scheduled_first"),
    ):
        refused(
            run(*command, "--lister-id", "nosuch"),
            "lister-id: no lister with id 'nosuch'.",
            f"Registered: gitlab framagit: {lister['id']}.",
        )
        ok(run(*command, "--lister-id", lister["id"]))
