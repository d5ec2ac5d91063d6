"""The results file and ``python -m benchmarks report``.

Every run of the harness appends its measurement lines to a results file
(JSON lines, :data:`RESULTS` unless told otherwise), each stamped with the
date, the commit, the machine and its load average. ``report`` reads that
file and writes the README's "Latest figures" table (the newest measurement
of each scenario, measurement and size, with its ratios, date and commit) and
a short history of every ratio, between two markers in the README. The
history of the figures lives in that file and in git, not in prose.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.jsonl"
README = HERE / "README.md"
BEGIN = "<!-- latest-figures: written by `python -m benchmarks report`; edits here are lost -->"
END = "<!-- /latest-figures -->"

#: fields of a line that are its value or its stamp, not what names the
#: measurement (``detail``: a breakdown the line carries, not shown in the table)
_VALUE_FIELDS = frozenset(
    {
        *("unit", "median", "min", "max", "samples", "ratios", "stamp"),
        *("scenario", "measurement", "detail"),
    }
)
#: how many past values of a ratio the history shows (newest last)
HISTORY = 6


def commit() -> str:
    """The short commit of the checkout, ``+dirty`` if it has uncommitted changes."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=HERE, capture_output=True, text=True, timeout=10, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{head}+dirty" if dirty else head


def stamp(quick: bool) -> dict[str, Any]:
    """What every line of one run carries: when, which code, on what, how loaded."""
    return {
        "date": datetime.now(tz=UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "quick": quick,
        "machine": {
            "host": socket.gethostname(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
    }


def stamped(record: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the run's stamp and the load average now."""
    load = [round(x, 2) for x in os.getloadavg()]
    return {**record, "stamp": {**run, "loadavg": load}}


def read(path: Path) -> Iterator[dict[str, Any]]:
    """The measurement lines of a results file (notes, errors and summaries left out)."""
    if not path.exists():
        return
    with path.open() as lines:
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{number}: not a JSON line ({exc.msg})") from None
            if isinstance(record, dict) and "measurement" in record and "stamp" in record:
                yield record


def _parameters(record: dict[str, Any]) -> list[str]:
    """The fields that say what was measured: those a line gives before its
    ``unit`` (every scenario writes its parameters, then the unit, then the
    values); all but the known value fields when a line has no unit."""
    names = list(record)
    if "unit" in names:
        names = names[: names.index("unit")]
    return sorted(k for k in names if k not in _VALUE_FIELDS and _is_parameter(record[k]))


def _is_parameter(value: Any) -> bool:
    """A size, a name or a switch; a float or a text with blanks given among
    the parameters is something measured (a duration, a plan)."""
    if isinstance(value, bool | int):
        return True
    return isinstance(value, str) and " " not in value


def identity(record: dict[str, Any]) -> tuple[str, str, str]:
    """(scenario, measurement, parameters): what two lines must share to be
    two measurements of the same thing."""
    params = ", ".join(f"{k}={_short(record[k])}" for k in _parameters(record))
    return str(record["scenario"]), str(record["measurement"]), params


def value_text(record: dict[str, Any]) -> str:
    """The measured value: the median, else the fields after the unit
    (``p50 18.5, p99 44.7 ms``, ``passes 6``)."""
    unit = record.get("unit", "")
    if "median" in record:
        return f"{_figure(record['median'])} {unit}".strip()
    names = list(record)
    after = names[names.index("unit") + 1 :] if "unit" in names else names
    shown = [
        f"{k} {_figure(record[k])}"
        for k in after
        if k not in _VALUE_FIELDS and isinstance(record[k], int | float)
    ]
    return f"{', '.join(shown)} {unit}".strip()


def _measured_aside(record: dict[str, Any]) -> str:
    """Numbers measured but written among the parameters (``longest_claim_s``)."""
    names = list(record)
    before = names[: names.index("unit")] if "unit" in names else []
    return ", ".join(
        f"{k} {_figure(record[k])}"
        for k in before
        if k not in _VALUE_FIELDS and isinstance(record[k], float)
    )


def _short(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1000:
        return f"{value // 1_000_000}M" if value % 1_000_000 == 0 else f"{value:,}"
    return str(value)


def latest(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The newest line of each measurement (lines are appended in time order;
    a full-size line and a quick one of the same size are the same measurement)."""
    newest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in records:
        key = identity(record)
        if key not in newest or record["stamp"]["date"] >= newest[key]["stamp"]["date"]:
            newest[key] = record
    return newest


def histories(records: Iterable[dict[str, Any]]) -> dict[str, list[tuple[str, str, float]]]:
    """``scenario measurement [params] ratio`` → [(date, commit, value)], oldest first."""
    found: dict[str, list[tuple[str, str, float]]] = {}
    for record in records:
        scenario, measurement, params = identity(record)
        for name, value in (record.get("ratios") or {}).items():
            if value is None:
                continue
            label = (
                f"{scenario} {measurement} [{params}] {name}"
                if params
                else (f"{scenario} {measurement} {name}")
            )
            stamp_ = record["stamp"]
            found.setdefault(label, []).append((stamp_["date"][:10], stamp_["commit"], value))
    return found


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def table(records: list[dict[str, Any]]) -> str:
    """The markdown of the "Latest figures" block."""
    newest = latest(records)
    lines = [
        BEGIN,
        "",
        f"{len(newest)} measurements, the newest of each (from `{RESULTS.name}`, "
        f"{len(records)} lines). Ratios compare with a baseline measured in the same run.",
        "",
        "| scenario | measurement | parameters | value (median) | ratios | date | commit | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(newest):
        record = newest[key]
        run = record["stamp"]
        ratios = ", ".join(
            f"{name} {_figure(value)}" for name, value in (record.get("ratios") or {}).items()
        )
        size = "quick" if run.get("quick") else "full"
        load = run.get("loadavg") or ["?"]
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | "
            f"{'; '.join(filter(None, [value_text(record), _measured_aside(record)]))} "
            f"| {ratios} | {run['date'][:16].replace('T', ' ')} ({size}) | `{run['commit']}` "
            f"| {load[0]} |"
        )
    lines += ["", "### History of each ratio (newest last)", ""]
    for label, points in sorted(histories(records).items()):
        shown = "; ".join(f"{v:,.3g} ({d}, `{c}`)" for d, c, v in points[-HISTORY:])
        lines.append(f"- {label}: {shown}")
    lines += ["", END]
    return "\n".join(lines)


def rewrite(readme: str, block: str) -> str:
    """``readme`` with its block between the markers replaced by ``block``."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"the README has no block between {BEGIN!r} and {END!r}")
    return readme[:start] + block + readme[end + len(END) :]


def report(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks report",
        description="Write the README's latest figures from the results file.",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"(default {RESULTS})")
    parser.add_argument("--readme", type=Path, default=README, help=f"(default {README})")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the README is not up to date"
    )
    options = parser.parse_args(argv)
    records = list(read(options.results))
    text = options.readme.read_text()
    updated = rewrite(text, table(records))
    if options.check:
        if updated != text:
            print(f"{options.readme} is not up to date: run python -m benchmarks report")
            return 1
        return 0
    options.readme.write_text(updated)
    print(f"{options.readme}: {len(latest(records))} measurements from {len(records)} lines")
    return 0
