"""monitor_tick: every duty in one pass, the lock between monitors, the
listener's worker events, and the command line (start-monitor, start-runner)."""

from __future__ import annotations

import json
import logging
import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import services
from click.testing import CliRunner
from monitortest import H, S, applier, oneshot, plain_type, run_of, run_on, task_of
from waiting import wait_until

from swh_like_scheduler.cli import swh
from swh_like_scheduler.domain.model import RunStatus, TaskStatus
from swh_like_scheduler.listener import Action, EventHandler
from swh_like_scheduler.monitor import (
    MONITOR_LOCK,
    MonitorReport,
    MonitorSettings,
    WorkerSighting,
    monitor_tick,
)
from swh_like_scheduler.monitor.duties import monitor_loop
from swh_like_scheduler.store import SQLAlchemyStore

W1, W2 = "w1@node-a", "w2@node-b"
D = timedelta(days=1)


def test_one_pass_does_every_duty(store: SQLAlchemyStore, now: datetime) -> None:
    task_type = plain_type(store)
    apply = applier(store)
    store.record_worker_sightings([WorkerSighting(W1, now - H, True, 2.0)])
    silent_task, silent_run = run_on(store, now, 1, W1, started=now - H)
    late = oneshot(store, task_type, now - H, 2, max_delay=S)
    store.record_room(task_type.type, at=now - S)  # a runner had room since
    oneshot(store, task_type, now - H, 6)  # no max_delay: never expires
    _, old = run_on(store, now - 3 * D, 3, W2, started=now - 3 * D)
    store.end_task_run(old.backend_id, status=RunStatus.EVENTFUL, ended=now - 3 * D, apply=apply)
    _, never_started = run_on(store, now - 5 * D, 4, None)  # open: never deleted
    done = oneshot(store, task_type, now - 4 * D, 5)
    done_run = store.schedule_task_run(done.id or 0, now=now - 4 * D)
    store.end_task_run(
        done_run.backend_id, status=RunStatus.EVENTFUL, ended=now - 3 * D, apply=apply
    )
    assert task_of(store, done).status is TaskStatus.COMPLETED
    settings = MonitorSettings(
        worker_timeout=60 * S, keep_runs=2 * D, keep_finished_oneshots=2 * D, holder="me"
    )

    # another process is the monitor: nothing is done
    assert store.acquire_lock(MONITOR_LOCK, holder="someone", ttl=H).held
    skipped = monitor_tick(store, now, settings=settings, apply=apply)
    assert not skipped.is_monitor and skipped.skipped == "not the monitor"
    assert skipped.summary().startswith("skipped: not the monitor (held by someone until ")
    assert skipped.to_json()["monitor"] is False
    assert run_of(store, silent_run).status is RunStatus.STARTED
    assert store.release_lock(MONITOR_LOCK, holder="someone")

    report = monitor_tick(store, now, settings=settings, apply=apply)
    assert report.is_monitor and report.lock.holder == "me"
    assert report.offline.marked_offline == (W1,)
    assert [r.backend_id for r in report.offline.lost] == [silent_run.backend_id]
    assert task_of(store, silent_task).status is TaskStatus.WAITING
    assert [e.task.id for e in report.expired] == [late.id]
    assert (report.runs_deleted, report.oneshots_deleted, report.republished) == (2, 1, 0)
    assert store.get_task_run(old.backend_id) is None
    assert store.get_tasks([done.id or 0]) == []
    assert run_of(store, never_started).status is RunStatus.SCHEDULED
    data = report.to_json()
    assert data["workers_offline"] == [W1]
    assert data["offline_runs_lost"] == [silent_run.backend_id]
    assert data["expired"] == [late.id] and data["runs_deleted"] == 2
    json.dumps(data)
    again = monitor_tick(store, now, settings=settings, apply=apply)
    assert again.is_monitor and again.summary() == (
        "0 lease(s) put on notice, 0 run(s) lost; 0 silent worker(s) marked offline, "
        "0 of their run(s) lost; 0 one-shot task(s) expired; 0 old run(s) and 0 finished "
        "one-shot task(s) deleted; 0 run(s) re-published"
    )


