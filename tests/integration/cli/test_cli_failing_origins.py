"""``[visits] disable_after_failures`` (issue 59): the failures in a row that
disable an origin are a setting of the configuration file, read by every
command that opens the store (here ``origin record-visit-status``), 3 by
default, 0 for never; a bad value is refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.visits.model import ListedOrigin

URL = "https://forge.example/dead"


@pytest.fixture
def store(db_url: str) -> SQLAlchemyStore:
    found = SQLAlchemyStore.from_url(db_url)
    found.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    lister = found.get_or_create_lister("gitlab")
    found.record_listed_origins([ListedOrigin(lister_id=lister.id, url=URL, visit_type="git")])
    return found


def record_failures(config: Path, tmp_path: Path, hours: range) -> Result:
    path = tmp_path / "statuses.jsonl"
    lines = [
        {"origin": URL, "visit_type": "git", "date": f"2026-11-10T{h:02d}:00:00+00:00"}
        | {"status": "failed"}
        for h in hours
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    command = ["scheduler", "--config-file", str(config), "origin", "record-visit-status"]
    return CliRunner().invoke(swh, [*command, str(path)])


def enabled(store: SQLAlchemyStore) -> bool:
    [origin] = store.get_listed_origins(url=URL, enabled=None).origins
    return origin.enabled


@pytest.mark.parametrize(
    ("setting", "failures", "disabled"),
    [
        ("", 2, False),
        ("", 3, True),
        ("disable_after_failures = 1", 1, True),
        ("disable_after_failures = 0", 5, False),
    ],
    ids=["default-2", "default-3", "one", "never"],
)
def test_the_failures_that_disable_an_origin_are_a_setting(
    store: SQLAlchemyStore,
    db_url: str,
    tmp_path: Path,
    setting: str,
    failures: int,
    disabled: bool,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'db_url = "{db_url}"\n[visits]\n{setting}\n')
    try:
        done = record_failures(config, tmp_path, range(1, failures + 1))
        assert done.exit_code == 0, (done.output, done.stderr, done.exception)
        assert enabled(store) is not disabled
    finally:
        store.close()


@pytest.mark.parametrize("value", ["-1", "true", '"3"', "2.5"])
def test_a_bad_setting_is_refused_naming_it(
    store: SQLAlchemyStore, db_url: str, tmp_path: Path, value: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'db_url = "{db_url}"\n[visits]\ndisable_after_failures = {value}\n')
    try:
        done = record_failures(config, tmp_path, range(1, 4))
        assert done.exit_code == 2, (done.output, done.exception)
        assert "visits.disable_after_failures" in done.stderr
        assert "Traceback" not in done.output
        assert enabled(store)  # nothing applied
    finally:
        store.close()
