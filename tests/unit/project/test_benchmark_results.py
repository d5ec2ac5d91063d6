"""The benchmarks' results file and the README table written from it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks import results


def line(date: str, commit: str, median: float, tasks: int = 2000, **ratios: float) -> str:
    record: dict[str, Any] = {
        "scenario": "end-to-end",
        "measurement": "ours",
        "broker": "rabbitmq",
        "tasks": tasks,
        "unit": "tasks/s",
        "median": median,
        "min": median,
        "max": median,
        "samples": [median],
        "ratios": ratios,
        "stamp": {"date": date, "commit": commit, "quick": True, "loadavg": [1.5, 1, 1]},
    }
    return json.dumps(record)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    found = tmp_path / "results.jsonl"
    found.write_text(
        "\n".join(
            [
                line("2026-11-20T10:00:00+00:00", "aaa1111", 400.0, **{"ours/apply_async": 0.3}),
                json.dumps({"scenario": "end-to-end", "note": True, "why": "skipped"}),
                line("2026-11-26T10:00:00+00:00", "bbb2222", 600.0, **{"ours/apply_async": 0.45}),
                line("2026-11-21T10:00:00+00:00", "ccc3333", 900.0, tasks=5000),
                "",
            ]
        )
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# Methods\n\nkept\n\n{results.BEGIN}\nold figures\n{results.END}\n\ntail\n")
    return found, readme


def test_the_newest_line_of_each_measurement_and_size_is_shown(files: tuple[Path, Path]) -> None:
    found, _ = files
    records = list(results.read(found))
    assert len(records) == 3  # the note is not a measurement
    newest = results.latest(records)
    assert sorted(r["median"] for r in newest.values()) == [600.0, 900.0]
    block = results.table(records)
    assert "`bbb2222`" in block and "`ccc3333`" in block and "`aaa1111` |" not in block
    assert "ours/apply_async 0.45" in block
    # the history keeps both values of the ratio, oldest first
    assert "0.3 (2026-11-20, `aaa1111`); 0.45 (2026-11-26, `bbb2222`)" in block


def test_report_rewrites_only_between_the_markers_and_check_sees_a_stale_readme(
    files: tuple[Path, Path],
) -> None:
    found, readme = files
    args = ["--results", str(found), "--readme", str(readme)]
    assert results.report([*args, "--check"]) == 1
    assert results.report(args) == 0
    text = readme.read_text()
    assert text.startswith("# Methods\n\nkept\n\n") and text.endswith(f"{results.END}\n\ntail\n")
    assert "old figures" not in text and "| end-to-end | ours |" in text
    assert results.report([*args, "--check"]) == 0


def test_a_line_without_a_median_shows_what_follows_its_unit() -> None:
    record = {
        "scenario": "api",
        "measurement": "reads_http",
        "tasks": 100_000,
        "clients": 8,
        "longest_s": 0.25,  # measured, though written before the unit
        "unit": "ms",
        "p50": 18.52,
        "p99": 44.66,
        "ratios": {},
        "stamp": {"date": "2026-11-26T03:07:35+00:00", "commit": "a", "loadavg": [1, 1, 1]},
    }
    assert results.identity(record) == ("api", "reads_http", "clients=8, tasks=100,000")
    assert results.value_text(record) == "p50 18.5, p99 44.7 ms"
    later = {**record, "p50": 20.0, "stamp": {**record["stamp"], "date": "2026-11-27T00:00:00"}}
    assert list(results.latest([record, later]).values()) == [later]


def test_a_broken_results_line_is_named_by_its_number(tmp_path: Path) -> None:
    found = tmp_path / "results.jsonl"
    found.write_text(line("2026-11-20T10:00:00+00:00", "a", 1.0) + "\n{not json\n")
    with pytest.raises(SystemExit, match=r"results.jsonl:2: not a JSON line"):
        list(results.read(found))


def test_a_readme_without_markers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no block between"):
        results.rewrite("# nothing here\n", "block")


def test_every_line_carries_the_load_average_when_written() -> None:
    run = results.stamp(quick=True)
    record = results.stamped({"scenario": "x", "measurement": "y"}, run)
    assert record["stamp"]["commit"] and record["stamp"]["quick"] is True
    assert len(record["stamp"]["loadavg"]) == 3
