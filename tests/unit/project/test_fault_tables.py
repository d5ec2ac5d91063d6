"""The fault suite's tables (``tests/faults/README.md``) are what a run
recorded: each block is made by ``tests/faults/report.py`` from the JSON
file the suite wrote (``SWH_FAULTS_TABLE``), and no figure is typed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
FAULTS = ROOT / "tests" / "faults"


def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fault_report", FAULTS / "report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_block_is_its_run_file_rendered() -> None:
    module = report()
    text = (FAULTS / "README.md").read_text("utf-8")
    names = [match["name"] for match in module.BLOCK.finditer(text)]
    assert names, "the fault suite's README has no generated table"
    for name in names:
        rows = json.loads((FAULTS / "runs" / name).read_text("utf-8"))
        assert rows and all("scenario" in row for row in rows), name
    assert module.rewritten(text) == text, (
        "a fault table differs from its run file: run `python tests/faults/report.py`"
    )


def test_a_changed_figure_is_seen(tmp_path: Path) -> None:
    module = report()
    rows = [
        {"scenario": "a | b", "tasks": 3000, "recovery_seconds": 13.5, "lost": 0},
        {"scenario": "c", "tasks": 400, "recovery_seconds": 24.0, "lost": 0},
        {"scenario": "stall", "tasks": 4, "overlap_s": 0.06},
    ]
    (tmp_path / "run.json").write_text(json.dumps(rows))
    made = module.rewritten(
        "before\n<!-- fault-table run.json -->\nstale\n<!-- /fault-table -->\nafter\n",
        runs=tmp_path,
    )
    assert made == (
        "before\n<!-- fault-table run.json -->\n"
        "| scenario | tasks | recovery s | lost |\n|---|---|---|---|\n"
        "| a \\| b | 3,000 | 13.5 | 0 |\n| c | 400 | 24.0 | 0 |\n\n"
        "| scenario | tasks | overlap s |\n|---|---|---|\n| stall | 4 | 0.06 |\n"
        "<!-- /fault-table -->\nafter\n"
    )
    assert module.rewritten(made, runs=tmp_path) == made
    rows[0]["lost"] = 1
    (tmp_path / "run.json").write_text(json.dumps(rows))
    assert module.rewritten(made, runs=tmp_path) != made
    with pytest.raises(ValueError, match="without a scenario"):
        module.render([{"tasks": 1}])


def test_a_row_of_many_figures_is_a_column() -> None:
    module = report()
    figures = {f"figure {n}": n * 1000 for n in range(module.WIDE)}
    rows = [
        {"scenario": "soak on redis", "seed": 218725289, **figures, "kinds": {"kill9": 2}},
        {"scenario": "soak on rabbitmq", "seed": 5, **figures, "kinds": {"pause": 1}},
    ]
    table = module.render(rows).splitlines()
    assert table[0] == "| figure | soak on redis | soak on rabbitmq |"
    assert "| seed | 218725289 | 5 |" in table  # a name, not a quantity
    assert "| figure 3 | 3,000 | 3,000 |" in table
    assert "| kinds: kill9 | 2 |  |" in table and "| kinds: pause |  | 1 |" in table