def test_exactly_one_of_two_monitors_does_the_duties(db_url: str) -> None:
    stores = {name: SQLAlchemyStore.from_url(db_url) for name in ("m1", "m2")}
    passes: dict[str, list[MonitorReport]] = {name: [] for name in stores}
    stops = {name: threading.Event() for name in stores}
    errors: list[BaseException] = []

    def monitor(name: str) -> None:
        settings = MonitorSettings(holder=name, lock_ttl=S, period=timedelta(seconds=0.1))
        try:
            while not stops[name].is_set():
                passes[name].append(monitor_tick(stores[name], settings=settings))
                stops[name].wait(0.1)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = {n: threading.Thread(target=monitor, args=(n,), daemon=True) for n in stores}
    try:
        for thread in threads.values():
            thread.start()
        wait_until(lambda: min(len(p) for p in passes.values()) >= 5 or errors, 10, "passes")
        assert not errors, errors
        holders = [n for n, reports in passes.items() if any(r.is_monitor for r in reports)]
        assert len(holders) == 1, holders
        [holder] = holders
        [waiting] = [n for n in stores if n != holder]
        assert all(r.skipped == "not the monitor" for r in passes[waiting])
        # the holder stops renewing (a crash: no release); the other takes over
        stops[holder].set()
        threads[holder].join(timeout=10)
        last = [r for r in passes[holder] if r.is_monitor][-1]
        wait_until(lambda: passes[waiting][-1].is_monitor or errors, 5, "the take-over")
        assert not errors, errors
        first = next(r for r in passes[waiting] if r.is_monitor)
        assert last.lock.expires_at is not None
        assert first.lock.db_now >= last.lock.expires_at  # never two monitors at once
    finally:
        for stop in stops.values():
            stop.set()
        for thread in threads.values():
            thread.join(timeout=10)
        for store in stores.values():
            store.close()


def test_listener_records_workers_and_an_offline_worker_loses_its_runs(
    store: SQLAlchemyStore, now: datetime
) -> None:
    plain_type(store)
    _, ends_well = run_on(store, now, 1, W1, started=now - 10 * S)
    lost_task, lost = run_on(store, now, 2, W1, started=now - 10 * S)
    _, elsewhere = run_on(store, now, 3, W2, started=now - 10 * S)
    handler = EventHandler(store, rng=random.Random(0))
    ts = now.timestamp()
    heartbeat = {"type": "worker-heartbeat", "hostname": W1, "timestamp": ts, "freq": 2.0}
    assert handler.handle(heartbeat).action is Action.IGNORED  # not a run event
    summary = handler.handle_batch(
        [
            heartbeat,
            {"type": "worker-online", "hostname": W2, "timestamp": ts},
            {
                "type": "task-succeeded",
                "uuid": ends_well.backend_id,
                "hostname": W1,
                "timestamp": ts + 1,
                "result": "{'status': 'eventful'}",
                "runtime": 11.0,
            },
            # a warm shutdown: the worker says it goes offline
            {"type": "worker-offline", "hostname": W1, "timestamp": ts + 2, "freq": 2.0},
        ]
    )
    assert summary[Action.WORKER] == 3 and summary[Action.ENDED] == 1
    assert run_of(store, ends_well).status is RunStatus.EVENTFUL  # run events come first
    # a warm shutdown finishes its runs after saying offline: nothing ends yet
    assert run_of(store, lost).status is RunStatus.STARTED
    workers = {w.hostname: w for w in store.get_workers()}
    assert not workers[W1].online and workers[W1].last_heartbeat_at == now + 2 * S
    assert workers[W2].online and workers[W2].freq is None
    # the monitor ends them once the grace is over
    apply = applier(store)
    grace = 60 * S
    within = store.sweep_silent_workers(now=now + 50 * S, timeout=H, offline_grace=grace)
    assert within.lost == ()
    after = now + 63 * S
    swept = store.sweep_silent_workers(now=after, timeout=H, offline_grace=grace, apply=apply)
    assert [r.backend_id for r in swept.lost] == [lost.backend_id]
    run = run_of(store, lost)
    assert run.status is RunStatus.LOST and run.ended == after
    assert run.history[-1]["event"] == "worker_offline"
    assert task_of(store, lost_task).status is TaskStatus.WAITING
    assert task_of(store, lost_task).next_run <= after
    assert run_of(store, elsewhere).status is RunStatus.STARTED


def test_a_worker_back_from_a_crash_under_its_name_loses_the_old_runs(
    store: SQLAlchemyStore, now: datetime
) -> None:
    """kill -9, then the same ``-n name@node`` again: once the old process
    has been silent for the restart silence (10 s) while the new one (another
    pid) sends, the old process's runs end, as of the new one's first event;
    a broker reconnect (offline, online, same pid) ends nothing."""
    plain_type(store)
    lost_task, old = run_on(store, now, 1, W1, started=now - 10 * S)
    handler = EventHandler(store, rng=random.Random(0))
    ts = now.timestamp()
    hello = {"type": "worker-online", "hostname": W1, "timestamp": ts - 20, "pid": 41}
    handler.handle_batch([hello])
    reconnect = [
        {"type": "worker-offline", "hostname": W1, "timestamp": ts, "pid": 41},
        {"type": "worker-online", "hostname": W1, "timestamp": ts + 1, "pid": 41},
    ]
    handler.handle_batch(reconnect)
    assert run_of(store, old).status is RunStatus.STARTED
    back = {"type": "worker-online", "hostname": W1, "timestamp": ts + 5, "pid": 97}
    handler.handle_batch([back])
    assert run_of(store, old).status is RunStatus.STARTED  # 41 may be alive still
    beat = {"type": "worker-heartbeat", "hostname": W1, "timestamp": ts + 12, "pid": 97}
    handler.handle_batch([beat])
    run = run_of(store, old)
    assert run.status is RunStatus.LOST and run.ended == now + 5 * S
    assert run.history[-1]["event"] == "worker_offline"
    assert task_of(store, lost_task).status is TaskStatus.WAITING
    [state] = [w for w in store.get_workers() if w.hostname == W1]
    assert state.online and state.pid == 97


