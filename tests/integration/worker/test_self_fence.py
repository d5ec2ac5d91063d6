"""Self-fencing and stalls in one worker process, on SQLite and PostgreSQL
(:mod:`swh_like_scheduler.worker.ownership`): a body whose process could not
renew its run within the bound the monitor's published settings give is
stopped (``LeaseLost``) even while the database hangs; a body that ends
after a stall asks the database before its success counts; and
``fence.check()`` refuses a side effect once the run was taken (the token
moved) or the copy fenced itself."""

from __future__ import annotations

import pickle
import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from waiting import wait_until

from swh_like_scheduler.domain.exceptions import StoreUnavailable
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskRun, TaskType
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.worker import Fence, LeaseLost, RunTaken
from swh_like_scheduler.worker.heartbeat import BodyOutcome, Heartbeat

S = timedelta(seconds=1)
TINY = timedelta(milliseconds=1)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cut:
    """``store`` with its renewals and reads failing (``down``) or hanging
    (``hang``: a partition that leaves the connections open)."""

    def __init__(self, store: SQLAlchemyStore) -> None:
        self.store = store
        self.down = False
        self.hang = threading.Event()
        self.released = threading.Event()

    def _cut(self, name: str) -> Callable[..., Any]:
        real = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.hang.is_set():
                self.released.wait(60)
            if self.down:
                raise StoreUnavailable("the database is away (cut by the test)")
            return real(*args, **kwargs)

        return call

    def __getattr__(self, name: str) -> Any:
        if name in ("renew_runs", "current_fence", "lease_terms", "finish_lease"):
            return self._cut(name)
        return getattr(self.store, name)


@pytest.fixture
def cut(store: SQLAlchemyStore) -> Iterator[Cut]:
    store.create_task_type(
        TaskType(type="plain", backend_name="tests.fence", default_interval=S * 3600)
    )
    cut = Cut(store)
    yield cut
    cut.released.set()


def heartbeat(cut: Cut, **options: Any) -> Heartbeat:
    apply = outcome_applier(TaskTypeCache(cut.store), random.Random(1))
    return Heartbeat(cut, apply, **options)  # type: ignore[arg-type]


def started(store: SQLAlchemyStore, key: str, tag: str) -> tuple[Task, TaskRun, Fence]:
    now = datetime.now(UTC) - timedelta(minutes=1)
    [task] = store.create_tasks(
        [
            Task(
                type="plain",
                key=key,
                schedule_kind=ScheduleKind.ONESHOT,
                next_run=now,
                deadline=now,
            )
        ],
        now=now,
    )
    run = store.schedule_task_run(task.id or 0, now=now)
    grant = store.guard_start(run.backend_id, node="n", name="w", tag=tag)
    assert grant.granted and grant.fence is not None
    return task, run, Fence(task.id or 0, grant.fence)


def steal(store: SQLAlchemyStore) -> None:
    time.sleep(0.01)
    store.steal_expired_leases(ping_timeout=TINY, grace=TINY)
    time.sleep(0.01)
    assert store.steal_expired_leases(ping_timeout=TINY, grace=TINY).stolen


class Body:
    """A body in a thread of its own, held by ``beat``, running until
    something is raised in it (or ``stop`` is set)."""

    def __init__(self, beat: Heartbeat, run: TaskRun, tag: str, since: float | None = None):
        self.caught: list[BaseException] = []
        self.stop = threading.Event()
        self._held = threading.Event()
        self._args = (beat, run, tag, since)
        self.thread = threading.Thread(target=self._body)
        self.thread.start()
        assert self._held.wait(10)

    def _body(self) -> None:
        beat, run, tag, since = self._args
        beat.hold(run.backend_id, tag, since=since)
        self._held.set()
        outcome = None
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not self.stop.is_set():
                time.sleep(0.01)  # Python code between sleeps: a stop lands here
            outcome = BodyOutcome({"status": "eventful"})
        except RunTaken as stopped:
            self.caught.append(stopped)
            outcome = BodyOutcome(exception=stopped)
        finally:
            beat.ended(run.backend_id, outcome)


