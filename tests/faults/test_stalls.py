"""A worker that stalls: one copy at a time, and a stale copy's end never
counts (DESIGN.md §4, "Stalls and fencing").

Each scenario starts one-shot stall probes (:mod:`faultapp`: steps of 0.05 s,
notes with their fencing token, a fenced completion) on a first worker, then
stops that worker for longer than every timeout the monitor has, with a
second worker ready to take what the monitor gives back:

* **its main process alone** (SIGSTOP): its pool processes go on running the
  bodies and renew their runs. Nothing may be taken from them: no second
  copy starts, each task completes once (on 7132d9b the monitor ended the
  runs ``lost`` once the worker was silent, and the second worker ran them
  again beside the first: two copies of each, both recorded ``eventful``);
* **the whole worker** (SIGSTOP of its process group): nothing renews, the
  monitor takes the runs after its ping timeout and grace, the second worker
  runs them again. When the first resumes, its heartbeat (or its lease's
  ping) learns the run was taken and stops the stale body within a beat; a
  stale end that still comes is recorded ``superseded`` and its fenced
  completion is refused: exactly one good run and one completion per task.

The probes' notes and counters (another Redis) are the ground truth; the
table row gets the measured windows.
"""

from __future__ import annotations

import os
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import TABLE, full_only, scale
from harness import Platform
from private import PrivateRedis

from swh_like_scheduler.store import tables

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]

#: the monitor's bounds in these scenarios (seconds): a copy silent for
#: PING + GRACE loses its run; a worker silent for TIMEOUT is offline, and
#: its runs may be ended after OFFLINE_GRACE (if no guard took them)
PING, GRACE, TIMEOUT, OFFLINE_GRACE = 2.5, 1.5, 2, 0.5
#: how often the bodies renew their runs (at most a third of PING)
BEAT = 0.5
#: how long the worker stays stopped: longer than all of them together
STALL = 8.0
#: the bodies: longer than the stall, so that they are running when it ends
STEPS = 260  # x 0.05 s = 13 s of sleeping steps


def monitor_options() -> list[str]:
    return [
        *("--ping-timeout", str(PING), "--grace", str(GRACE)),
        *("--worker-timeout", str(TIMEOUT), "--offline-grace", str(OFFLINE_GRACE)),
    ]


def runs_by_status(running: Platform) -> dict[str, int]:
    with running.store.engine.connect() as conn:
        found = conn.execute(
            sa.select(tables.task_run.c.status, sa.func.count()).group_by(tables.task_run.c.status)
        ).all()
    return {str(status): int(count) for status, count in found}


def body_windows(running: Platform) -> dict[int, list[dict[str, float | int | str]]]:
    """Per task, each copy's body: token, process, start, and when it left
    (ended or stopped, ``inf`` if it never did)."""
    copies: dict[tuple[int, str], dict[str, float | int | str]] = {}
    for note in running.notes():
        key = (int(note["task"]), str(note["run"]))
        if note["event"] == "start":
            copies[key] = {"token": note["token"], "pid": note["pid"], "start": note["t"]}
            copies[key]["left"] = float("inf")
            copies[key]["how"] = "running"
        elif key in copies:
            copies[key]["left"] = note["t"]
            copies[key]["how"] = note["event"]
    per_task: dict[int, list[dict[str, float | int | str]]] = defaultdict(list)
    for (task, _), copy in sorted(copies.items(), key=lambda item: float(item[1]["start"])):
        per_task[task].append(copy)
    return dict(per_task)


def platform_with_two_workers(running: Platform, count: int, *, leased: bool) -> tuple[int, int]:
    """``count`` stall probes running on worker ``w1`` (``w2`` started
    after they all started there); returns w1's main pid and its group."""
    running.ping = BEAT
    running.create_stall_tasks(count, steps=STEPS, leased=leased)
    running.listener()
    first = running.worker("w1", concurrency=count)
    running.runner("runner", *monitor_options())
    running.wait_for(lambda: running.starts() == count, 60, f"{count} bodies to start on w1")
    running.worker("w2", concurrency=count)
    return first.pid, os.getpgid(first.pid)


def settle(running: Platform, count: int) -> None:
    running.wait_for(
        lambda: len(running.completions()) == count and running.completed_in_db() == count,
        120,
        "every task to complete, in the ground truth and in the database",
    )