def invoke(db_url: str, *args: str) -> Any:
    return CliRunner().invoke(swh, ["scheduler", "--db-url", db_url, *args])


def silent_worker_run(store: SQLAlchemyStore) -> str:
    plain_type(store)
    t0 = datetime.now(UTC)
    store.record_worker_sightings([WorkerSighting(W1, t0 - H, True, 2.0)])
    return run_on(store, t0, 1, W1, started=t0 - H)[1].backend_id


def test_start_monitor_once(store: SQLAlchemyStore, db_url: str) -> None:
    backend_id = silent_worker_run(store)
    assert store.acquire_lock(MONITOR_LOCK, holder="someone", ttl=H).held
    skipped = invoke(db_url, "start-monitor", "--once", "--republish-after", "0")
    assert skipped.exit_code == 0, skipped.output
    assert "skipped: not the monitor (held by someone until" in skipped.output
    store.release_lock(MONITOR_LOCK, holder="someone")
    args = ["start-monitor", "--once", "--json", "--worker-timeout", "60", "--keep-runs", "7"]
    result = invoke(db_url, *args, "--republish-after", "0")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["monitor"] is True and data["offline_runs_lost"] == [backend_id]
    assert data["workers_offline"] == [W1]
    # the lock was released on exit: another monitor may start at once
    assert store.acquire_lock(MONITOR_LOCK, holder="someone", ttl=H).held

    bad = invoke(db_url, "start-monitor", "--once", "--keep-runs", "0")
    assert bad.exit_code == 2 and "Invalid value for '--keep-runs'" in bad.output
    bad = invoke(db_url, "start-monitor", "--once", "--lock-ttl", "5", "--period", "10")
    assert bad.exit_code == 2 and "--lock-ttl" in bad.output and "--period" in bad.output
    bad = invoke(db_url, "start-monitor", "--once", "--republish-after", "soon")
    assert bad.exit_code == 2 and "republish-after" in bad.output


@pytest.mark.redis
def test_start_runner_once_takes_its_turn_at_the_duties(
    store: SQLAlchemyStore, db_url: str
) -> None:
    backend_id = silent_worker_run(store)
    runner = ["start-runner", "--once", "--json", "--broker-url", services.redis_url()]
    off = invoke(db_url, *runner, "--no-monitor", "--worker-timeout", "60")
    assert off.exit_code == 0, off.output
    assert json.loads(off.output)["monitor"] is None
    assert status_of(store, backend_id) is RunStatus.STARTED
    result = invoke(db_url, *runner, "--worker-timeout", "60", "--republish-after", "10 min")
    assert result.exit_code == 0, result.output
    monitor = json.loads(result.output)["monitor"]
    assert monitor["monitor"] is True and monitor["offline_runs_lost"] == [backend_id]
    assert status_of(store, backend_id) is RunStatus.LOST
    # another runner holds the lock: this one only dispatches
    assert store.acquire_lock(MONITOR_LOCK, holder="other-runner", ttl=H).held
    text = invoke(db_url, "start-runner", "--once", "--broker-url", services.redis_url())
    assert text.exit_code == 0, text.output
    assert "monitor: skipped: not the monitor (held by other-runner" in text.output


def status_of(store: SQLAlchemyStore, backend_id: str) -> RunStatus:
    run = store.get_task_run(backend_id)
    assert run is not None
    return run.status


def test_a_monitor_without_its_database_logs_one_line_and_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The database unreachable for many passes: one error line (no
    traceback), the loop keeps passing, and stops when asked."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    store = SQLAlchemyStore.from_url(f"postgresql://postgres@127.0.0.1:{closed}/nowhere")
    settings = MonitorSettings(period=timedelta(seconds=0.05), lock_ttl=timedelta(seconds=1))
    stop = threading.Event()
    caplog.set_level(logging.DEBUG, logger="swh_like_scheduler")
    thread = threading.Thread(target=monitor_loop, args=(store, settings), kwargs={"stop": stop})
    thread.start()
    try:
        wait_until(
            lambda: sum("failed again" in r.getMessage() for r in caplog.records) >= 5,
            20,
            "several failed passes",
        )
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(timeout=10)
        store.close()
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR and "monitor" in r.getMessage()]
    assert len(loud) == 1 and loud[0].exc_info is None
    assert "monitor pass failed" in loud[0].getMessage()
