"""``origin record`` and ``record-visit-status`` check what they write
(issue 60), on SQLite and PostgreSQL: a file of 1,500 lines whose line
1,001 breaks one of the write's rules (storable text, JSON numbers, depth,
the scheduler's own keys, url schemes) or cannot be read (not UTF-8, too
deep for the reader, too long) is refused naming line 1001, exit 2, no
traceback, and nothing is written: before, the first batch of 1,000
origins was written, then the write failed (or a traceback came with no
line number)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.store import SQLAlchemyStore

LINES = 1500
BAD = 1001


@pytest.fixture
def run(db_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str, input: bytes | str | None = None) -> Result:
        return runner.invoke(swh, ["scheduler", "--db-url", db_url, *args], input=input)

    ok(invoke("task-type", "add", "load-git", "swh.loader.git.tasks.UpdateGitRepository"))
    return invoke


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.output, result.stderr, result.exception)
    return result.output


def refused(result: Result, *fragments: str) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    message = result.stderr.strip()
    assert "Traceback" not in result.output and len(message.splitlines()) == 1, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def row(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "lister_name": "gitlab",
        "url": f"https://gitlab.com/group/p{n:05d}",
        "visit_type": "git",
        "extra_loader_arguments": {"branch": "main"},
        **fields,
    }


def file_with(tmp_path: Path, bad: bytes, count: int = LINES) -> Path:
    """``count`` good lines but line :data:`BAD`, which is ``bad``."""
    path = tmp_path / "origins.jsonl"
    with path.open("wb") as out:
        for n in range(1, count + 1):
            out.write(bad if n == BAD else json.dumps(row(n)).encode())
            out.write(b"\n")
    return path


def counts(db_url: str) -> tuple[int, int]:
    """``(listed origins, listers)`` in the database."""
    store = SQLAlchemyStore.from_url(db_url)
    try:
        origins = store.get_listed_origins(enabled=None, limit=10_000).origins
        return len(origins), len(store.get_listers())
    finally:
        store.close()


def _line(**fields: Any) -> bytes:
    return json.dumps(row(BAD, **fields)).encode()


def _raw(extra: str) -> bytes:
    """Line 1,001 with ``extra`` written as the loader arguments' JSON text."""
    return (
        b'{"lister_name": "gitlab", "url": "https://gitlab.com/x", "visit_type": "git", '
        b'"extra_loader_arguments": ' + extra.encode() + b"}"
    )


def _nested(depth: int) -> str:
    return '{"a": ' + "[" * depth + "]" * depth + "}"


BAD_LINES = [
    pytest.param(
        _line(url="https://gitlab.com/\ud800"), ("url", "lone surrogate"), id="surrogate-url"
    ),
    pytest.param(
        _raw('{"a": "\\ud800"}'), ("extra_loader_arguments", "lone surrogate"), id="surrogate-arg"
    ),
    pytest.param(_raw('{"a": "x\\u0000"}'), ("extra_loader_arguments", "NUL"), id="nul"),
    pytest.param(_raw('{"a": NaN}'), ("NaN is not a JSON number",), id="nan"),
    pytest.param(_raw('{"a": -Infinity}'), ("-Infinity is not a JSON number",), id="infinity"),
    pytest.param(_raw('{"a": 1e999}'), ("1e999", "infinity"), id="1e999"),
    pytest.param(_raw('{"a": ' + "7" * 5000 + "}"), ("5,000 digits",), id="5000-digits"),
    pytest.param(_raw('{"a": 9223372036854775808}'), ("outside signed 64 bits",), id="2**63"),
    pytest.param(_raw(_nested(100_000)), ("too deeply",), id="100000-deep"),
    pytest.param(
        _raw(_nested(40)), ("extra_loader_arguments", "more than 32 levels"), id="40-deep"
    ),
    pytest.param(
        b'{"lister_name": "gitlab", "url": "https://gitlab.com/\xff\xfe"}',
        ("not UTF-8", "0xff"),
        id="not-utf8",
    ),
    pytest.param(
        _line(extra_loader_arguments={"url": "file:///etc/shadow"}),
        ("extra_loader_arguments.url", "set by the scheduler"),
        id="url-key",
    ),
    pytest.param(_line(url="file:///etc/shadow"), ("url", "'file://' is not a scheme"), id="file"),
    pytest.param(
        _line(url="javascript://%0aalert(1)"), ("url", "'javascript://'"), id="javascript"
    ),
    pytest.param(
        _line(forked_from_url="data://text/html,x"),
        ("forked_from_url", "'data://'"),
        id="data-fork",
    ),
]


