"""The fault suite's tables, written from what a run recorded.

A run of the fault suite with ``SWH_FAULTS_TABLE=FILE`` writes every
scenario's row as JSON. This script turns such a file into the Markdown
tables of ``tests/faults/README.md``: each block between
``<!-- fault-table FILE -->`` and ``<!-- /fault-table -->`` there is
rewritten from ``tests/faults/runs/FILE``. Nobody types a figure of those
tables; a unit test checks that each block is what this script makes of its
file.

    CI=true SWH_FAULTS=full SWH_FAULTS_TABLE=tests/faults/runs/full.json \\
        .venv/bin/pytest -n 0 -p no:randomly tests/faults -k "not test_soak"
    .venv/bin/python tests/faults/report.py            # rewrites the README's blocks
    .venv/bin/python tests/faults/report.py --check    # exit 1 if a block is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RUNS = HERE / "runs"
BLOCK = re.compile(
    r"(<!-- fault-table (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /fault-table -->)", re.S
)
#: a column's heading, where its key alone would not say it
HEADINGS = {
    "recovery_seconds": "recovery s",
    "overlap_s": "overlap s",
    "wrong_outcomes": "runs recorded failed",
    "good_runs": "good runs",
}


def heading(key: str) -> str:
    return HEADINGS.get(key, key.replace("_", " "))


#: figures that are names, not quantities (no thousands separator)
NAMES = {"seed"}
#: a row with more figures than this is shown as a column (the soak's)
WIDE = 10


def cell(value: Any, key: str = "") -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value) if key in NAMES else f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if value % 1 else f"{value:,.1f}"
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{name} {cell(item)}" for name, item in value.items())
    if isinstance(value, list):
        return ", ".join(cell(item) for item in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A row's figures with each nested table's spelled ``outer: inner``."""
    flat: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict) and value:
            flat.update({f"{key}: {inner}": item for inner, item in value.items()})
        else:
            flat[key] = value
    return flat


def _table(keys: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(heading(key) for key in keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(row[key], key) for key in keys) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _column_per_row(rows: list[dict[str, Any]]) -> str:
    """Rows of many figures, one column each, a figure per line."""
    flat = [_flat(row) for row in rows]
    keys = list(dict.fromkeys(key for row in flat for key in row if key != "scenario"))
    lines = [
        "| figure | " + " | ".join(cell(row["scenario"]) for row in flat) + " |",
        "|" + "---|" * (len(flat) + 1),
    ]
    lines += [
        f"| {heading(key)} | " + " | ".join(cell(row.get(key), key) for row in flat) + " |"
        for key in keys
    ]
    return "\n".join(lines) + "\n"


def render(rows: list[dict[str, Any]]) -> str:
    """One table per shape of row (the same keys in the same order), in the
    order the run met them, the scenario's name first; a shape of more than
    :data:`WIDE` figures is turned a quarter, a column per row."""
    shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        if not isinstance(row, dict) or "scenario" not in row:
            raise ValueError(f"a row without a scenario: {row!r}")
        keys = ("scenario", *(key for key in row if key != "scenario"))
        shapes.setdefault(keys, []).append(row)
    return "\n".join(
        _column_per_row(members) if len(keys) > WIDE else _table(keys, members)
        for keys, members in shapes.items()
    )


def rewritten(text: str, runs: Path = RUNS) -> str:
    """``text`` with each fault-table block made again from its run file."""

    def block(match: re.Match[str]) -> str:
        rows = json.loads((runs / match["name"]).read_text("utf-8"))
        return match.group(1) + render(rows) + match.group(4)

    return BLOCK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether a block is stale")
    args = parser.parse_args(argv)
    text = README.read_text("utf-8")
    if not BLOCK.search(text):
        print(f"{README}: no fault-table block", file=sys.stderr)
        return 1
    try:
        new = rewritten(text)
    except (OSError, ValueError) as error:
        print(f"{README}: a table's run file cannot be read: {error}", file=sys.stderr)
        return 1
    if args.check:
        if new != text:
            print(f"{README}: a fault table differs from its run file", file=sys.stderr)
            return 1
        return 0
    README.write_text(new, "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
