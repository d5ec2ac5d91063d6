"""Where the CPU goes during a measurement: seconds of CPU by part.

On a machine whose cores are shared by the database, the broker, the worker
and our own processes, a rate tells how fast, not why: every CPU second one
part spends is taken from the others. :class:`CpuMeter` reads, before and
after a timed interval, the CPU time (user + system) of

* ``runner``: the thread of this process that runs the runner passes (the
  thread that made the meter, unless told otherwise);
* ``listener``: the rest of this process (the listener and its write
  lanes, or the event receiver of a plain ``apply_async`` run);
* ``worker``: a ``celery worker`` process and its children (prefork pool);
* ``postgres``, ``rabbitmq``, ``redis``: every process of those servers on
  this machine (by process name);

``softirq``, the kernel's interrupt work (the loopback network's packets
mostly: no process is charged for it), and the machine's busy time (all
CPUs, everything but idle and iowait), of which ``other`` is what none of
the parts above spent. Processes that end
inside the interval are not counted (their time is lost to ``other``); the
parts measured here all live through it. :attr:`CpuMeter.others` names the
processes that spent most of ``other``.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psutil

#: process names of each server (psutil's ``name()``)
SERVERS: dict[str, tuple[str, ...]] = {
    "postgres": ("postgres",),
    "rabbitmq": ("beam.smp", "erl_child_setup", "epmd", "inet_gethost"),
    "redis": ("redis-server",),
}


def _busy(times: Any) -> float:
    """Busy seconds of the machine in ``psutil.cpu_times()``: all but idle."""
    idle = times.idle + getattr(times, "iowait", 0.0)
    return float(sum(times) - idle)


def _process_seconds(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0
    return float(times.user + times.system)


def _tree(pids: Iterable[int]) -> set[int]:
    """``pids`` and all their descendants (those still running)."""
    members: set[int] = set()
    for pid in pids:
        try:
            root = psutil.Process(pid)
            members.update([pid, *(p.pid for p in root.children(recursive=True))])
        except psutil.NoSuchProcess:
            continue
    return members


def _every_process() -> dict[int, tuple[str, float]]:
    """Every process of this machine: its name and CPU seconds, by pid."""
    seen: dict[int, tuple[str, float]] = {}
    for process in psutil.process_iter(["name"]):
        seen[process.pid] = (process.info.get("name") or "?", _process_seconds(process))
    return seen


def _server_of(name: str) -> str | None:
    return next((server for server, names in SERVERS.items() if name in names), None)


@dataclass
class CpuMeter:
    """CPU seconds by part over one interval (module doc): :meth:`start`,
    then :meth:`stop`, then :meth:`per` for the figures per unit of work."""

    worker_pids: Iterable[int] = ()
    runner_thread: int = field(default_factory=threading.get_native_id)
    _before: dict[str, float] = field(default_factory=dict)
    _every: dict[int, tuple[str, float]] = field(default_factory=dict)
    spent: dict[str, float] = field(default_factory=dict)
    #: the processes outside the parts that spent the most (seconds, by name)
    others: dict[str, float] = field(default_factory=dict)
    #: the processes that ended inside the interval (their seconds are lost)
    ended_names: list[str] = field(default_factory=list)

    def _read(self) -> tuple[dict[str, float], dict[int, tuple[str, float]]]:
        own = psutil.Process()
        runner = sum(
            t.user_time + t.system_time for t in own.threads() if t.id == self.runner_thread
        )
        # the process's own total also holds the threads that ended (lanes)
        figures = {"runner": runner, "listener": _process_seconds(own) - runner}
        every = _every_process()
        figures["worker"] = sum(every[p][1] for p in _tree(self.worker_pids) if p in every)
        machine = psutil.cpu_times()
        # the kernel's network and interrupt work: no process is charged for it
        figures["softirq"] = float(machine.softirq + machine.irq)
        figures["busy"] = _busy(machine)
        return figures, every

    def start(self) -> None:
        self._before, self._every = self._read()

    def stop(self) -> dict[str, float]:
        after, every = self._read()
        spent = {k: max(0.0, after[k] - self._before.get(k, 0.0)) for k in after}
        # servers: each process's own growth (a process that ended inside the
        # interval took its seconds with it: they fall to ``other``)
        mine = {os.getpid(), *_tree(self.worker_pids)}
        others: dict[str, float] = {}
        for server in SERVERS:
            spent[server] = 0.0
        for pid, (name, seconds) in every.items():
            grown = max(0.0, seconds - self._every.get(pid, (name, 0.0))[1])
            server = _server_of(name)
            if server is not None:
                spent[server] += grown
            elif pid not in mine:
                others[name] = others.get(name, 0.0) + grown
        parts = sum(v for k, v in spent.items() if k != "busy")
        spent["other"] = max(0.0, spent["busy"] - parts)
        self.spent = spent
        ranked = sorted(others.items(), key=lambda item: -item[1])
        self.others = {name: round(seconds, 3) for name, seconds in ranked[:5] if seconds > 0}
        self.ended_names = sorted(
            {
                f"{name} ({seconds:.2f} s before)"
                for pid, (name, seconds) in self._every.items()
                if pid not in every
            }
        )
        return spent

    def per(self, count: int, scale: float = 1000.0) -> dict[str, float]:
        """What :meth:`stop` measured, per unit of work (ms by default)."""
        return {k: round(v * scale / count, 3) for k, v in self.spent.items()}


def median_parts(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median of each part over several intervals."""
    keys = samples[0].keys() if samples else ()
    return {k: round(statistics.median(s.get(k, 0.0) for s in samples), 3) for k in keys}
