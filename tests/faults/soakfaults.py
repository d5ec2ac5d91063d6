"""The soak's faults, begun and ended (:func:`begin`, :func:`end`).

Every signal goes through the soak's journal (:meth:`soakrun.Soak.signal`,
:meth:`~soakrun.Soak.signal_main`), and every server outage is written
there too: the checker's proofs read it (:mod:`soaklife`). A fault that
lasts a while keeps what :func:`end` needs (the process it stopped: a
worker restarted meanwhile is another process, and is left alone).

The faults of the self-fencing protocol and of the database's clock:

* ``stall_resume``: a probe worker's whole group stopped (SIGSTOP) at a
  moment each body under way on it has little work left (:data:`LITTLE`),
  longer than every bound, then resumed: each stale copy reaches its side
  effect right after SIGCONT, and must be told or refused by its
  ``self.fence.check()``;
* ``db_partition``: a probe worker cut off from PostgreSQL alone: the proxy
  its connections go through (:class:`freezeproxy.FreezableProxy`) frozen
  longer than the monitor's ping timeout and grace, its broker reachable;
  written as the outage of the server ``postgres@<worker>``;
* ``skewed_runner``: a runner restarted under libfaketime (its clock ahead
  or behind by the fault's offset, its monotonic clock true), then
  restarted on true time; its spawn in the journal says ``faketime +90s``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import redis
from private import PrivateRedis
from soaklife import CONT_MAIN, DOWN, UP, WIPED, cut_name
from soakother import PROCESSES as OTHER_PROCESSES
from soakplan import OTHER, Fault

if TYPE_CHECKING:
    from soakrun import Soak

#: seconds spent trying to stop a runner inside a transaction
CATCH = 5.0
#: ``stall_resume``: the most work a body under way may have left when its
#: worker is stopped, and how long to wait for such a moment
LITTLE = 0.3
RESUME_CATCH = 30.0
#: ``db_partition``: the work a body under way should have left when its
#: worker is cut off (past its self-fencing bound, 0.75 x the ping timeout)
CUT_LEFT = 8.0
#: a session of ``ports`` inside a transaction that holds an id (it wrote or locked rows)
_IN_TRANSACTION = (
    "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s) AND backend_xid IS NOT NULL"
)


def begin(soak: Soak, fault: Fault, n: int) -> dict[str, Any] | None:
    """Begin ``fault``; what :func:`end` needs when it lasts a while, else ``None``."""
    kind, target = fault.kind, fault.target
    if kind == "kill9":  # the whole process group: a worker's pool dies with it
        with resting(soak, target):
            soak.stop_process(target, signal.SIGKILL)
            soak.idle(fault.seconds)
    elif kind == "term":  # the main process only: a worker's warm shutdown
        with resting(soak, target):
            soak.signal(target, signal.SIGCONT)  # a stopped worker cannot shut down
            soak.stop_process(target, signal.SIGTERM, group=False)
            soak.idle(fault.seconds)
    elif kind == "restart":
        restart(soak, target, fault.seconds)
    elif kind == "flushall":
        with contextlib.suppress(redis.RedisError):
            redis.Redis.from_url(soak.broker_url).flushall()
        soak.note("broker", 0, WIPED, "FLUSHALL")
    elif kind == "listener_down":
        soak.held_down.add(target)
        soak.stop_process(target, signal.SIGTERM)
        return {}
    elif kind in ("pause", "stall_worker", "stall_main"):
        return stop_worker(soak, target, main=kind == "stall_main")
    elif kind == "stall_resume":
        return stop_ending(soak, target)
    elif kind == "db_partition":
        return cut_off(soak, target)
    elif kind == "skewed_runner":
        soak.skewed[target] = fault.offset
        restart_process(soak, target)
        return {"skewed": target}
    elif kind == "runner_pause":
        return pause_runner(soak, target)
    elif kind == "twin":
        from soakrun import TWIN

        twin = f"{target}{TWIN}{n}"  # its own name: two twins of one worker may overlap
        soak.spawn(twin)
        return {"twin": twin}
    elif kind == "burst":
        soak.burst(int(fault.seconds), n)
    elif kind == OTHER:
        if soak.other is not None:
            soak.kept += [p for p in OTHER_PROCESSES if p not in soak.kept]
    else:  # pragma: no cover - the plan makes only these
        raise ValueError(f"unknown fault {kind}")
    soak.ensure_running()
    return None


def end(soak: Soak, fault: Fault, state: dict[str, Any]) -> None:
    """The end of a fault that lasts a while."""
    if fault.kind == "listener_down":
        soak.held_down.discard(fault.target)
    elif "proxy" in state:
        soak.note(cut_name(state["proxy"]), 0, UP, "proxy thawed")
        soak.proxies[state["proxy"]].thaw()
    elif "skewed" in state:
        soak.skewed.pop(state["skewed"], None)
        restart_process(soak, state["skewed"])
    elif "twin" in state:
        soak.stop_process(state["twin"], signal.SIGTERM, timeout=60, group=False)
    elif "pid" in state and soak.alive(fault.target) and soak.pid(fault.target) == state["pid"]:
        if state.get("main"):
            soak.note(fault.target, state["pid"], CONT_MAIN)
            with contextlib.suppress(ProcessLookupError):
                os.kill(state["pid"], signal.SIGCONT)
        else:
            soak.signal(fault.target, signal.SIGCONT)
    soak.ensure_running()


def stop_worker(soak: Soak, name: str, *, main: bool) -> dict[str, Any]:
    """Stop a worker's main process alone (``main``: its pool goes on) or
    its whole group; a probe worker when a body with a while to go runs on
    it, if one does within :data:`CATCH` seconds (three times that for a
    whole group; a stall between bodies tests less)."""
    if not soak.alive(name):
        return {}
    # a whole group stopped with a long body under way (waited for longer):
    # its new copy may still run when it resumes
    left, wait = (1.0, CATCH) if main else (5.0, 3 * CATCH)
    deadline = time.monotonic() + wait
    caught = False
    if name.startswith("work"):
        while not (caught := soak.busy(name, left=left)) and time.monotonic() < deadline:
            soak.idle(0.05)
    if main:
        soak.signal_main(name, signal.SIGSTOP)
    else:
        soak.signal(name, signal.SIGSTOP)
    say = ", a body running" if caught else ""
    return {"pid": soak.pid(name), "main": main, "say": say}


def stop_ending(soak: Soak, name: str) -> dict[str, Any]:
    """Stop a probe worker's whole group at a moment each body under way on
    it has at most :data:`LITTLE` seconds of work left (waited for a third
    of :data:`RESUME_CATCH`), else one of them at least (the rest of it),
    else wherever it is."""
    if not soak.alive(name):
        return {}
    start = time.monotonic()
    caught = 0
    while time.monotonic() < start + RESUME_CATCH:
        every = time.monotonic() < start + RESUME_CATCH / 3
        if caught := soak.ending(name, most=LITTLE, every=every):
            break
        soak.idle(0.01)
    more = len(soak.work_left(name)) - caught
    soak.signal(name, signal.SIGSTOP)
    say = f", {caught} bodies with little left" if caught else ", no body about to end"
    if caught and more > 0:
        say += f", {more} with more"
    return {"pid": soak.pid(name), "main": False, "say": say}


def cut_off(soak: Soak, name: str) -> dict[str, Any]:
    """Freeze the proxy between a probe worker and PostgreSQL, when a body
    with a while to go runs on it if one does within three times
    :data:`CATCH` seconds (the broker stays reachable)."""
    deadline = time.monotonic() + 3 * CATCH
    caught = False
    while not (caught := soak.busy(name, left=CUT_LEFT)) and time.monotonic() < deadline:
        soak.idle(0.05)
    soak.proxies[name].freeze()
    soak.note(cut_name(name), 0, DOWN, "proxy frozen")
    return {"proxy": name, "say": ", a body running" if caught else ""}


@contextlib.contextmanager
def resting(soak: Soak, name: str) -> Iterator[None]:
    """No other fault's end starts ``name`` again within the block."""
    soak.resting.add(name)
    try:
        yield
    finally:
        soak.resting.discard(name)


