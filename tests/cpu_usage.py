"""Where the suite's CPU goes, test by test (opt-in: ``SWH_TEST_CPU=FILE``).

The suite is bound by the machine's two cores, not by waiting: a test that
sleeps beside two busy xdist workers costs little, one that burns CPU (in
this process, in the workers and daemons it starts, in the servers it
drives) costs its share. With ``SWH_TEST_CPU=FILE``, each test appends a
JSON line to FILE: its wall time, the CPU of this process (all its
threads), of the children it waited for (``celery worker``, daemons,
``chromium``), of the shared servers (PostgreSQL, RabbitMQ, Redis, private
ones included: every process of those names), and of the whole machine,
each over the test's setup, call and teardown. The servers' and machine's
figures include what other xdist workers did meanwhile: rank by the sum of
the first two, read the others as context.

``python tests/cpu_usage.py FILE`` prints the tests and files that cost the
most."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SERVERS = ("postgres", "beam.smp", "redis-server", "pgbouncer")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine_busy() -> float:
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / _TICK


def _servers() -> float:
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        if name.startswith(SERVERS):
            fields = text[text.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICK


def _sample() -> tuple[float, float, float, float, float]:
    return time.monotonic(), time.process_time(), _children(), _servers(), _machine_busy()


class CpuRecorder:
    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        before = _sample()
        yield
        after = _sample()
        wall, own, children, servers, busy = (b - a for a, b in zip(before, after, strict=True))
        line = {
            "test": item.nodeid,
            "wall": round(wall, 3),
            "own": round(own, 3),
            "children": round(children, 3),
            "servers": round(servers, 3),
            "machine": round(busy, 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        }
        with self.path.open("a") as out:
            out.write(json.dumps(line) + "\n")


def register(config: pytest.Config) -> None:
    path = os.environ.get("SWH_TEST_CPU")
    if path:
        config.pluginmanager.register(CpuRecorder(Path(path)), "swh-test-cpu")


def report(path: str, top: int = 40) -> None:
    lines: list[dict[str, Any]] = [json.loads(x) for x in Path(path).read_text().splitlines()]
    for line in lines:
        line["cpu"] = line["own"] + line["children"]
    by_file: Counter[str] = Counter()
    for line in lines:
        by_file[line["test"].split("::")[0]] += line["cpu"]
    total = sum(line["cpu"] for line in lines)
    print(f"{len(lines)} tests, {total:.0f} CPU-s in the tests' processes and children")
    print("\nfiles")
    for name, cpu in by_file.most_common(top):
        print(f"{cpu:8.1f}  {name}")
    print("\ntests (cpu, wall, servers meanwhile)")
    for line in sorted(lines, key=lambda x: -x["cpu"])[:top]:
        print(f"{line['cpu']:8.1f} {line['wall']:7.1f} {line['servers']:7.1f}  {line['test']}")


if __name__ == "__main__":
    report(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
