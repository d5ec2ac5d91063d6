"""What happened to the soak's processes and servers, as it happened.

The soak writes one :class:`Happening` for each signal it sends, each
process it starts or sees exit, each server it stops or starts, on the wall
clock (the probes' notes use the same clock: one machine). :class:`Life`
replays them to answer the checker's questions about a worker's
*incarnation* (the process started under a name, known by its main process
id, which the probe bodies note as their parent): when its pool was stopped
(its process group stopped, SIGSTOP, until SIGCONT), when it died, whether
its clock was moved (a runner started under libfaketime: its spawn says
``faketime +90s``), when the database was down, for everyone or for one
worker only (its connections through a proxy that was frozen: the server
``postgres@work-1`` down, see :func:`cut_name`). Instants are taken on the
safe side: a stop is noted once its signal was sent, a SIGCONT before it is
sent, a kill once sent; a cut once the proxy froze, its end before it thaws.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

INF = float("inf")

#: what a :class:`Happening` says of a process
SPAWN = "spawn"  # started (``pid`` its main process, its group)
KILL = "kill"  # SIGKILL to its group
TERM = "term"  # SIGTERM to its main process (a warm shutdown)
STOP_GROUP = "stop_group"  # SIGSTOP to its group: the main process and the pool
STOP_MAIN = "stop_main"  # SIGSTOP to its main process alone: the pool goes on
CONT = "cont"  # SIGCONT to its group
CONT_MAIN = "cont_main"  # SIGCONT to its main process alone
EXIT = "exit"  # seen gone
#: ... and of a server (``pid`` 0)
DOWN = "down"
UP = "up"
WIPED = "wiped"  # emptied (FLUSHALL) or restarted without persistence

#: a spawn's detail for a process whose clock libfaketime moves: ``faketime +90s``
FAKETIME = "faketime"
#: what joins a worker's name and the suffix of a second process under it
#: (``work-1~twin3``): both reach the database through the worker's proxy
SUFFIX = "~"


def worker_of(name: str) -> str:
    """The worker a process name belongs to (a twin's is its worker's)."""
    return name.split(SUFFIX, 1)[0]


def cut_name(worker: str) -> str:
    """The server, in the journal, that is down while ``worker`` alone is
    cut off from PostgreSQL (its database connections' proxy frozen)."""
    return f"postgres@{worker_of(worker)}"


def skew_of(detail: str) -> float:
    """Seconds a spawn's detail says its clock was moved (0: true time)."""
    found = re.match(rf"{FAKETIME} ([+-]\d+(?:\.\d+)?)s", detail)
    return float(found.group(1)) if found else 0.0


@dataclass(frozen=True)
class Happening:
    t: float
    name: str
    pid: int
    what: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Incarnation:
    """One process started under a name: its stops and its end."""

    name: str
    pid: int
    spawned: float
    #: intervals during which its whole group was stopped
    group_stops: list[tuple[float, float]]
    #: intervals during which its main process was stopped (its group's too)
    main_stops: list[tuple[float, float]]
    killed: float | None = None
    exited: float | None = None
    #: seconds its clock was moved (libfaketime), 0 on true time
    skew: float = 0.0

    @property
    def end(self) -> float:
        """When it was gone for sure (``inf``: alive at the end)."""
        found = [t for t in (self.killed, self.exited) if t is not None]
        return min(found) if found else INF

    def frozen_at(self, t: float) -> tuple[float, float] | None:
        """The group stop that covers instant ``t``, if any."""
        for start, end in self.group_stops:
            if start <= t <= end:
                return start, end
        return None

    def group_stop_after(self, t: float, within: float) -> tuple[float, float] | None:
        """The first group stop that began in ``[t, t + within]``."""
        for start, end in self.group_stops:
            if t <= start <= t + within:
                return start, end
        return None


class Life:
    """The replayed journal (module doc)."""

    def __init__(self, happenings: list[Happening]) -> None:
        self.happenings = sorted(happenings, key=lambda h: h.t)
        self.incarnations: dict[int, Incarnation] = {}
        self.server_down: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.wipes: dict[str, list[float]] = defaultdict(list)
        group_since: dict[int, float] = {}
        main_since: dict[int, float] = {}
        down_since: dict[str, float] = {}
        for h in self.happenings:
            if h.pid == 0:  # a server
                if h.what == DOWN:
                    down_since.setdefault(h.name, h.t)
                elif h.what == UP and h.name in down_since:
                    self.server_down[h.name].append((down_since.pop(h.name), h.t))
                elif h.what == WIPED:
                    self.wipes[h.name].append(h.t)
                continue
            if h.what == SPAWN:
                self.incarnations[h.pid] = Incarnation(
                    h.name, h.pid, h.t, [], [], skew=skew_of(h.detail)
                )
                continue
            life = self.incarnations.get(h.pid)
            if life is None:
                continue
            if h.what == STOP_GROUP:
                group_since.setdefault(h.pid, h.t)
                main_since.setdefault(h.pid, h.t)
            elif h.what == STOP_MAIN:
                main_since.setdefault(h.pid, h.t)
            elif h.what == CONT_MAIN:
                if h.pid in main_since:
                    life.main_stops.append((main_since.pop(h.pid), h.t))
            elif h.what in (CONT, KILL, EXIT):
                if h.pid in group_since:
                    life.group_stops.append((group_since.pop(h.pid), h.t))
                if h.pid in main_since:
                    life.main_stops.append((main_since.pop(h.pid), h.t))
                if h.what == KILL and life.killed is None:
                    life.killed = h.t
                if h.what == EXIT and life.exited is None:
                    life.exited = h.t
        for pid, since in group_since.items():
            self.incarnations[pid].group_stops.append((since, INF))
        for pid, since in main_since.items():
            self.incarnations[pid].main_stops.append((since, INF))
        for name, since in down_since.items():
            self.server_down[name].append((since, INF))

    def of(self, pid: int | None) -> Incarnation | None:
        return self.incarnations.get(pid) if pid is not None else None

    def down_between(self, server: str, start: float, end: float) -> float:
        """Seconds ``server`` was down within ``[start, end]``."""
        return sum(
            max(0.0, min(end, b) - max(start, a)) for a, b in self.server_down.get(server, [])
        )

    def down_within(self, server: str, start: float, end: float) -> tuple[float, float] | None:
        """An outage of ``server`` that overlaps ``[start, end]``."""
        for a, b in self.server_down.get(server, []):
            if a <= end and b >= start:
                return a, b
        return None

    def database_away(
        self, name: str | None, start: float, end: float
    ) -> tuple[str, float, float] | None:
        """When the process ``name`` could not reach PostgreSQL within
        ``[start, end]``: the server down, or that worker cut off alone;
        (what, from, to) of the first such outage, if any."""
        found = []
        outage = self.down_within("postgres", start, end)
        if outage is not None:
            found.append(("the database down", *outage))
        if name is not None:
            outage = self.down_within(cut_name(name), start, end)
            if outage is not None:
                found.append((f"{worker_of(name)} cut off from the database", *outage))
        return min(found, key=lambda f: f[1]) if found else None

    def away_between(self, name: str | None, start: float, end: float) -> float:
        """Seconds within ``[start, end]`` the process ``name`` could not
        reach PostgreSQL (the server down, or that worker cut off)."""
        spans = list(self.server_down.get("postgres", []))
        if name is not None:
            spans += self.server_down.get(cut_name(name), [])
        merged: list[tuple[float, float]] = []
        for a, b in sorted((max(a, start), min(b, end)) for a, b in spans):
            if b <= a:
                continue
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        return sum(b - a for a, b in merged)

    def skewed(self, start: float, end: float) -> list[Incarnation]:
        """The processes alive within ``[start, end]`` whose clock was moved."""
        return [
            i for i in self.incarnations.values() if i.skew and i.spawned <= end and i.end >= start
        ]

    # -- the file --------------------------------------------------------------

    def dump(self, path: Path) -> None:
        with path.open("w") as out:
            for h in self.happenings:
                out.write(json.dumps(h.to_json()) + "\n")

    @classmethod
    def load(cls, path: Path) -> Life:
        with path.open() as lines:
            return cls([Happening(**json.loads(line)) for line in lines if line.strip()])


__all__ = [
    "CONT",
    "CONT_MAIN",
    "DOWN",
    "EXIT",
    "FAKETIME",
    "INF",
    "KILL",
    "SPAWN",
    "STOP_GROUP",
    "STOP_MAIN",
    "SUFFIX",
    "TERM",
    "UP",
    "WIPED",
    "Happening",
    "Incarnation",
    "Life",
    "cut_name",
    "skew_of",
    "worker_of",
]
