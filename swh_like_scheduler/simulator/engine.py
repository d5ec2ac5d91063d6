"""One simulation: a workload under one dispatch order, on a virtual clock.

What runs for real: the store (a private SQLite database, or an empty
PostgreSQL one), the policy engine, the runner's pass
(:func:`~swh_like_scheduler.dispatch.serve.tick`, the same claims and
messages) and the listener's outcome handling
(:class:`~swh_like_scheduler.listener.handler.EventHandler`, fed Celery-shaped
events). What is simulated: time (SimPy's clock, passed as ``now`` to
everything), the broker's queues (:class:`.queues.SimQueues`) and the
workers (one SimPy process per worker slot, drawing each run's duration and
outcome from :mod:`.behaviour`).

The monitor's load duty measures each type's adaptive tasks every
``load_every`` (5 min) as it does for real
(:func:`~..monitor.duties.measure_loads`), for the capacity-aware interval
rule. The runner behaves as it does on PostgreSQL: after a pass it sleeps until
the next task is ready, at most its period (a full period when a queue was
full), and an outcome that makes a task ready within a minute wakes it (the
store's notification); but it sleeps at least ``min_sleep`` (30 s by
default), so that a pass serves the tasks that fell ready meanwhile rather
than one pass per task. The listener records a worker's events
``listener_delay`` after the first one of a batch.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import simpy
import sqlalchemy as sa

from ..broker.message import Message
from ..dispatch.pools import PassPools
from ..dispatch.serve import tick
from ..domain.exceptions import InvalidInput
from ..domain.model import DispatchOrder, RunStatus, ScheduleKind, Task, TaskType
from ..intake.builders import task_from_input
from ..listener.handler import EventHandler
from ..monitor.duties import MonitorSettings, measure_loads
from ..policy import start_times
from ..policy.retry import retry_state
from ..policy.times import to_utc
from ..recording import TaskTypeCache
from ..store import migrations
from ..store.tables import metadata
from .behaviour import SUCCESS, TaskBehaviour, stream
from .cadence import written_interval
from .firings import CronPromise, lost_by_group
from .observed import MEMORY, PRIVATE_SQLITE, MemorySimStore, SimStore
from .queues import SimQueues
from .results import Recorder, TypeRecord
from .watch import ConditionWatch
from .workload import Workload

#: tasks created per store call
CREATE_CHUNK = 2000


@contextmanager
def sim_store(db_url: str | None) -> Iterator[SimStore]:
    """The store of one simulation: held in memory (``db_url`` ``None`` or
    :data:`MEMORY`, the default); a private SQLite file with the current
    schema (:data:`PRIVATE_SQLITE`; in memory-backed ``/dev/shm`` when there
    is one), removed after; or the empty database at ``db_url``, whose
    tables are created, then dropped after."""
    if db_url is None or db_url == MEMORY:
        # typed as the SQL store: the memory store answers every call a
        # simulation makes (the contract suite and the hand-computed
        # worlds hold it), not yet every role of the interface
        yield cast("SimStore", MemorySimStore())
        return
    if db_url != PRIVATE_SQLITE and "://" not in db_url:
        raise InvalidInput(
            "sim-db-url",
            f"{db_url!r} is not {MEMORY!r}, {PRIVATE_SQLITE!r} or the URL of an empty database",
        )
    folder = None
    if db_url == PRIVATE_SQLITE:
        shm = Path("/dev/shm")
        folder = Path(tempfile.mkdtemp(prefix="swh-sim-", dir=shm if shm.is_dir() else None))
        url = f"sqlite:///{folder / 'simulation.sqlite'}"
    else:
        url = db_url
    store = SimStore.from_url(url)
    if folder is None and not migrations.is_empty(store.engine):
        # refused before anything is created: the tables found are not ours to drop
        store.close()
        raise InvalidInput(
            "sim-db-url",
            "a simulation writes its own tables and drops them after: "
            "give an empty database, never a live one (--from-store reads a live one)",
        )
    try:
        migrations.upgrade(store.engine)
        yield store
    finally:
        if folder is None:
            with store.engine.begin() as conn:
                metadata.drop_all(conn)
                conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
        store.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


class Simulation:
    """``workload`` dispatched in ``order``; :meth:`run` returns the results
    (:meth:`.results.Recorder.to_json`)."""

    def __init__(
        self,
        workload: Workload,
        order: DispatchOrder,
        *,
        db_url: str | None = None,
        tasks: Sequence[Any] | None = None,
        keep_slots: bool = True,
        by_type: bool = False,
        at_horizon: bool = False,
    ) -> None:
        """``by_type``: the results carry each type's levels at each sample
        (``timeline_by_type``); ``at_horizon``: and the conditions read at
        the horizon itself (``at_horizon``, ``at_horizon_by_type``:
        :meth:`.results.Recorder.close`)."""
        self.workload = workload
        self.at_horizon = at_horizon
        self.order = order
        self.db_url = db_url
        #: the runner knows each queue's worker slots and keeps some from
        #: long runs (:mod:`~..runner.reserve`), as a real runner that hears
        #: its workers does; False: as a runner that does not
        self.keep_slots = keep_slots
        #: the worker slots of each queue
        self.slots: dict[str, int] = {}
        #: tasks given as they are (``--from-store``) instead of the groups'
        self.given_tasks = tasks
        self.env = simpy.Environment()
        self.queues = SimQueues(self.env)
        self.start = workload.start
        self.recorder = Recorder(
            start=workload.start,
            sample_every=workload.runner.sample_every.total_seconds(),
            horizon=workload.horizon.total_seconds(),
            types={
                t.type: TypeRecord(workload.workers[t.type], workload.natural_load()[t.type])
                for t in workload.types
            },
            by_type=by_type,
        )
        self.behaviours: dict[tuple[int, int], TaskBehaviour] = {}
        #: per task, its group's name and the interval its schedule
        #: promises as written (:func:`.cadence.written_interval`)
        self.promises: dict[tuple[int, int], tuple[str, float | None]] = {}
        self.attempts: dict[tuple[int, int], int] = {}
        self.last_visit: dict[tuple[int, int], float] = {}
        self.failed_last: set[tuple[int, int]] = set()
        #: per cron task, what it owes, and the starts of its first runs
        #: (not retries): the firings lost (:mod:`.firings`)
        self.cron: dict[tuple[int, int], CronPromise] = {}
        self.cron_starts: dict[tuple[int, int], list[datetime]] = {}
        self.pending: list[dict[str, Any]] = []
        self.flush_due = False
        self.wake: simpy.Event | None = None

    @property
    def horizon(self) -> float:
        return self.workload.horizon.total_seconds()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.env.now)

    def run(self) -> dict[str, Any]:
        with sim_store(self.db_url) as store:
            store.recorder, store.announced = self.recorder, set()
            store.changed, store.run_tasks, store.run_deadlines = set(), {}, {}
            self.store = store
            created = self._populate(store)
            # the listener reads task types again a minute after, as it does
            # for real: on the simulated clock
            types = TaskTypeCache(store, clock=lambda: self.env.now)
            self.handler = EventHandler(store, types, rng=stream(self.workload.seed, "listener"))
            self.watch = ConditionWatch(
                store, {t.type: t for t in self.workload.types}, self._group_of
            )
            # the tasks as just created are the tasks as stored: the first
            # sample need not read them all back
            self.watch.seed(created, self.now())
            del created  # the watch lets each go as it reads its task again
            for task_type in self.workload.types:
                for slot in range(self.workload.workers[task_type.type]):
                    self.env.process(self._worker(task_type, f"sim{slot}@{task_type.type}"))
            self.env.process(self._runner())
            self.env.process(self._monitor())
            self.env.process(self._sampler())
            # samples at 0, every, 2 every... each standing for the time
            # until the next: the horizon is covered once
            for task_type in self.workload.types:
                queue = task_type.effective_queue
                self.slots[queue] = self.slots.get(queue, 0) + self.workload.workers[task_type.type]
            # one publisher thread for the runner's life, as a real runner has
            with closing(PassPools.open(1)) as self.pools:
                self.env.run(until=self.workload.horizon.total_seconds())
            if self.at_horizon:
                counts = self.watch.counts(self.now(), self.store.changed)
                self.store.changed = set()
                self.recorder.close(self.now(), counts)
            self._still_queued()
        self.recorder.cron_work = lost_by_group(
            (
                (self.promises[key][0], promise, self.cron_starts.get(key, []))
                for key, promise in self.cron.items()
            ),
            self.start,
            self.start + self.workload.horizon,
        )
        return self.recorder.to_json()

    # -- set-up -----------------------------------------------------------------------

    def _populate(self, store: SimStore) -> list[Task]:
        """The workload's types and tasks created in ``store``; the tasks
        as the store returned them."""
        for task_type in self.workload.types:
            store.create_task_type(task_type)
        created: list[Task] = []
        if self.given_tasks is not None:
            for index, (task, behaviour) in enumerate(self.given_tasks):
                self.behaviours[(0, index)] = behaviour
                self._promise((0, index), task.type, task)
            tasks = [task for task, _ in self.given_tasks]
            for i in range(0, len(tasks), CREATE_CHUNK):
                created += store.create_tasks(tasks[i : i + CREATE_CHUNK], now=self.start)
            return created
        batch = []
        for g, group in enumerate(self.workload.groups):
            task_type = self.workload.task_type(group.type)
            for n in range(group.count):
                rng = stream(self.workload.seed, "task", g, n)
                low, high = (d.total_seconds() for d in group.spread)
                first = self.start + timedelta(seconds=rng.uniform(low, high))
                values = {**group.fields, "args": [g, n], "next_run": first.isoformat()}
                try:
                    task = task_from_input(values, task_type, now=self.start)
                except InvalidInput as error:
                    raise InvalidInput(f"tasks[{g}].{error.field}", error.message) from None
                batch.append(task)
                self._promise((g, n), group.name, task)
                self.behaviours[(g, n)] = TaskBehaviour.draw(group, rng)
                if len(batch) >= CREATE_CHUNK:
                    created += store.create_tasks(batch, now=self.start)
                    batch = []
        if batch:
            created += store.create_tasks(batch, now=self.start)
        return created

    def _promise(self, key: tuple[int, int], group: str, task: Task) -> None:
        interval = written_interval(task, self.start, self.workload.horizon)
        self.promises[key] = (group, interval)
        self.recorder.promised(group, interval)
        if task.schedule_kind is ScheduleKind.CRON and task.cron and task.cron_max_duration:
            first = start_times(task, self.workload.task_type(task.type), self.start)
            self.cron[key] = CronPromise(
                task.cron, task.tz, to_utc(first.can_start_by), task.cron_max_duration
            )

    # -- the processes ----------------------------------------------------------------

    def _runner(self) -> Generator[simpy.Event, Any, None]:
        runner = self.workload.runner
        period = runner.period.total_seconds()
        shortest = min(period, runner.min_sleep.total_seconds())
        env = self.env
        down = (
            (runner.down_from.total_seconds(), (runner.down_from + runner.down_for).total_seconds())
            if runner.down_from is not None and runner.down_for is not None
            else None
        )
        while True:
            if down is not None and down[0] <= env.now < down[1]:
                yield env.timeout(down[1] - env.now)  # the outage: no pass at all
                continue
            self.store.announced.clear()
            report = tick(
                self.store,
                None,
                self.now(),
                broker=self.queues,
                clock=lambda: env.now,
                order=self.order,
                claimers=1,
                pools=self.pools,
                slots=self.slots.get if self.keep_slots else None,
            )
            self.recorder.events["pass"] += 1
            self.wake = env.event()
            yield env.timeout(max(shortest, report.sleep_seconds(period))) | self.wake
            self.wake = None

    def _worker(self, task_type: TaskType, hostname: str) -> Generator[simpy.Event, Any, None]:
        """One worker slot of ``task_type``, taking the messages of its
        queue. A queue may serve several types: each run keeps to its own
        message, as a real worker does (its time limit is the message's,
        its retries its own type's), and is charged to its own type."""
        env, seed = self.env, self.workload.seed
        queue = self.queues.queue(task_type.effective_queue)
        while True:
            message: Message = yield queue.get()
            key = (int(message.args[0]), int(message.args[1]))
            attempt = self.attempts.get(key, 0) + 1
            self.attempts[key] = attempt
            started = env.now
            type_name, deadline = self.store.run_deadlines.pop(message.task_id)
            self.recorder.started(type_name, (self.now() - deadline).total_seconds())
            retry = key in self.failed_last and self._retrying(message.task_id)
            if not retry and key in self.cron:
                self.cron_starts.setdefault(key, []).append(self.now())
            last = self.last_visit.get(key)
            fate = self.behaviours[key].fate(
                stream(seed, "run", *key, attempt), None if last is None else started - last
            )
            seconds, status = fate.seconds, fate.status
            limit = message.time_limits[1]  # the soft limit: the body is interrupted
            if limit is not None and seconds > limit:
                seconds, status = limit, RunStatus.TIMED_OUT
            self._event("task-started", message.task_id, hostname)
            self.recorder.busy(task_type.type, min(seconds, self.horizon - started))
            yield env.timeout(seconds)
            self._end(message.task_id, hostname, status, seconds)
            if status in SUCCESS:
                if last is not None:
                    self.recorder.visited(*self._gap(key, started - last), type_name)
                self.last_visit[key] = started
                self.failed_last.discard(key)
            else:
                self.failed_last.add(key)
            self.recorder.ended(type_name, status.value, retry)

    def _gap(self, key: tuple[int, int], gap: float) -> tuple[str, float, float | None]:
        group, interval = self.promises[key]
        return group, gap, interval

    def _retrying(self, backend_id: str) -> bool:
        """Whether the run starting is a retry: its task's last run failed
        and the policy of the task's own type scheduled a retry (not the
        next run of its schedule, once its retries were exhausted). The
        failure was recorded before the task could be claimed again."""
        (task,) = self.store.get_tasks([self.store.run_tasks[backend_id]])
        return retry_state(task, self.workload.task_type(task.type)).retry is not None

    def _still_queued(self) -> None:
        """The runs still waiting in a queue at the end: their wait so far
        counts in the lateness at start (they started no earlier)."""
        for name in sorted({t.effective_queue for t in self.workload.types}):
            for message in self.queues.queue(name).items:
                type_name, deadline = self.store.run_deadlines.pop(message.task_id)
                waited = (self.now() - deadline).total_seconds()
                self.recorder.started(type_name, waited, queued=True)

    def _end(self, backend_id: str, hostname: str, status: RunStatus, seconds: float) -> None:
        if status is RunStatus.FAILED:
            self._event("task-failed", backend_id, hostname, exception="RuntimeError('failed')")
        elif status is RunStatus.TIMED_OUT:
            error = f"SoftTimeLimitExceeded('after {seconds:.0f} s')"
            self._event("task-failed", backend_id, hostname, exception=error)
        else:
            result = {"status": status.value}
            self._event("task-result", backend_id, hostname, result=result, runtime=seconds)

    def _event(self, kind: str, backend_id: str, hostname: str, **fields: Any) -> None:
        self.pending.append(
            {
                "type": kind,
                "uuid": backend_id,
                "hostname": hostname,
                "timestamp": self.now().timestamp(),
                **fields,
            }
        )
        if not self.flush_due:
            self.flush_due = True
            self.env.process(self._flush())

    def _flush(self) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.workload.runner.listener_delay.total_seconds())
        events, self.pending, self.flush_due = self.pending, [], False
        self.store.announced.clear()
        self.handler.handle_batch(events)
        for event in events:
            task_id = self.store.run_tasks.get(event["uuid"])
            if task_id is not None:
                self.store.changed.add(task_id)
                self.store.written((task_id,))
                if event["type"] != "task-started":
                    del self.store.run_tasks[event["uuid"]]
        self.recorder.events["listener_batch"] += 1
        if self.store.announced and self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    def _monitor(self) -> Generator[simpy.Event, Any, None]:
        """The monitor's load duty (the others have nothing to do here:
        no lease, no worker goes silent, no message is lost)."""
        settings = MonitorSettings()
        while True:
            measure_loads(self.store, self.now(), settings)
            yield self.env.timeout(settings.load_every.total_seconds())

    def _sampler(self) -> Generator[simpy.Event, Any, None]:
        every = self.workload.runner.sample_every.total_seconds()
        while True:
            self._sample()
            yield self.env.timeout(every)

    def _sample(self) -> None:
        counts = self.watch.counts(self.now(), self.store.changed)
        self.store.changed = set()
        depths = {t.type: self.queues.depth(t.effective_queue) for t in self.workload.types}
        self.recorder.sample(
            self.now(),
            counts,
            depths,
            self.watch.group_counts,
            self.watch.group_causes,
            self.watch.group_intervals,
        )

    def _group_of(self, task: Task) -> str:
        if self.given_tasks is not None:
            return task.type
        return self.workload.groups[task.args[0]].name


def simulate(
    workload: Workload, order: DispatchOrder | str, *, db_url: str | None = None
) -> dict[str, Any]:
    """The results of ``workload`` dispatched in ``order`` (see :class:`Simulation`)."""
    return Simulation(workload, DispatchOrder(order), db_url=db_url).run()
