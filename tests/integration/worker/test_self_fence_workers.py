"""Self-fencing and the fence that moves, end to end (DESIGN.md §5
invariants 1, 3 and 7): real PostgreSQL, a Redis broker, real ``celery
worker`` processes (:mod:`fenceapp`), the real listener, runner pass and
monitor (in threads, with steal settings of seconds). The bodies' own notes
and side effects (in Redis) are the ground truth, never the scheduler's
tables.

* **A worker cut off from PostgreSQL only** (its database connections
  through :class:`~freezeproxy.FreezableProxy`, frozen longer than the
  monitor's ping timeout and grace; the broker reachable). On 413f804 the
  monitor took the runs and another worker ran them while the cut-off
  bodies went on: two bodies of a task at once, one-shots completed twice.
  Now each cut-off body is stopped at its self-fencing bound, before the
  monitor may take its run; no two bodies of a task overlap, each one-shot
  completes once.
* **A whole worker stopped** (SIGSTOP of its process group) until the
  monitor took its runs, its bodies with no work left, then SIGCONT. On
  413f804 the stale copies completed their side effects before their
  heartbeat told them, and their ends counted. Now the side effect behind
  ``self.fence.check()`` is refused, the stale ends are ``superseded``, and
  each run counts once.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import services
from waiting import delete_queues, wait_until

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskStatus, TaskType
from swh_like_scheduler.listener import Listener
from swh_like_scheduler.monitor import MonitorSettings
from swh_like_scheduler.monitor.duties import monitor_loop
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "listener"))

import fenceapp
from celeryproc import kill_group, start_worker_process
from freezeproxy import freezable_proxy
from listenertest import listener_thread, options, unique_queue_name

pytestmark = [pytest.mark.postgresql, pytest.mark.redis]

S = timedelta(seconds=1)


class Scenario:
    """One scenario's platform: the probes' task type and tasks, the
    listener, the monitor and a runner loop in threads, ``celery worker``
    subprocesses; stopped when the block ends."""

    def __init__(
        self, store: SQLAlchemyStore, db_url: str, *, ping: float, grace: float, beat: float
    ) -> None:
        self.store = store
        self.db_url = db_url
        self.broker_url = services.require("redis", services.redis_url)
        self.redis = redis.Redis.from_url(self.broker_url)
        self.prefix = f"swh-fence-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.queue = f"{self.prefix}-probe"
        self.ping, self.grace, self.beat = ping, grace, beat
        self.app = make_app(config_module=None, broker_url=self.broker_url, load_workers=False)
        self.workers: dict[str, Any] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._exits = contextlib.ExitStack()
        self.errors: list[BaseException] = []
        self.count = 0

    # -- the platform -----------------------------------------------------------

    def __enter__(self) -> Scenario:
        queue_name = unique_queue_name()
        self._exits.callback(delete_queues, self.app, queue_name, self.queue)
        listener = Listener(self.app, self.store, rng=random.Random(0), options=options(queue_name))
        self._exits.enter_context(listener_thread(listener))
        settings = MonitorSettings(
            ping_timeout=self.ping * S,
            grace=self.grace * S,
            period=0.3 * S,
            lock_ttl=5 * S,
            worker_timeout=timedelta(hours=1),
            republish_after=None,
            holder=f"monitor-{self.prefix}",
        )
        self._thread("monitor", lambda: monitor_loop(self.store, settings, stop=self._stop))
        self._thread("runner", self._runner)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for process in self.workers.values():
            with contextlib.suppress(Exception):
                os.killpg(process.pid, signal.SIGCONT)
            kill_group(process)
        for thread in self._threads:
            thread.join(20)
        self._exits.close()
        keys = [fenceapp.notes_key(self.prefix), fenceapp.effects_key(self.prefix)]
        keys += [fenceapp.hold_key(self.prefix, n) for n in range(self.count)]
        self.redis.delete(*keys)

    def _thread(self, name: str, target: Any) -> None:
        def guarded() -> None:
            try:
                target()
            except BaseException as error:  # reported by the test
                self.errors.append(error)

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _runner(self) -> None:
        while not self._stop.wait(0.3):
            tick(self.store, self.app, datetime.now(UTC))

    def worker(self, name: str, *, db_url: str | None = None, concurrency: int = 4) -> Any:
        env = {
            "FENCE_BROKER": self.broker_url,
            "FENCE_REDIS": self.broker_url,
            "FENCE_PREFIX": self.prefix,
            "FENCE_PING": str(self.beat),
            "SWH_SCHEDULER_DB_URL": db_url or self.db_url,
        }
        process = start_worker_process(
            "fenceapp",
            queues=[self.queue],
            env=env,
            pool="threads",
            concurrency=concurrency,
            events=True,
            name=name,
        )
        self.workers[name] = process
        return process

    def probes(self, count: int, *, work: float, held: bool, task: str) -> list[Task]:
        """``count`` one-shot probes due now (``held``: waiting at their
        start until :meth:`release`)."""
        self.store.create_task_type(
            TaskType(
                type="probe",
                backend_name=task,
                queue=self.queue,
                uses_lease=task == fenceapp.LEASED_TASK,
                default_interval=timedelta(hours=1),
                max_queue_length=100,
                num_retries=0,
            )
        )
        if held:
            for n in range(count):
                self.redis.set(fenceapp.hold_key(self.prefix, n), 1, ex=600)
        self.count = count
        now = datetime.now(UTC) - S
        return self.store.create_tasks(
            [
                Task(
                    type="probe",
                    args=(n,),
                    kwargs={"work": work},
                    schedule_kind=ScheduleKind.ONESHOT,
                    next_run=now,
                    deadline=now + timedelta(hours=1),
                )
                for n in range(count)
            ],
            now=now,
        )

    def release(self) -> None:
        self.redis.delete(*(fenceapp.hold_key(self.prefix, n) for n in range(self.count)))

    # -- the ground truth ---------------------------------------------------------

    def notes(self) -> list[dict[str, Any]]:
        return [json.loads(n) for n in self.redis.lrange(fenceapp.notes_key(self.prefix), 0, -1)]

    def starts(self) -> int:
        return sum(1 for n in self.notes() if n["event"] == "start")

    def effects(self) -> dict[int, int]:
        raw = self.redis.hgetall(fenceapp.effects_key(self.prefix))
        return {int(k): int(v) for k, v in raw.items()}

    def bodies(self) -> dict[int, list[dict[str, Any]]]:
        """Per task, each copy's body in the order they started: run,
        process, token, start, when it left and how (``running``: not yet)."""
        copies: dict[str, dict[str, Any]] = {}
        for note in self.notes():
            if note["event"] == "start":
                copies[note["run"]] = {
                    **{k: note[k] for k in ("task", "run", "pid", "token")},
                    "start": note["t"],
                    "left": float("inf"),
                    "how": "running",
                }
            elif note["run"] in copies and note["event"] != "effect":
                copies[note["run"]].update(left=note["t"], how=note["event"])
        found: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for copy in sorted(copies.values(), key=lambda c: float(c["start"])):
            found[int(copy["task"])].append(copy)
        return dict(found)

    def runs(self, task: Task) -> list[Any]:
        return sorted(self.store.get_task_runs(task.id or 0), key=lambda r: r.id or 0)

    def completed(self, tasks: list[Task]) -> bool:
        found = self.store.get_tasks([t.id or 0 for t in tasks])
        return all(t.status is TaskStatus.COMPLETED for t in found)

    def wait(self, condition: Any, timeout: float, what: str) -> None:
        wait_until(lambda: bool(self.errors) or condition(), timeout, what)
        assert not self.errors, self.errors


def overlaps(copies: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    """The pairs of copies of one task whose bodies ran at the same time."""
    found = []
    for i, one in enumerate(copies):
        for other in copies[i + 1 :]:
            both = min(float(one["left"]), float(other["left"])) - max(
                float(one["start"]), float(other["start"])
            )
            if both > 0:
                found.append((one["run"], other["run"], both))
    return found


@pytest.mark.parametrize(
    "task", [fenceapp.PROBE_TASK, fenceapp.LEASED_TASK], ids=["guarded", "leased"]
)
def test_a_worker_cut_off_from_the_database_stops_its_bodies_before_they_are_taken(
    pg_store: SQLAlchemyStore, postgres_url: str, task: str
) -> None:
    """Three one-shot bodies of 8 s on w1, whose database connections go
    through a proxy frozen for 10 s (ping timeout 3 s + grace 2 s: the
    monitor may take a run 5 s after its last renewal); w2 reaches the
    database directly. Each cut-off body is stopped within its bound (2.25 s
    after its last renewal was sent), before the monitor could take its
    run; the task runs again elsewhere (or on w1 once the proxy thaws),
    never beside it, and completes once. The same behind the lease (its
    pings cut off)."""
    ping, grace, beat, count, freeze = 3.0, 2.0, 0.5, 3, 10.0
    with (
        freezable_proxy(postgres_url) as proxy,
        Scenario(pg_store, postgres_url, ping=ping, grace=grace, beat=beat) as scenario,
    ):
        tasks = scenario.probes(count, work=8.0, held=False, task=task)
        scenario.worker("w1", db_url=proxy.url(postgres_url), concurrency=count)
        scenario.wait(lambda: scenario.starts() == count, 60, "every body to start on w1")
        scenario.worker("w2", concurrency=count)
        time.sleep(2 * beat)  # each run renewed once through the proxy
        frozen_at = time.time()
        proxy.freeze()
        time.sleep(freeze)  # the fault itself: its length is the point
        proxy.thaw()
        scenario.wait(
            lambda: scenario.completed(tasks) and len(scenario.effects()) == count,
            90,
            "every task to complete, in its side effect and in the database",
        )
        scenario.wait(
            lambda: all(
                c["how"] != "running" for copies in scenario.bodies().values() for c in copies
            ),
            30,
            "every body to leave",
        )
        bodies, effects = scenario.bodies(), scenario.effects()
        runs = {t.id: scenario.runs(t) for t in tasks}
    stops = [round(float(c[0]["left"]) - frozen_at, 2) for c in bodies.values()]
    longest = max((o[2] for c in bodies.values() for o in overlaps(c)), default=0.0)
    print(f"partition ({task}): cut-off bodies left {stops} s into the freeze; {effects};")
    started = sum(len(c) for c in bodies.values())
    print(f"partition: longest overlap {longest:.2f} s; bodies {started}")
    # no two bodies of a task at once; each one-shot's side effect once
    assert [overlaps(copies) for copies in bodies.values()] == [[]] * count, bodies
    assert effects == dict.fromkeys(range(count), 1), bodies
    # the monitor may take a run no sooner than ping + grace after its last
    # renewal, which came at most 1.5 beats before the freeze
    earliest_take = frozen_at + ping + grace - 1.5 * beat
    for task, copies in bodies.items():
        cut_off = copies[0]
        assert cut_off["how"] in ("stopped", "refused"), copies
        assert float(cut_off["left"]) < earliest_take, (task, cut_off, earliest_take)
        assert float(cut_off["left"]) - frozen_at < ping, (task, cut_off)  # its bound: 2.25 s
        assert [c["how"] for c in copies[1:]] == ["end"], copies
    for task in tasks:
        statuses = [r.status for r in runs[task.id]]
        assert statuses.count(RunStatus.EVENTFUL) == 1, statuses
        assert set(statuses) <= {RunStatus.EVENTFUL, RunStatus.LOST, RunStatus.SUPERSEDED}


@pytest.mark.parametrize(
    "task", [fenceapp.PROBE_TASK, fenceapp.RUN_ON_TASK], ids=["stopped", "let-run-on"]
)
def test_a_whole_worker_stopped_past_the_timeouts_with_nothing_left_to_do(
    pg_store: SQLAlchemyStore, postgres_url: str, task: str
) -> None:
    """Three one-shot bodies on w1, waiting to make their side effect; w1
    is stopped whole (SIGSTOP) and the bodies released, the monitor takes
    the runs (ping 2 s, grace 1 s) and they are dispatched again; then
    SIGCONT. Each stale body reaches its side effect at once (before its
    heartbeat's thread has run): ``self.fence.check()`` refuses it, its end
    is recorded ``superseded``, and the run dispatched again makes the
    side effect, once (with ``stop_when_taken = False`` the check alone
    stands in the way)."""
    ping, grace, beat, count = 2.0, 1.0, 0.4, 3
    with Scenario(pg_store, postgres_url, ping=ping, grace=grace, beat=beat) as scenario:
        tasks = scenario.probes(count, work=0.0, held=True, task=task)
        w1 = scenario.worker("w1", concurrency=count)
        scenario.wait(lambda: scenario.starts() == count, 60, "every body to start on w1")
        time.sleep(2 * beat)  # each run renewed once
        os.killpg(w1.pid, signal.SIGSTOP)  # main process and pool: nothing renews
        scenario.release()  # once resumed, nothing left to do but the side effect
        first = {t.id: scenario.runs(t)[0] for t in tasks}
        scenario.wait(
            lambda: all(
                len(scenario.runs(t)) == 2 and scenario.runs(t)[0].status is RunStatus.LOST
                for t in tasks
            ),
            60,
            "the monitor to take every run and the runner to dispatch it again",
        )
        taken = {t.id: scenario.runs(t)[0] for t in tasks}
        os.killpg(w1.pid, signal.SIGCONT)
        scenario.wait(
            lambda: (
                scenario.completed(tasks)
                and all(scenario.runs(t)[0].status is RunStatus.SUPERSEDED for t in tasks)
            ),
            60,
            "every task to complete and every stale end to be recorded",
        )
        bodies, effects = scenario.bodies(), scenario.effects()
        runs = {t.id: scenario.runs(t) for t in tasks}
        notes = scenario.notes()
    print(
        f"stall ({task}): effects {effects}; stale copies "
        f"{[c[0]['how'] for c in bodies.values()]}; stale runs "
        f"{[str(r[0].status) for r in runs.values()]}"
    )
    assert effects == dict.fromkeys(range(count), 1), bodies
    for index, copies in bodies.items():
        stale, fresh = copies
        assert int(fresh["token"]) > int(stale["token"])
        if task == fenceapp.RUN_ON_TASK:
            assert stale["how"] == "refused", copies  # the check, and nothing else
        else:
            assert stale["how"] in ("refused", "stopped"), copies
        made = [n for n in notes if n["task"] == index and n["event"] == "effect"]
        assert [n["run"] for n in made] == [fresh["run"]]
    for task_ in tasks:
        stale_run, fresh_run = runs[task_.id]
        assert stale_run.backend_id == first[task_.id].backend_id
        assert [h["event"] for h in taken[task_.id].history][-1] == "stolen"
        assert stale_run.status is RunStatus.SUPERSEDED, stale_run
        assert stale_run.history[-1]["event"] == "stale_end"
        assert "LeaseLost" in (stale_run.error or "") or "RunTaken" in (stale_run.error or "")
        assert fresh_run.status is RunStatus.EVENTFUL