@pytest.mark.parametrize(
    "leased",
    [False, pytest.param(True, marks=full_only())],
    ids=["plain", "leased"],
)
def test_a_workers_main_process_stalled(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path, leased: bool
) -> None:
    count = scale(3, 4)
    with Platform(postgres_url, private_redis.url, counter_url, logs) as running:
        main_pid, _ = platform_with_two_workers(running, count, leased=leased)
        os.kill(main_pid, signal.SIGSTOP)  # the pool processes go on
        stopped = time.monotonic()
        time.sleep(STALL)  # the fault itself: its length is the point
        os.kill(main_pid, signal.SIGCONT)
        settle(running, count)
        recovery = time.monotonic() - stopped - STALL
        windows = body_windows(running)
        statuses = runs_by_status(running)
        starts, completions, refused = running.starts(), running.completions(), running.refused()
    # one copy per task, never a second, and its one completion counted
    assert starts == count, windows
    assert {task: len(copies) for task, copies in windows.items()} == dict.fromkeys(range(count), 1)
    assert completions == dict.fromkeys(range(count), 1)
    assert refused == {}
    assert statuses == {"eventful": count}, statuses
    kind = "leased" if leased else "plain"
    TABLE.append(
        {
            "scenario": f"worker's main process SIGSTOP {STALL:.0f} s ({kind})",
            "tasks": count,
            "bodies": starts,
            "overlap_s": 0.0,
            "good_runs": statuses.get("eventful", 0),
            "superseded": statuses.get("superseded", 0),
            "recovery_seconds": round(recovery, 1),
        }
    )


@pytest.mark.parametrize(
    "leased",
    [False, pytest.param(True, marks=full_only())],
    ids=["plain", "leased"],
)
def test_a_whole_worker_stalled(
    postgres_url: str, private_redis: PrivateRedis, counter_url: str, logs: Path, leased: bool
) -> None:
    count = scale(3, 4)
    with Platform(postgres_url, private_redis.url, counter_url, logs) as running:
        _, group = platform_with_two_workers(running, count, leased=leased)
        os.killpg(group, signal.SIGSTOP)  # main and pool processes: nothing renews
        running.wait_for(
            lambda: running.starts() >= 2 * count, 60, "the second worker to run every task again"
        )
        os.killpg(group, signal.SIGCONT)
        resumed, resumed_at = time.time(), time.monotonic()
        settle(running, count)
        recovery = time.monotonic() - resumed_at
        # the stale copies have been told (stopped), or ended and been refused
        running.wait_for(
            lambda: all(
                float(c["left"]) < float("inf")
                for copies in body_windows(running).values()
                for c in copies
            ),
            30,
            "every stale copy to stop or end",
        )
        windows = body_windows(running)
        statuses = runs_by_status(running)
        completions, refused = running.completions(), running.refused()
    tails = []
    for task, copies in windows.items():
        # the stale copy, then the fresh one; a later fresh copy only when one
        # fenced itself (its renewals late past its bound on a starved
        # machine: seen with a soak beside the suite), never beside it
        assert len(copies) >= 2, (task, copies)
        stale, fresh, *later = copies
        assert int(fresh["token"]) > int(stale["token"])
        for before, after in zip([fresh, *later], later, strict=False):
            assert int(after["token"]) > int(before["token"]), copies
            assert float(before["left"]) <= float(after["start"]), copies
        if stale["how"] == "end":  # it ended before its heartbeat told it: refused
            assert refused.get(task) == 1
        else:
            assert stale["how"] == "stopped"
        # how long the stale copy ran on beside the fresh one after it resumed
        tails.append(max(0.0, min(float(stale["left"]), float(fresh["left"])) - resumed))
    # one completion per task, under the fresh token
    assert completions == dict.fromkeys(range(count), 1)
    # one good run per task; the stale runs lost (taken) or superseded, never good
    assert statuses.get("eventful", 0) == count, statuses
    assert set(statuses) <= {"eventful", "lost", "superseded"}, statuses
    overlap = max(tails)
    assert overlap < 2.0, tails  # a beat and the stop's delivery
    kind = "leased" if leased else "plain"
    TABLE.append(
        {
            "scenario": f"whole worker SIGSTOP until its runs ran elsewhere ({kind})",
            "tasks": count,
            "bodies": 2 * count,
            "overlap_s": round(overlap, 2),
            "good_runs": statuses.get("eventful", 0),
            "superseded": statuses.get("superseded", 0),
            "recovery_seconds": round(recovery, 1),
        }
    )
