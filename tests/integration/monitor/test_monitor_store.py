"""The monitor's store calls (contract style: SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from monitortest import H, S, adaptive_task, applier, oneshot, plain_type, run_of, run_on, task_of
from waiting import wait_until

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import Priority, RunStatus, TaskStatus
from swh_like_scheduler.monitor import WorkerSighting, WorkerState
from swh_like_scheduler.store import SQLAlchemyStore, sql_health

W1, W2, W3 = "w1@node-a", "w2@node-b", "w3@node-c"


# -- workers -------------------------------------------------------------------


def test_worker_events_keep_the_latest_per_worker(store: SQLAlchemyStore, now: datetime) -> None:
    store.record_worker_sightings(
        [
            WorkerSighting(W1, now, True, 2.0),
            WorkerSighting(W1, now + 2 * S, True, 2.0),
            WorkerSighting(W2, now, True),
        ]
    )
    assert store.get_workers() == [
        WorkerState(W1, now + 2 * S, True, 2.0),
        WorkerState(W2, now, True, None),
    ]
    # out of order: an older event changes nothing
    store.record_worker_sightings([WorkerSighting(W1, now + S, False)])
    assert store.get_workers()[0] == WorkerState(W1, now + 2 * S, True, 2.0)
    # offline, without a freq: the known freq is kept
    store.record_worker_sightings([WorkerSighting(W1, now + 3 * S, False)])
    assert store.get_workers()[0] == WorkerState(W1, now + 3 * S, False, 2.0)
    # back online (restarted under the same name)
    store.record_worker_sightings([WorkerSighting(W1, now + 9 * S, True, 5.0)])
    assert store.get_workers()[0] == WorkerState(W1, now + 9 * S, True, 5.0)
    store.record_worker_sightings([])


def test_offline_worker_loses_its_plain_runs(store: SQLAlchemyStore) -> None:
    plain_type(store)
    plain_type(store, "leased", uses_lease=True)
    t0 = datetime.now(UTC).replace(microsecond=0)
    apply = applier(store)
    lost_task, lost = run_on(store, t0, 1, W1, started=t0 - 10 * S)
    _, other_worker = run_on(store, t0, 2, W2, started=t0 - 10 * S)
    _, later = run_on(store, t0, 3, W1, started=t0 + 90 * S)  # a restarted W1's run
    _, unstarted = run_on(store, t0, 4, None)
    owned_task, owned = run_on(store, t0, 5, None, type="leased")
    assert store.acquire_lease(owned.backend_id, node="node-a", name="w1", tag="t1").granted
    assert run_of(store, owned).worker == W1

    at = t0 + 60 * S
    ended = store.end_worker_runs(W1, at=at, apply=apply)
    assert [r.backend_id for r in ended] == [lost.backend_id]
    run = run_of(store, lost)
    assert run.status is RunStatus.LOST and run.ended == at
    assert run.error and W1 in run.error and "offline" in run.error
    assert [h["event"] for h in run.history] == ["worker_offline"]
    task = task_of(store, lost_task)
    # the policy's neutral outcome: runnable again at once, nothing counted
    assert task.status is TaskStatus.WAITING and task.next_run <= at
    assert task.failure_count == 0 and task.last_end_at == at
    assert store.claim_ready_tasks("plain", now=at, limit=10)[0].task_id == lost_task.id
    for untouched in (other_worker, later, unstarted, owned):
        assert run_of(store, untouched).status.is_open
    assert task_of(store, owned_task).owner_tag == "t1"
    assert store.end_worker_runs(W1, at=at, apply=apply) == []  # idempotent


def test_silent_workers_are_marked_offline(store: SQLAlchemyStore, now: datetime) -> None:
    plain_type(store)
    apply = applier(store)
    store.record_worker_sightings(
        [
            WorkerSighting(W1, now, True, 2.0),
            WorkerSighting(W2, now + 100 * S, True, 2.0),
            WorkerSighting(W3, now, True, 100.0),  # a slow heartbeat: 300 s allowed
        ]
    )
    _, on_w1 = run_on(store, now, 1, W1, started=now - S)
    _, on_w2 = run_on(store, now, 2, W2, started=now)
    # the default timeout is the longer of 3 heartbeats and 180 s
    assert store.sweep_silent_workers(now=now + 170 * S, apply=apply).marked_offline == ()
    sweep = store.sweep_silent_workers(now=now + 181 * S, apply=apply)
    assert sweep.marked_offline == (W1,)
    assert [r.backend_id for r in sweep.lost] == [on_w1.backend_id]
    assert run_of(store, on_w1).ended == now + 181 * S
    assert run_of(store, on_w1).history[-1]["detail"] == "no heartbeat"
    assert run_of(store, on_w2).status is RunStatus.STARTED
    assert store.sweep_silent_workers(now=now + 301 * S, apply=apply).marked_offline == (W2, W3)
    # a given timeout applies to every worker
    store.record_worker_sightings([WorkerSighting(W1, now + 400 * S, True, 2.0)])
    assert store.sweep_silent_workers(now=now + 404 * S, timeout=5 * S).marked_offline == ()
    assert store.sweep_silent_workers(now=now + 406 * S, timeout=5 * S).marked_offline == (W1,)
    with pytest.raises(InvalidInput, match="worker_timeout"):
        store.sweep_silent_workers(now=now, timeout=timedelta(0))


def test_sweep_ends_the_runs_left_open_by_an_offline_event(
    store: SQLAlchemyStore, now: datetime
) -> None:
    plain_type(store)
    apply = applier(store)
    store.record_worker_sightings([WorkerSighting(W1, now, False, 2.0)])  # went offline at now
    _, left_open = run_on(store, now, 1, W1, started=now - 5 * S)
    _, restarted = run_on(store, now, 2, W1, started=now + 30 * S)  # online event lost
    sweep = store.sweep_silent_workers(now=now + 60 * S, timeout=60 * S, apply=apply)
    assert sweep.marked_offline == ()
    assert [r.backend_id for r in sweep.lost] == [left_open.backend_id]
    assert run_of(store, restarted).status is RunStatus.STARTED
    # ... until it has been silent as long as the timeout allows
    later = store.sweep_silent_workers(now=now + 91 * S, timeout=60 * S, apply=apply)
    assert [r.backend_id for r in later.lost] == [restarted.backend_id]


def test_a_restarted_worker_puts_its_old_process_copies_on_notice_only(
    store: SQLAlchemyStore,
) -> None:
    """The event that tells of a worker's new process may come after that
    process started runs (a lost worker-online, a late heartbeat), or the
    "old" process may still be alive (two processes under one name, a pool
    process that outlived its main one). A restart ends no guarded run: the
    copies its assigned entry gives to another process are put on notice
    (they must renew within the steal grace), the new process's are left
    alone (found by the soak: a run of the new process ended lost, its task
    dispatched again while its body ran)."""
    plain_type(store)
    t0 = datetime.now(UTC)
    apply = applier(store)
    runs = {}
    for n, pid in ((1, 100), (2, 200), (3, None)):
        _, run = run_on(store, t0, n, None)
        grant = store.guard_start(run.backend_id, node="node-a", name="w1", tag=f"t{n}", pid=pid)
        assert grant.granted
        runs[pid] = run
    assert [h["pid"] for h in run_of(store, runs[100]).history if h["event"] == "assigned"] == [100]
    # the new process 200 is seen an hour later: runs 100 and None are the old process's
    assert store.end_worker_runs(W1, at=t0 + H, apply=apply, pid=200) == []
    noticed = {pid: [h["event"] for h in run_of(store, run).history] for pid, run in runs.items()}
    assert noticed == {
        100: ["assigned", "pinged_late"],
        200: ["assigned"],
        None: ["assigned", "pinged_late"],
    }
    assert all(run_of(store, run).status is RunStatus.STARTED for run in runs.values())
    # the old process's copy 100 is alive after all: it renews and keeps its run
    assert store.renew_runs([(runs[100].backend_id, "t1")])
    time.sleep(0.01)
    report = store.steal_expired_leases(ping_timeout=H, grace=S / 1000, apply=apply)
    assert [r.backend_id for r in report.stolen] == [runs[None].backend_id]
    assert run_of(store, runs[100]).status is RunStatus.STARTED


def test_sweep_leaves_leased_runs_to_the_steal_protocol(store: SQLAlchemyStore) -> None:
    plain_type(store, "leased", uses_lease=True)
    t0 = datetime.now(UTC)
    task, run = run_on(store, t0, 1, None, type="leased")
    assert store.acquire_lease(run.backend_id, node="node-a", name="w1", tag="t1").granted
    store.record_worker_sightings([WorkerSighting(W1, t0 - H, True, 2.0)])
    sweep = store.sweep_silent_workers(now=t0 + H, apply=applier(store))
    assert sweep.marked_offline == (W1,) and sweep.lost == ()
    assert run_of(store, run).status is RunStatus.STARTED
    assert task_of(store, task).owner_tag == "t1"


# -- one-shot expiry ---------------------------------------------------------------


def test_oneshot_tasks_past_their_max_delay_expire_once_a_runner_had_room(
    store: SQLAlchemyStore, now: datetime
) -> None:
    task_type = plain_type(store)
    late = oneshot(store, task_type, now - 10 * S, 1, max_delay=5 * S)
    in_delay = oneshot(store, task_type, now - 10 * S, 2, max_delay=60 * S)
    exact = oneshot(store, task_type, now - 10 * S, 3, max_delay=timedelta(0))
    no_delay = oneshot(store, task_type, now - H, 7)  # no max_delay: never expires
    future = oneshot(store, task_type, now + H, 4, max_delay=S)
    dispatched = oneshot(store, task_type, now - 10 * S, 5, max_delay=S)
    store.schedule_task_run(dispatched.id or 0, now=now - 10 * S)
    recurring = adaptive_task(store, now - 2 * H, 6)  # overdue, but recurring
    # no runner pass had room since their deadlines: nothing expires
    assert store.expire_oneshot_tasks(now=now) == []
    store.record_room(task_type.type, at=now - 30 * S)  # a pass before the deadlines
    assert store.expire_oneshot_tasks(now=now) == []
    store.record_room(task_type.type, at=now - S)
    store.record_room(task_type.type, at=now - 20 * S)  # an older pass changes nothing
    assert store.expire_oneshot_tasks(now=now, grace=11 * S) == []
    # the room must come after the deadline and the grace
    assert store.expire_oneshot_tasks(now=now, grace=9 * S) == []
    expired = store.expire_oneshot_tasks(now=now, grace=6 * S)  # late is only 5 s over
    assert [e.task.id for e in expired] == [exact.id]
    assert expired[0].should_start_by == now - 10 * S
    expired = store.expire_oneshot_tasks(now=now)
    assert [e.task.id for e in expired] == [late.id]
    assert expired[0].should_start_by == now - 5 * S
    assert store.expire_oneshot_tasks(now=now) == []
    for gone in (late, exact):
        task = task_of(store, gone)
        assert task.status is TaskStatus.DISABLED
        [run] = store.get_task_runs(gone.id or 0)
        assert run.status is RunStatus.CANCELLED and run.started is None
        assert run.error and run.error.startswith("expired: ")
        assert "had room at" in run.error
        assert [h["event"] for h in run.history] == ["expired"]
    for kept in (in_delay, future, recurring, no_delay):
        assert task_of(store, kept).status is TaskStatus.WAITING
    assert task_of(store, dispatched).status is TaskStatus.SCHEDULED
    assert store.schedule_health(now=now).expired == {task_type.type: 2}
    # an operator may give it another chance: its slot is not the expired one
    store.enable_tasks([exact.id or 0], now=now)
    claimed = store.claim_ready_tasks(task_type.type, now=now, limit=10)
    assert exact.id in [c.task_id for c in claimed]
    with pytest.raises(InvalidInput, match="oneshot_expiry_grace"):
        store.expire_oneshot_tasks(now=now, grace=-S)


def test_room_is_kept_per_priority_class(store: SQLAlchemyStore, now: datetime) -> None:
    task_type = plain_type(store)
    task = oneshot(store, task_type, now - H, 1, max_delay=S)
    store.record_room(task_type.type, at=now, priorities=[Priority.HIGH])
    assert store.expire_oneshot_tasks(now=now) == []  # a normal task: no room for it
    store.record_room(task_type.type, at=now, priorities=[Priority.NORMAL, Priority.LOW])
    assert [e.task.id for e in store.expire_oneshot_tasks(now=now)] == [task.id]


def test_a_failed_oneshot_awaiting_its_retry_does_not_expire(
    store: SQLAlchemyStore, now: datetime
) -> None:
    task_type = plain_type(store, num_retries=2)
    task = oneshot(store, task_type, now - H, 1, max_delay=S)
    run = store.schedule_task_run(task.id or 0, now=now - H)
    store.start_task_run(run.backend_id, started=now - H, worker=W1)
    store.end_task_run(
        run.backend_id, status=RunStatus.FAILED, ended=now - H + S, apply=applier(store)
    )
    assert task_of(store, task).status is TaskStatus.WAITING
    store.record_room(task_type.type, at=now + H)
    assert store.expire_oneshot_tasks(now=now + H) == []


def test_a_room_pass_counts_only_if_it_began_after_the_task_was_created(
    store: SQLAlchemyStore, now: datetime
) -> None:
    task_type = plain_type(store)
    # created 10 s ago, an hour past its max_delay already
    late = oneshot(store, task_type, now - H, 1, max_delay=S, created=now - 10 * S)
    store.record_room(task_type.type, at=now - 20 * S)  # began before it existed
    assert store.expire_oneshot_tasks(now=now) == []
    store.record_room(task_type.type, at=now - 10 * S)  # began as it was created
    assert store.expire_oneshot_tasks(now=now) == []
    store.record_room(task_type.type, at=now - 5 * S)  # began after: it had its chance
    [expiry] = store.expire_oneshot_tasks(now=now)
    assert expiry.task.id == late.id
    assert expiry.run.history[0]["room_at"] == (now - 5 * S).isoformat()
    assert expiry.run.error and "had room at 2026-03-01T11:59:55+00:00" in expiry.run.error


def test_a_oneshot_enabled_again_waits_for_a_room_pass_begun_after_that(
    store: SQLAlchemyStore, now: datetime
) -> None:
    task_type = plain_type(store)
    task = oneshot(store, task_type, now - H, 1, max_delay=S)  # created 2 h ago
    store.disable_tasks([task.id or 0], now=now - 30 * S)
    store.record_room(task_type.type, at=now - 20 * S)
    assert store.expire_oneshot_tasks(now=now) == []  # disabled: not waiting
    store.enable_tasks([task.id or 0], now=now - 10 * S)
    assert store.expire_oneshot_tasks(now=now) == []  # that pass began before
    store.record_room(task_type.type, at=now - S)
    assert [e.task.id for e in store.expire_oneshot_tasks(now=now)] == [task.id]


# -- the lock ------------------------------------------------------------------------


def test_lock_is_held_by_one_holder_until_it_expires(store: SQLAlchemyStore, db_url: str) -> None:
    other = SQLAlchemyStore.from_url(db_url)  # another process's connections
    try:
        first = store.acquire_lock("monitor", holder="a", ttl=S)
        assert first.held and first.holder == "a"
        assert first.expires_at is not None and first.expires_at > first.db_now
        refused = other.acquire_lock("monitor", holder="b", ttl=S)
        assert not refused.held and refused.holder == "a"
        assert refused.expires_at == first.expires_at
        renewed = store.acquire_lock("monitor", holder="a", ttl=S)
        assert renewed.held and renewed.expires_at is not None
        assert renewed.expires_at > first.expires_at
        assert other.acquire_lock("other-lock", holder="b", ttl=S).held  # locks are named
        # "a" stops renewing: "b" takes over once its time ran out, not before
        wait_until(
            lambda: other.acquire_lock("monitor", holder="b", ttl=S).held, 5, "b to take over"
        )
        taken = other.acquire_lock("monitor", holder="b", ttl=S)
        assert taken.db_now >= renewed.expires_at
        assert not store.acquire_lock("monitor", holder="a", ttl=S).held
        assert not store.release_lock("monitor", holder="a")
        assert other.release_lock("monitor", holder="b")
        assert store.acquire_lock("monitor", holder="a", ttl=S).held  # at once
        with pytest.raises(InvalidInput, match="lock_ttl"):
            store.acquire_lock("monitor", holder="a", ttl=timedelta(0))
    finally:
        other.close()


def test_runs_dispatched_within_the_hour_are_counted_per_type(
    store: SQLAlchemyStore, now: datetime
) -> None:
    plain_type(store)
    plain_type(store, "other")
    old = store.schedule_task_run(adaptive_task(store, now, 1).id or 0, now=now - 2 * H)
    store.end_task_run(old.backend_id, status=RunStatus.EVENTFUL, ended=now - 90 * 60 * S)
    store.schedule_task_run(adaptive_task(store, now, 2).id or 0, now=now - 2 * H)  # still open
    store.schedule_task_run(adaptive_task(store, now, 3).id or 0, now=now - 30 * 60 * S)
    ended = store.schedule_task_run(adaptive_task(store, now, 4).id or 0, now=now - 40 * 60 * S)
    store.end_task_run(ended.backend_id, status=RunStatus.FAILED, ended=now - 10 * 60 * S)
    long_run = store.schedule_task_run(adaptive_task(store, now, 5).id or 0, now=now - 2 * H)
    store.end_task_run(long_run.backend_id, status=RunStatus.EVENTFUL, ended=now - 5 * 60 * S)
    store.schedule_task_run(adaptive_task(store, now, 6, "other").id or 0, now=now - 60 * S)
    figures = store.schedule_health(now=now)
    # open since 30 min, and dispatched 40 min ago then ended; not those
    # dispatched 2 h ago (ended or open)
    assert figures.dispatched == {"plain": 2, "other": 1}
    assert figures.ended_runs[("plain", "failed")] == 1
    assert store.schedule_health(now=now, runs=False).dispatched == {}


@pytest.mark.parametrize("page", [1000, 1, 2])
def test_runs_waiting_in_the_broker_are_counted_up_to_a_bound_oldest_deadline_exact(
    store: SQLAlchemyStore, now: datetime, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_health, "_WALK_PAGE", page)  # walked in pages of that many
    plain_type(store)
    runs = []
    for n in range(4):  # deadlines one minute apart, the first the earliest
        task = adaptive_task(store, now, n, deadline=now - 10 * 60 * S + n * 60 * S)
        runs.append(store.schedule_task_run(task.id or 0, now=now - 60 * S))
    # the earliest has started: it no longer waits in the broker
    store.start_task_run(runs[0].backend_id, started=now - 30 * S, worker="w")
    second = now - 9 * 60 * S
    assert store.schedule_health(now=now).queued == {"plain": (3, second)}
    assert store.schedule_health(now=now, queued_upto=2).queued == {"plain": (2, second)}
    assert store.schedule_health(now=now, queued_upto=0).queued == {}
    store.start_task_run(runs[1].backend_id, started=now - 20 * S, worker="w")
    assert store.schedule_health(now=now, queued_upto=1).queued == {"plain": (1, second + 60 * S)}
    with pytest.raises(InvalidInput, match="queued_upto"):
        store.schedule_health(now=now, queued_upto=-1)
