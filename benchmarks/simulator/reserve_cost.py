"""reserve-cost: what keeping worker slots from long runs costs and saves,
in simulated ERROR-hours, per world, with the rule and without it (the
simulator's ``--keep-slots`` / ``--no-keep-slots``), under the runner's
default order (deadline).

    python -m benchmarks.simulator.reserve_cost [--quick] [--markdown] [--world NAME ...]

The worlds: the shipped ``long-and-short`` (two days at 50 % load: 8
workers), the shipped ``mixed-platform`` as written (10,000 tasks: at
1,000 every type has a single worker, where nothing is kept) over its first
day at 50, 100 and 150 % load, and three small worlds of their own
(:data:`CLIFF`, :data:`SPARSE_PING`, :data:`SHARED_CLIFF`, also the worlds
of ``tests/integration/simulator/test_reserve_worlds.py``, which works
their outcomes out by hand). ``--quick``: the shipped worlds cut down (a fifth of
long-and-short over its first dump wave, 2,000 mixed-platform tasks over
half a day); the small worlds as they are.

Prints one JSON line per world: ERROR-hours in total, of its short groups
and of its long groups (each world says which are which), with and without
the rule, the difference (with minus without: below 0, the rule saves) and
the ratio (with over without), and every group's hours; then a summary
line. ``--markdown`` prints the table of the docs (``docs/simulation.md``,
"What keeping slots costs") on stderr as well. Figures, not timings: the
same worlds and seeds give the same figures on any machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from swh_like_scheduler.domain.model import RUNNER_ORDER
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.workload import Workload, load_workload, parse_workload

#: the pace of the small worlds' daemons (as the shipped long-and-short)
PACE = {"period": "60 s", "min_sleep": "30 s", "listener_delay": "10 s", "sample_every": "10 min"}

#: A wave of runs just under the old 30-minute threshold: twelve nightly
#: jobs of exactly 27 minutes at 02:00 beside sixty hourly pings of 0.1 s,
#: one type, 4 worker slots, from 01:00 to 04:36.
CLIFF: dict[str, Any] = {
    "start": "2026-03-02T01:00:00Z",
    "days": 0.15,
    "seed": 5,
    "runner": PACE,
    "types": {
        "fetch": {
            "workers": 4,
            "max_queue_length": 8,
            "max_allowed_duration": "1 h",
            "num_retries": 0,
            "retry_delay": "2 min",
        }
    },
    "tasks": [
        {
            "name": "nightly jobs",
            "type": "fetch",
            "count": 12,
            "kind": "cron",
            "cron": "0 2 * * *",
            "cron_max_duration": "2 h",
            "expected_duration": "27 min",
            "duration": {"median": "27 min", "sigma": 0},
        },
        {
            "name": "hourly pings",
            "type": "fetch",
            "count": 60,
            "kind": "periodic",
            "period": "1 h",
            "cooldown": "45 min",
            "spread": ["0 s", "45 min"],
            "duration": {"median": "0.1 s", "sigma": 0},
        },
    ],
}

#: One sparse short task beside a long wave: a single hourly ping of 0.1 s
#: (first run at 01:30) and twelve nightly dumps of exactly 2 h 5 min at
#: 02:00, one type, 4 worker slots, from 01:00 to 10:36.
SPARSE_PING: dict[str, Any] = {
    "start": "2026-03-02T01:00:00Z",
    "days": 0.4,
    "seed": 5,
    "runner": PACE,
    "types": {
        "fetch": {
            "workers": 4,
            "max_queue_length": 8,
            "max_allowed_duration": "3 h",
            "num_retries": 0,
            "retry_delay": "2 min",
        }
    },
    "tasks": [
        {
            "name": "nightly dumps",
            "type": "fetch",
            "count": 12,
            "kind": "cron",
            "cron": "0 2 * * *",
            "cron_max_duration": "7 h",
            "expected_duration": "2h05m",
            "duration": {"median": "2h05m", "sigma": 0},
        },
        {
            "name": "hourly ping",
            "type": "fetch",
            "count": 1,
            "kind": "periodic",
            "period": "1 h",
            "cooldown": "45 min",
            "spread": ["30 min", "30 min"],
            "duration": {"median": "0.1 s", "sigma": 0},
        },
    ],
}

#: :data:`CLIFF` on two types that share one Celery queue: the jobs' type
#: (3 worker slots) knows its runs only from its ``max_expected_duration``
#: (28 min: no task says its expected duration), the pings' type has 1 slot.
SHARED_CLIFF: dict[str, Any] = {
    **CLIFF,
    "types": {
        "job": {
            "workers": 3,
            "queue": "shared",
            "max_queue_length": 8,
            "max_expected_duration": "28 min",
            "max_allowed_duration": "1 h",
            "num_retries": 0,
            "retry_delay": "2 min",
        },
        "ping": {
            "workers": 1,
            "queue": "shared",
            "max_queue_length": 8,
            "max_allowed_duration": "5 min",
            "num_retries": 0,
            "retry_delay": "2 min",
        },
    },
    "tasks": [
        {
            **{k: v for k, v in CLIFF["tasks"][0].items() if k != "expected_duration"},
            "type": "job",
        },
        {**CLIFF["tasks"][1], "type": "ping"},
    ],
}


@dataclass(frozen=True)
class World:
    """A world measured: its workload, and which of its groups are short
    (the tasks the rule protects) and which long (those it holds back)."""

    name: str
    workload: Workload
    short: tuple[str, ...]
    long: tuple[str, ...]


#: long-and-short: the flaky sources' runs are 30 s (short), the dumps' 2 h
LONG_AND_SHORT = (("hourly pings", "pages", "flaky sources"), ("nightly dumps",))
#: mixed-platform has no long group as written: "long" here are the groups
#: whose runs are a minute or more (median), which a threshold of a few
#: minutes can hold back; "short" the others
MIXED = (
    ("hourly scrapers", "hourly reports", "webhook callbacks"),
    ("scrapers kept out of office hours", "crawled sites", "nightly clean-ups"),
)


def worlds(quick: bool) -> list[World]:
    """Every world measured, in the order printed."""
    tasks, days = (126, 0.25) if quick else (630, 2.0)
    found = [
        World(
            "long-and-short, 50 %",
            load_workload("long-and-short").with_tasks(tasks).with_days(days).with_load(0.5),
            *LONG_AND_SHORT,
        )
    ]
    tasks, days = (2_000, 0.5) if quick else (10_000, 1.0)
    for load in (0.5, 1.0, 1.5):
        workload = load_workload("mixed-platform").with_tasks(tasks).with_days(days)
        found.append(World(f"mixed-platform, {load * 100:.0f} %", workload.with_load(load), *MIXED))
    found += [
        World("cliff (27-min jobs)", parse_workload(CLIFF), ("hourly pings",), ("nightly jobs",)),
        World("sparse ping", parse_workload(SPARSE_PING), ("hourly ping",), ("nightly dumps",)),
        World(
            "shared-queue cliff",
            parse_workload(SHARED_CLIFF),
            ("hourly pings",),
            ("nightly jobs",),
        ),
    ]
    return found


def _hours(result: dict[str, Any], groups: Sequence[str]) -> float:
    return round(sum(float(result["groups"][g]["error_hours"]) for g in groups), 3)


def _figures(result: dict[str, Any], world: World) -> dict[str, float]:
    return {
        "total": round(float(result["error_hours"]), 3),
        "short": _hours(result, world.short),
        "long": _hours(result, world.long),
    }


def measure(world: World) -> dict[str, Any]:
    """``world`` with and without the rule: its JSON line."""
    runs: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    for label, keep in (("with", True), ("without", False)):
        started = time.perf_counter()
        runs[label] = Simulation(world.workload, RUNNER_ORDER, keep_slots=keep).run()
        seconds[label] = round(time.perf_counter() - started, 1)
        print(f"{world.name} {label} the rule: {seconds[label]} s", file=sys.stderr, flush=True)
    kept, free = _figures(runs["with"], world), _figures(runs["without"], world)
    return {
        "scenario": "reserve-cost",
        "world": world.name,
        "workers": dict(world.workload.workers),
        "short_groups": list(world.short),
        "long_groups": list(world.long),
        "with": kept,
        "without": free,
        "difference": {k: round(kept[k] - free[k], 3) for k in kept},
        "ratio": {k: round(kept[k] / free[k], 3) if free[k] else None for k in kept},
        "groups": {
            name: {label: float(runs[label]["groups"][name]["error_hours"]) for label in runs}
            for name in sorted(runs["with"]["groups"])
        },
        "seconds": seconds,
    }


def _number(value: float, sign: str = "") -> str:
    if value == 0:
        return "0"
    return f"{value:{sign},.1f}".removesuffix(".0")


def markdown(lines: Sequence[dict[str, Any]]) -> str:
    """The docs' table of ``lines``."""
    rows = [
        "| world | slots kept | total | short | long |",
        "|---|---|---|---|---|",
    ]
    for line in lines:
        for label, kept in (("with", "yes"), ("without", "no")):
            figures = line[label]
            rows.append(
                f"| {line['world']} | {kept} | {_number(figures['total'])} | "
                f"{_number(figures['short'])} | {_number(figures['long'])} |"
            )
        change = line["difference"]
        rows.append(
            f"| {line['world']} | difference | {_number(change['total'], '+')} | "
            f"{_number(change['short'], '+')} | {_number(change['long'], '+')} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.simulator.reserve_cost",
        description=(__doc__ or "").splitlines()[0],
    )
    parser.add_argument("--quick", action="store_true", help="the shipped worlds cut down")
    parser.add_argument(
        "--world", action="append", default=[], help="only the worlds whose name starts so"
    )
    parser.add_argument("--markdown", action="store_true", help="the docs' table on stderr too")
    options = parser.parse_args(argv)
    chosen = [
        w
        for w in worlds(options.quick)
        if not options.world or w.name.startswith(tuple(options.world))
    ]
    started = time.perf_counter()
    lines = []
    for world in chosen:
        line = measure(world)
        lines.append(line)
        print(json.dumps(line), flush=True)
    summary = {
        "scenario": "reserve-cost",
        "summary": True,
        "quick": options.quick,
        "order": str(RUNNER_ORDER),
        "difference_total": {line["world"]: line["difference"]["total"] for line in lines},
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(summary), flush=True)
    if options.markdown:
        print(markdown(lines), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
