"""``python -m benchmarks [scenario ...] [--quick] [--repeat R] [--out FILE]``
(and ``python -m benchmarks report``: see :mod:`benchmarks.results`).

Starts PostgreSQL / Redis on loopback when they are not up (reuses running
ones; RabbitMQ is used when it is up), runs each scenario ``R`` times and
prints JSON lines: one per measurement (median, min, max, unit, ratios against
the baseline measured in the same run), then one summary line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from .common import DEFAULT_AMQP, DEFAULT_POSTGRES, DEFAULT_REDIS, Context, ensure_services, log
from .results import RESULTS, report, stamp

#: scenario name -> its module under ``benchmarks`` (in the order they run): the
#: folder is the room of ``swh_like_scheduler`` it measures (``whole``: the
#: whole path, ``peers``: other projects beside ours), the file is named after the scenario
SCENARIOS = {
    "dispatch": "dispatch.dispatch",
    "claim": "store.claim",
    "index": "index.index",
    "backlog": "store.backlog",
    "runners": "runner.runners",
    "listener": "listener.listener",
    "peers": "peers.peers",
    "end-to-end": "whole.end_to_end",
    "peers-e2e": "peers.peers_e2e",
    "writes": "whole.writes",
    "worker-start": "worker.start",
    "idle": "runner.idle",
    "api": "api.api",
    "console": "console.console",
    "health": "health.health",
    "topup": "runner.topup",
    "simulate": "simulator.simulate",
    "simscale": "simulator.simscale",
    "simweek": "simulator.simweek",
    "forecast": "simulator.forecastbench",
    "bulk": "store.bulk",
    "visits": "visits.visits",
    "visits-send": "recurrent.visits_send",
    "cli": "cli.cli",
    "upgrade": "store.upgrade",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "scenarios", nargs="*", metavar="scenario", help=f"any of {', '.join(SCENARIOS)} (all)"
    )
    parser.add_argument("--quick", action="store_true", help="smallest sizes only (minutes)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    parser.add_argument("--out", help="also append the JSON lines to this file")
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help=f"append the measurement lines, stamped, to this file (default {RESULTS})",
    )
    parser.add_argument(
        "--no-record", action="store_true", help="do not append to the results file (a trial)"
    )
    parser.add_argument(
        "--postgres", default=os.environ.get("SWH_BENCH_POSTGRES_URL", DEFAULT_POSTGRES)
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("SWH_BENCH_REDIS_URL", DEFAULT_REDIS),
        help="Redis URL, or 'private' to start a private redis-server",
    )
    parser.add_argument("--amqp", default=os.environ.get("SWH_BENCH_AMQP_URL", DEFAULT_AMQP))
    options = parser.parse_args(argv)
    unknown = [s for s in options.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    return options


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["report"]:
        return report(args[1:])
    options = parse_args(args)
    chosen = options.scenarios or list(SCENARIOS)
    postgres, redis_url, amqp = ensure_services(options.postgres, options.redis, options.amqp)
    out = open(options.out, "a") if options.out else None  # noqa: SIM115
    results = None if options.no_record else open(options.results, "a")  # noqa: SIM115
    ctx = Context(
        options.quick,
        options.repeat,
        postgres,
        redis_url,
        amqp,
        out=out,
        results=results,
        run=stamp(options.quick),
    )
    started = time.perf_counter()
    load_before = os.getloadavg()
    seconds: dict[str, float] = {}
    failed: dict[str, str] = {}
    try:
        for name in chosen:
            log(f"== {name}")
            begin = time.perf_counter()
            try:
                module = importlib.import_module(f".{SCENARIOS[name]}", __package__)
                module.run(ctx)
            except Exception as exc:
                traceback.print_exc()
                failed[name] = f"{type(exc).__name__}: {exc}"
                ctx.emit({"scenario": name, "error": failed[name]})
            seconds[name] = round(time.perf_counter() - begin, 1)
        ctx.emit(
            {
                "summary": True,
                "date": datetime.now(tz=UTC).isoformat(timespec="seconds"),
                "quick": options.quick,
                "repeat": options.repeat,
                "scenarios": chosen,
                "ratios": ctx.ratios,
                "failed": failed,
                "seconds": seconds,
                "total_seconds": round(time.perf_counter() - started, 1),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                },
                "brokers": {"redis": redis_url, "rabbitmq": amqp},
            }
        )
    finally:
        for file in (out, results):
            if file is not None:
                file.close()
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
