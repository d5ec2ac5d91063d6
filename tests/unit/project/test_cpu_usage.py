"""The steps of docs/development.md that show where the suite's CPU goes:
a run with ``SWH_TEST_CPU=FILE`` records a line per test, and
``tests/cpu_usage.py FILE`` ranks them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
SOME_TESTS = "tests/unit/store/test_pooler_url.py"


def test_a_run_records_each_test_and_the_report_ranks_them(tmp_path: Path) -> None:
    record = tmp_path / "cpu.jsonl"
    env = {**os.environ, "SWH_TEST_CPU": str(record)}
    run = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", SOME_TESTS]
    done = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert lines and all(line["test"].startswith(SOME_TESTS + "::") for line in lines)
    for line in lines:
        assert set(line) >= {"wall", "own", "children", "servers", "machine"}
        assert line["wall"] >= 0 and line["own"] >= 0
    report = subprocess.run(
        [sys.executable, "tests/cpu_usage.py", str(record), "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert report.startswith(f"{len(lines)} tests, ")
    assert SOME_TESTS in report