def restart_process(soak: Soak, name: str) -> None:
    """Stop a process (woken first if paused; SIGTERM, its group) and start
    it again at once (its command as the soak says now)."""
    with resting(soak, name):
        if soak.alive(name):
            soak.signal(name, signal.SIGCONT)
            soak.stop_process(name, signal.SIGTERM, timeout=30)
        soak.seen_gone(name)
    if name not in soak.held_down and not soak.alive(name):
        soak.spawn(name)


def restart(soak: Soak, target: str, seconds: float) -> None:
    """Stop a server, wait, start it again; its outage in the journal (on
    the safe side: down once stopped, up before it is started)."""
    server = soak.servers[target]
    soak.database_down = target == "postgres"  # the soak's own writes wait meanwhile
    server.stop()
    try:
        soak.note(target, 0, DOWN)
        if isinstance(server, PrivateRedis) and target == "broker":
            soak.note(target, 0, WIPED, "restarted without persistence")
        soak.idle(seconds)
    finally:  # (a soak stopped meanwhile still gets its server back, for its checks)
        soak.note(target, 0, UP)
        server.start()
        soak.database_down = False


def tcp_ports(pid: int) -> list[int]:
    """The local ports of the TCP sockets of process ``pid``."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[9] in inodes:
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def pause_runner(soak: Soak, name: str) -> dict[str, Any]:
    """Stop a runner for a while, inside a transaction that holds rows
    when one is caught within :data:`CATCH` seconds (stopped, its sessions
    read, let go again if none holds a transaction), else wherever it is."""
    if not soak.alive(name):
        return {}
    pid = soak.pid(name)
    ports = tcp_ports(pid)
    tries, held = 0, False
    deadline = time.monotonic() + CATCH
    with contextlib.suppress(psycopg.Error, ProcessLookupError):
        url = soak.servers["postgres"].url  # type: ignore[attr-defined]
        with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
            while ports and time.monotonic() < deadline:
                os.killpg(pid, signal.SIGSTOP)
                tries += 1
                row = conn.execute(_IN_TRANSACTION, [ports]).fetchone()
                if row is not None and row[0]:
                    held = True
                    break
                os.killpg(pid, signal.SIGCONT)
                time.sleep(0.002)
    soak.signal(name, signal.SIGSTOP)
    where = "inside a transaction" if held else "outside any transaction"
    return {"pid": pid, "say": f", caught {where} after {tries} tries"}
