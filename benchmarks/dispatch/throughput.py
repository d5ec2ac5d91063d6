"""Dispatch throughput: one runner pass over N ready tasks, beside a plain
``apply_async`` loop to the same broker (and, on Redis, the raw LPUSH
ceiling), measured in the same run. A thin wrapper over the harness's
``dispatch`` scenario (``python -m benchmarks dispatch`` runs all sizes).

    python benchmarks/dispatch/throughput.py --tasks 100000 --broker redis://127.0.0.1:6379/9
    python benchmarks/dispatch/throughput.py --tasks 100000 \
        --broker amqp://guest:guest@127.0.0.1:5672//

Prints one JSON line per repetition and a summary line (median, min, max, ratios).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import DEFAULT_POSTGRES, Context, ensure_services
from benchmarks.dispatch.dispatch import measure


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument(
        "--baseline-tasks",
        type=int,
        help="ignored: the apply_async loop sends the same N messages as the runner",
    )
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    amqp = options.broker.startswith(("amqp", "pyamqp"))
    postgres, redis_url, _ = ensure_services(
        options.postgres, "redis://127.0.0.1:6379/9" if amqp else options.broker, options.broker
    )
    broker = options.broker if amqp else redis_url
    ctx = Context(False, options.repeat, postgres, redis_url, broker if amqp else None)
    rates = measure(ctx, broker, options.tasks)
    for attempt, runner in enumerate(rates["runner"]):
        line = {
            "scenario": "dispatch",
            "attempt": attempt,
            "broker": broker,
            "tasks": options.tasks,
            "runner_tasks_per_s": round(runner),
            "apply_async_per_s": round(rates["apply_async"][attempt]),
            "ratio": round(runner / rates["apply_async"][attempt], 2),
        }
        for ceiling in ("raw_lpush", "raw_amqp"):
            if ceiling in rates:
                line[f"{ceiling}_per_s"] = round(rates[ceiling][attempt])
        print(json.dumps(line), flush=True)
    summary = {"scenario": "dispatch", "summary": True, "broker": broker, "tasks": options.tasks}
    for name, values in rates.items():
        summary[name.replace("runner", "runner_tasks") + "_per_s"] = {
            "median": round(statistics.median(values)),
            "min": round(min(values)),
            "max": round(max(values)),
        }
    medians = {name: statistics.median(values) for name, values in rates.items()}
    summary["ratio_median"] = round(medians["runner"] / medians["apply_async"], 2)
    for ceiling in ("raw_lpush", "raw_amqp"):
        if ceiling in medians:
            summary[f"ratio_vs_{ceiling}"] = round(medians["runner"] / medians[ceiling], 3)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