@pytest.mark.parametrize(("bad", "fragments"), BAD_LINES)
def test_a_bad_line_1001_refuses_the_file_and_writes_nothing(  # type: ignore[no-untyped-def]
    run, db_url: str, tmp_path: Path, bad: bytes, fragments: tuple[str, ...]
) -> None:
    path = file_with(tmp_path, bad)
    refused(run("origin", "record", "--create-lister", str(path)), "line 1001", *fragments)
    assert counts(db_url) == (0, 0)
    # the same bytes on stdin (spooled, then read twice)
    refused(run("origin", "record", "--create-lister", "-", input=path.read_bytes()), "line 1001")
    assert counts(db_url) == (0, 0)


def test_an_oversize_line_is_refused_by_number(run, db_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from swh_like_scheduler.visits.lines import MAX_LINE_BYTES

    huge = _line(url="https://gitlab.com/" + "a" * MAX_LINE_BYTES)
    path = file_with(tmp_path, huge)
    refused(
        run("origin", "record", "--create-lister", str(path)),
        "line 1001",
        f"longer than {MAX_LINE_BYTES:,} bytes",
    )
    assert counts(db_url) == (0, 0)


def test_the_good_file_is_written_whole(run, db_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The control: the same file with a good line 1,001 is recorded, a
    line one byte under the limit included."""
    path = file_with(tmp_path, _line(url="svn+ssh://svn.example.org/repo"))
    summary = json.loads(ok(run("origin", "record", "--create-lister", str(path), "--json")))
    assert summary["recorded"] == LINES and counts(db_url) == (LINES, 1)


def test_the_schemes_are_a_setting(run, db_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config.toml"
    config.write_text(f'db_url = "{db_url}"\n[visits]\norigin_schemes = ["https", "GIT"]\n')
    with_config = ["scheduler", "--config-file", str(config), "origin", "record", "--create-lister"]
    runner = CliRunner()
    path = file_with(tmp_path, _line(url="svn://svn.example.org/repo"))
    refused(runner.invoke(swh, [*with_config, str(path)]), "line 1001", "'svn://'", "git, https")
    path = file_with(tmp_path, _line(url="git://git.example.org/repo"))
    ok(runner.invoke(swh, [*with_config, str(path)]))
    assert counts(db_url) == (LINES, 1)
    config.write_text(f'db_url = "{db_url}"\n[visits]\norigin_schemes = "https"\n')
    refused(runner.invoke(swh, [*with_config, str(path)]), "visits.origin_schemes", "not a list")
    config.write_text(f'db_url = "{db_url}"\n[visits]\norigin_schemes = ["https", "a b"]\n')
    refused(runner.invoke(swh, [*with_config, str(path)]), "visits.origin_schemes", "'a b'")


def _status(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "origin": f"https://gitlab.com/group/p{n:05d}",
        "visit_type": "git",
        "date": "2026-11-10T10:00:00+00:00",
        "status": "full",
        "snapshot": f"{n:040x}",
        **fields,
    }


@pytest.mark.parametrize(
    ("bad", "fragments"),
    [
        (
            json.dumps(_status(BAD, origin="https://gitlab.com/\ud800")).encode(),
            ("origin", "lone surrogate"),
        ),
        (json.dumps(_status(BAD)).encode().replace(b'"full"', b"NaN"), ("NaN",)),
        (b'{"origin": "https://gitlab.com/\xc3(", "visit_type": "git"}', ("not UTF-8",)),
        (b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ("too deeply",)),
        (b'{"visit": ' + b"1" * 5000 + b"}", ("5,000 digits",)),
    ],
    ids=["surrogate", "nan", "not-utf8", "deep", "5000-digits"],
)
def test_a_bad_status_line_1001_applies_nothing(  # type: ignore[no-untyped-def]
    run, db_url: str, tmp_path: Path, bad: bytes, fragments: tuple[str, ...]
) -> None:
    ok(run("origin", "record", "--create-lister", str(file_with(tmp_path, _line()))))
    path = tmp_path / "statuses.jsonl"
    path.write_bytes(
        b"".join(
            (bad if n == BAD else json.dumps(_status(n)).encode()) + b"\n"
            for n in range(1, LINES + 1)
        )
    )
    refused(run("origin", "record-visit-status", str(path)), "line 1001", *fragments)
    store = SQLAlchemyStore.from_url(db_url)
    try:
        keys = [(_status(n)["origin"], "git") for n in (1, 1000)]
        visited = [s for s in store.origin_visit_stats_get(keys) if s.last_visit is not None]
    finally:
        store.close()
    assert visited == []  # the first batch was not applied
    # the control: with line 1,001 right, every status is applied
    path.write_bytes(b"".join(json.dumps(_status(n)).encode() + b"\n" for n in range(1, LINES + 1)))
    applied = json.loads(ok(run("origin", "record-visit-status", str(path), "--json")))
    assert applied == {"changed": LINES, "ignored": 0}
