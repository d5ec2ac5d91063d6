"""The monitor's load measurement (``measure_type_loads``, the load duty):
SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from monitortest import H, plain_type

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TypeLoad
from swh_like_scheduler.monitor import MonitorSettings, monitor_tick
from swh_like_scheduler.store import SQLAlchemyStore

M = timedelta(minutes=1)


def _task(
    store: SQLAlchemyStore, now: datetime, n: int, *, due: timedelta = H, **fields: object
) -> Task:
    [task] = store.create_tasks(
        [
            Task(
                type="plain",
                args=(n,),
                schedule_kind=ScheduleKind.ADAPTIVE,
                next_run=now + due,
                deadline=now + due + H,
                **fields,  # type: ignore[arg-type]
            )
        ],
        now=now - 3 * H,
    )
    assert task.id is not None
    return task


def _world(store: SQLAlchemyStore, now: datetime) -> None:
    plain_type(store)
    plain_type(store, "idle")
    # asks 10 min per 50 + 10 min: 1/6 of a worker; overdue by an hour
    _task(store, now, 1, due=-H, current_interval=50 * M, average_good_duration=10 * M)
    # expected 30 min per (1 h + 30 min): 1/3 of a worker
    _task(store, now, 2, current_interval=H, expected_duration=30 * M)
    # never ran: counts as the mean of the others
    _task(store, now, 3, current_interval=H)
    # overdue by less than the slack: not backlog
    _task(store, now, 4, due=-2 * M, current_interval=H, average_good_duration=0 * M)
    # runs from 90 to 30 min ago (30 min of it in the window), one still
    # going since 10 min ago (10 min), one that ended before the window; of
    # tasks that ask nothing (an average of 0 s)
    spans = ((now - 90 * M, now - 30 * M), (now - 3 * H, now - 2 * H), (now - 10 * M, None))
    for n, (started, ended) in enumerate(spans, 5):
        task = _task(store, now, n, current_interval=H, average_good_duration=0 * M)
        run = store.schedule_task_run(task.id, now=started)  # type: ignore[arg-type]
        store.start_task_run(run.backend_id, started=started, worker="w1")
        if ended is not None:
            store.end_task_run(run.backend_id, status=RunStatus.EVENTFUL, ended=ended)
    # a periodic task's run is not the adaptive tasks' work
    [periodic] = store.create_tasks(
        [
            Task(
                type="plain",
                args=(9,),
                schedule_kind=ScheduleKind.PERIODIC,
                period=H,
                next_run=now - 2 * H,
                deadline=now,
            )
        ],
        now=now - 3 * H,
    )
    run = store.schedule_task_run(periodic.id, now=now - 20 * M)  # type: ignore[arg-type]
    store.start_task_run(run.backend_id, started=now - 20 * M, worker="w2")
    store.end_task_run(run.backend_id, status=RunStatus.EVENTFUL, ended=now - 5 * M)


def test_a_type_s_load_is_measured_and_kept_on_it(store: SQLAlchemyStore, now: datetime) -> None:
    _world(store, now)
    loads = store.measure_type_loads(now=now, window=H, slack=5 * M)
    plain = loads["plain"]
    # 6 of the 7 tasks have a known duration (the others' 0 s asks nothing)
    assert plain.demand == pytest.approx((1 / 6 + 1 / 3) * 7 / 6)
    assert plain.delivered == pytest.approx((30 + 10) / 60)
    assert plain.backlog == 1
    assert plain.measured_at == now
    assert plain.pressure == pytest.approx(plain.demand / plain.delivered)
    assert loads["idle"] == TypeLoad(0.0, 0.0, 0, now)
    kept = store.get_task_type("plain")
    assert kept is not None and kept.load == plain
    # a longer window holds all of the first run and the older one: 60 + 60 + 10 min over 3 h
    longer = store.measure_type_loads(now=now, window=3 * H, slack=5 * M)["plain"]
    assert longer.delivered == pytest.approx(130 / 180)


def test_the_measurement_is_the_monitor_s(store: SQLAlchemyStore, now: datetime) -> None:
    plain_type(store)
    with pytest.raises(InvalidInput, match="load_demand"):
        store.update_task_type("plain", load_demand=1.0)
    with pytest.raises(InvalidInput, match="load_window"):
        store.measure_type_loads(now=now, window=timedelta(0), slack=M)
    with pytest.raises(InvalidInput, match="load_slack"):
        store.measure_type_loads(now=now, window=H, slack=-M)
    with pytest.raises(InvalidInput, match="now"):
        store.measure_type_loads(now=now.replace(tzinfo=None), window=H, slack=M)


def test_the_monitor_measures_every_load_every(store: SQLAlchemyStore, now: datetime) -> None:
    _world(store, now)
    settings = MonitorSettings(load_every=5 * M, holder="m1")
    assert monitor_tick(store, now, settings=settings).loads_measured == 2
    first = store.get_task_type("plain")
    assert first is not None and first.load_measured_at == now
    # not due yet: nothing measured
    assert monitor_tick(store, now + 4 * M, settings=settings).loads_measured == 0
    report = monitor_tick(store, now + 5 * M, settings=settings)
    assert report.loads_measured == 2 and "load of 2 task type(s)" in report.summary()
    later = store.get_task_type("plain")
    assert later is not None and later.load_measured_at == now + 5 * M
    with pytest.raises(InvalidInput, match="load_window"):
        MonitorSettings(load_window=timedelta(0))