def test_the_bound_comes_from_the_monitors_published_settings(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    clock = Clock()
    beat = heartbeat(cut, every=10, clock=clock, background=False)
    _, run, _ = started(store, "a", "t")
    beat.hold(run.backend_id, "t", stop_when_taken=False)
    assert beat.bound == 22.5 and beat.period == 10.0  # nothing published: the defaults
    store.publish_lease_terms(ping_timeout=4 * S, grace=2 * S, holder="monitor")
    clock.now += 61  # read again every minute (and the run, not renewed, fenced)
    report = beat.beat()
    assert beat.bound == 3.0 and beat.period == 1.5  # half the bound: shorter than 10 s
    assert report.fenced == (run.backend_id,)


def test_a_body_whose_renewals_fail_for_the_bound_is_stopped_and_its_end_never_counts(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    store.publish_lease_terms(ping_timeout=4 * S, grace=2 * S, holder="monitor")
    clock = Clock()
    beat = heartbeat(cut, every=1, clock=clock, background=False)
    _, run, _ = started(store, "a", "t")
    body = Body(beat, run, "t")
    assert beat.bound == 3.0
    cut.down = True  # cut off from the database
    clock.now += 1.5
    assert beat.beat().renewed == 0 and body.caught == []  # tried again, not fenced yet
    clock.now += 1.4
    assert beat.beat().fenced == ()  # 2.9 s: still within the bound
    clock.now += 0.1
    assert beat.watch() == (run.backend_id,)  # 3 s without a renewal: fenced, no I/O
    body.thread.join(10)
    assert [type(c) for c in body.caught] == [LeaseLost]
    assert beat.held() == {}  # let go: its end is no outcome
    # no renewal after the fence, even with the database back: the copy stays fenced
    cut.down = False
    clock.now += 10
    assert beat.beat().renewed == 0


def test_the_thread_stops_the_body_in_time_while_the_database_hangs(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    """Renewals that never answer (connections frozen): the heartbeat's
    thread does not wait for them, and stops the body at its bound."""
    store.publish_lease_terms(ping_timeout=1.2 * S, grace=S, holder="monitor")
    beat = heartbeat(cut, every=0.2)  # the real clock, a thread of its own
    _, run, _ = started(store, "a", "t")
    try:
        began = time.monotonic()
        body = Body(beat, run, "t")  # (reads the terms: the database still answers)
        cut.hang.set()  # from now on every renewal hangs
        body.thread.join(10)
        took = time.monotonic() - began
        assert [type(c) for c in body.caught] == [LeaseLost]
        assert 0.85 <= took < 0.9 + 0.6, took  # the bound is 0.9 s; well before 1.2 s + 1 s
    finally:
        cut.released.set()
        beat.close()


def test_a_start_answered_after_its_run_was_taken_never_begins(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    """The process asked for the start, then was stopped (or cut off) before
    it read the grant, long enough for the monitor to take the run: the
    body must not begin, even for a class that lets a taken body run on."""
    clock = Clock()
    beat = heartbeat(cut, every=10, clock=clock, background=False)
    asked = clock.now
    _, run, _ = started(store, "a", "t")
    steal(store)  # taken while the answer was on its way
    clock.now += 25  # the grant read 25 s after it was asked: past half the bound
    with pytest.raises(RunTaken, match="before its body began") as raised:
        beat.hold(run.backend_id, "t", stop_when_taken=False, since=asked)
    assert type(raised.value) is RunTaken
    beat.ended(run.backend_id, BodyOutcome(exception=raised.value))
    assert beat.held() == {}
    # the same, the database away when the answer came: past the bound, fenced
    _, other, _ = started(store, "b", "t2")
    asked = clock.now
    clock.now += 25
    cut.down = True
    with pytest.raises(LeaseLost):
        beat.hold(other.backend_id, "t2", since=asked)
    # a slow answer whose run is still its own begins (and is renewed)
    cut.down = False
    _, third, _ = started(store, "c", "t3")
    asked = clock.now
    clock.now += 15
    beat.hold(third.backend_id, "t3", since=asked)
    assert beat.verdict(third.backend_id) is None


def test_an_end_after_a_stall_asks_the_database_and_a_taken_run_is_no_success(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    clock = Clock()
    beat = heartbeat(cut, every=10, clock=clock, background=False)
    _, run, _ = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    steal(store)  # the monitor took it while this process was stopped
    beat.confirm(run.backend_id)  # no stall seen: nothing asked, within its bound
    beat.stalled(12.0)  # the thread woke 12 s late
    with pytest.raises(RunTaken) as raised:
        beat.confirm(run.backend_id)
    assert type(raised.value) is RunTaken
    beat.ended(run.backend_id, BodyOutcome(exception=raised.value))
    assert beat.held() == {}


def test_an_end_after_a_stall_that_kept_its_run_counts(store: SQLAlchemyStore, cut: Cut) -> None:
    clock = Clock()
    beat = heartbeat(cut, every=10, clock=clock, background=False)
    task, run, _ = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    beat.stalled(5.0)
    beat.confirm(run.backend_id)  # asked: still its own (and renewed by the asking)
    [found] = store.get_tasks([task.id or 0])
    assert found.owner_last_ping_at is not None


def test_an_end_past_the_bound_is_never_a_success_whatever_the_database_says(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    clock = Clock()
    beat = heartbeat(cut, every=10, clock=clock, background=False)
    _, run, _ = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    clock.now += 30  # frozen 30 s: past 22.5 s; the body ends before the thread wakes
    with pytest.raises(LeaseLost):
        beat.confirm(run.backend_id)


def test_the_fence_check_refuses_once_the_run_was_taken(store: SQLAlchemyStore, cut: Cut) -> None:
    clock = Clock()
    beat = heartbeat(cut, every=10, clock=clock, background=False)
    _, run, fence = started(store, "a", "t")
    beat.hold(run.backend_id, "t")
    beat.check(run.backend_id, fence.task_id, fence.token)  # its own: passes
    steal(store)  # taken: the token moved at once, no other copy started
    with pytest.raises(RunTaken, match="fencing token"):
        beat.check(run.backend_id, fence.task_id, fence.token)
    assert beat.verdict(run.backend_id) is RunTaken


def test_the_fence_check_lets_the_bound_decide_when_the_database_hangs(
    store: SQLAlchemyStore, cut: Cut
) -> None:
    store.publish_lease_terms(ping_timeout=2 * S, grace=S, holder="monitor")
    beat = heartbeat(cut, every=10, background=False)  # the real clock
    _, run, fence = started(store, "a", "t")
    beat.hold(run.backend_id, "t", stop_when_taken=False)
    assert beat.bound == 1.5
    beat.check_wait = 0.3
    cut.hang.set()
    began = time.monotonic()
    beat.check(run.backend_id, fence.task_id, fence.token)  # no answer: within its bound
    assert 0.3 <= time.monotonic() - began < 1.0
    wait_until(lambda: beat.watch() != () or beat.verdict(run.backend_id), 5, "the bound")
    with pytest.raises(LeaseLost):
        beat.check(run.backend_id, fence.task_id, fence.token)


def test_a_fence_crosses_processes_without_its_question() -> None:
    asked: list[Fence] = []
    fence = Fence(7, 3, _checker=asked.append)
    fence.check()
    assert asked == [fence] and fence == Fence(7, 3)
    again = pickle.loads(pickle.dumps(fence))
    assert again == fence and str(again) == "task 7 start 3"
    with pytest.raises(RuntimeError, match="body of its own run"):
        again.check()
