"""cli: how long ``swh`` takes to answer, as an operator runs it.

Wall seconds of whole processes (the best of ``--repeat`` x 5 tries each,
the way a shell runs them):

- start: ``swh --help`` and ``swh scheduler task list --help`` against a
  bare interpreter (``python -c pass``) measured in the same run;
- commands on PostgreSQL with 20,000 tasks (2,000 with ``--quick``), half of
  them due: ``task-type list``, ``task list --limit 20``, ``task explain``,
  ``task runs``, ``task list-pending`` and ``task status`` (which reads every
  live task: issue 43), each against ``task-type list`` (the cost of starting
  and opening the database) in the same run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ..common import (
    Context,
    bench_type,
    fill_tasks,
    log,
    ratio,
    scratch_store,
    unique_queue,
    utcnow,
)

SWH = str(Path(sys.executable).with_name("swh"))
TRIES = 5
TASKS = 20_000
QUICK_TASKS = 2_000


def best(argv: list[str], tries: int, env: dict[str, str] | None = None) -> float:
    """The shortest of ``tries`` runs of ``argv``, in seconds (it must succeed)."""
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - started)
    return min(times)


def _start(ctx: Context) -> None:
    commands = {
        "bare": [sys.executable, "-c", "pass"],
        "help": [SWH, "--help"],
        "task_list_help": [SWH, "scheduler", "task", "list", "--help"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(ctx.repeat):
        for name, argv in commands.items():
            samples[name].append(best(argv, TRIES))
    bare = min(samples["bare"])
    log(
        f"cli start: bare {bare * 1000:.0f} ms",
        {k: round(min(v) * 1000) for k, v in samples.items()},
    )
    for name in ("help", "task_list_help"):
        ctx.measurement(
            "cli",
            name,
            "ms",
            [s * 1000 for s in samples[name]],
            ratios={"vs_bare_python": ratio(min(samples[name]), bare)},
            digits=1,
        )


def _commands(ctx: Context) -> None:
    size = QUICK_TASKS if ctx.quick else TASKS
    name = f"swh_bench_cli_{os.getpid()}"
    with scratch_store(ctx.postgres, name) as store:
        bench_type(store, unique_queue("cli"), None)
        fill_tasks(store, size, now=utcnow(), due=size // 2)
        url = store.engine.url.render_as_string(hide_password=False)
        env = {**os.environ, "SWH_SCHEDULER_DB_URL": url}
        middle = size // 2
        commands = {
            "task_type_list": ["task-type", "list"],
            "task_list": ["task", "list", "--limit", "20"],
            "task_explain": ["task", "explain", str(middle)],
            "task_runs": ["task", "runs", str(middle)],
            "task_list_pending": ["task", "list-pending", "bench", "--limit", "20"],
            "task_status": ["task", "status"],
        }
        samples: dict[str, list[float]] = {key: [] for key in commands}
        for _ in range(ctx.repeat):
            for key, args in commands.items():
                tries = 1 if key == "task_status" else TRIES
                samples[key].append(best([SWH, "scheduler", *args], tries, env))
        base = min(samples["task_type_list"])
        log(f"cli on {size:,} tasks:", {k: round(min(v), 3) for k, v in samples.items()})
        for key in commands:
            ctx.measurement(
                "cli",
                key,
                "s",
                samples[key],
                ratios={"vs_task_type_list": ratio(min(samples[key]), base)},
                tasks=size,
            )


def run(ctx: Context) -> None:
    _start(ctx)
    _commands(ctx)
