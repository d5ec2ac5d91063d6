"""The command line's human output shows the invisible and reordering
characters of what users wrote (keys, descriptions, worker names, error
texts) as escapes; its JSON output keeps them exactly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus
from swh_like_scheduler.store import SQLAlchemyStore

RLO = "\u202e"
#: shown raw, it reads "invoice-exe.png"
SPOOF = f"invoice-{RLO}gnp.exe"
ESCAPED = "invoice-\\u202egnp.exe"
ARABIC = "\u0645\u0631\u062d\u0628\u0627"


@pytest.fixture
def run(db_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], input=input)

    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.output


@pytest.fixture
def spoof_id(run) -> int:  # type: ignore[no-untyped-def]
    """A one-shot task of key :data:`SPOOF`, of a type whose description
    holds a right-to-left override too."""
    ok(run("task-type", "add", "fetch", "x.fetch", f"Fetch {RLO}a file"))
    oneshot = ("task", "add", "fetch", "--kind", "oneshot", "--no-check-args")
    created = ok(run(*oneshot, "--key", SPOOF, "--json"))
    ok(run(*oneshot, "--key", ARABIC))
    task_id: int = json.loads(created)[0]["id"]
    return task_id


def test_task_list_shows_the_escape_and_its_json_the_key(run, spoof_id: int) -> None:  # type: ignore[no-untyped-def]
    listing = ok(run("task", "list", "-v"))
    assert f"  Key: {ESCAPED}" in listing.splitlines()
    assert f"  Key: {ARABIC}" in listing.splitlines()  # other scripts as they are
    assert RLO not in listing
    table = ok(run("task", "list")).splitlines()
    assert table[3].endswith(f"  {ESCAPED}") and table[4].endswith(f"  {ARABIC}")
    assert RLO not in "".join(table)
    data = json.loads(ok(run("task", "list", "--json")))
    assert [t["key"] for t in data] == [SPOOF, ARABIC]
    pending = ok(run("task", "list-pending", "fetch"))
    assert f"  Key: {ESCAPED}" in pending.splitlines() and RLO not in pending
    assert json.loads(ok(run("task", "list-pending", "fetch", "--json")))[0]["key"] == SPOOF


def test_task_type_list_shows_the_description_escaped(run, spoof_id: int) -> None:  # type: ignore[no-untyped-def]
    listing = ok(run("task-type", "list"))
    assert "  Fetch \\u202ea file" in listing.splitlines() and RLO not in listing
    [data] = json.loads(ok(run("task-type", "list", "--json")))
    assert data["description"] == f"Fetch {RLO}a file"


def test_runs_and_explain_show_a_worker_and_an_error_escaped(  # type: ignore[no-untyped-def]
    run, spoof_id: int, db_url: str
) -> None:
    store = SQLAlchemyStore.from_url(db_url)
    try:
        now = datetime.now(tz=UTC)
        (claimed,) = store.claim_ready_tasks("fetch", now=now, limit=1, among=[spoof_id])
        store.start_task_run(claimed.backend_id, started=now, worker=f"w1{RLO}@node")
        error = "Traceback (most recent call last):\n  File x\nValueError: \x1b[2Jbad\u200bname"
        store.end_task_run(
            claimed.backend_id,
            status=RunStatus.FAILED,
            ended=now + timedelta(seconds=1),
            error=error,
        )
    finally:
        store.close()
    runs = ok(run("task", "runs", str(spoof_id)))
    assert "w1\\u202e@node" in runs
    assert "ValueError: \\x1b[2Jbad\\u200bname" in runs
    assert RLO not in runs and "\x1b" not in runs and "\u200b" not in runs
    # --full keeps the error's lines as lines, each escaped
    full = ok(run("task", "runs", str(spoof_id), "--full")).splitlines()
    assert "      File x" in full and "    ValueError: \\x1b[2Jbad\\u200bname" in full
    [data] = json.loads(ok(run("task", "runs", str(spoof_id), "--json")))
    assert data["worker"] == f"w1{RLO}@node" and data["error"] == error

    explained = ok(run("task", "explain", str(spoof_id)))
    assert "ValueError: \\x1b[2Jbad\\u200bname" in explained
    assert "\x1b" not in explained and "\u200b" not in explained
    answer = json.loads(ok(run("task", "explain", str(spoof_id), "--json")))
    assert answer["last_failure"]["error"] == error


def test_an_error_quoting_input_stays_one_line(run) -> None:  # type: ignore[no-untyped-def]
    body = {
        "schedules": ["2030-01-01T00:00:00Z"],
        "callback": {"type": "rabbitmq", "data": {"queue": "q", f"{RLO}x\nerror: forged": 1}},
    }
    result = run("job", "put", "k1", "--file", "-", input=json.dumps(body))
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: callback.data.\\u202ex\\nerror: forged: is not a rabbitmq callback field\n"
    )
