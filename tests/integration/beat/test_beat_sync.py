"""``celery beat -S swh``'s import of ``beat_schedule`` at start, and its
retries (:class:`~swh_like_scheduler.beat.sync.BeatScheduleSync`)."""

from __future__ import annotations

import logging
import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import services
from celery import Celery

from swh_like_scheduler.beat.sync import BeatScheduleSync
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import RunStatus, TaskStatus, TaskType
from swh_like_scheduler.recording import TaskTypeCache, outcome_applier
from swh_like_scheduler.store import SQLAlchemyStore

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def beat_app(args: tuple[str, ...] = ("a",), **settings: object) -> Celery:
    app = Celery("beat-sync-test", set_as_current=False)
    app.conf.beat_schedule = {"ping": {"task": "proj.ping", "schedule": 30, "args": args}}
    app.conf.update(settings)
    return app


def test_a_busy_entry_is_imported_once_its_run_ended(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    caplog.set_level(logging.INFO, logger="swh_like_scheduler.beat.sync")
    try:
        BeatScheduleSync(beat_app(swh_scheduler_beat_create_types=True), store).start(NOW)
        assert "beat_schedule: entry 'ping': task 1 created (type proj.ping" in caplog.text
        run = store.schedule_task_run(1, now=NOW)  # dispatched: the run is open
        sync = BeatScheduleSync(beat_app(("b",)), store, retry_every=0)
        sync.start(NOW)
        assert sync.pending
        assert "entry 'ping': busy, task 1 has a run open" in caplog.text
        sync.retry(NOW)
        assert sync.pending and store.get_tasks([1])[0].args == ("a",)
        applier = outcome_applier(TaskTypeCache(store), random.Random(0))
        store.end_task_run(
            run.backend_id, status=RunStatus.UNEVENTFUL, ended=NOW + timedelta(1), apply=applier
        )
        sync.retry(NOW + timedelta(seconds=2))
        assert not sync.pending
        task = store.get_tasks([1])[0]
        assert (task.args, task.status) == (("b",), TaskStatus.WAITING)
        assert "entry 'ping': task 1 updated (args: ['a'] -> ['b'])" in caplog.text
    finally:
        store.close()


def test_without_its_type_beat_names_the_setting_that_creates_it(sqlite_url: str) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    try:
        with pytest.raises(InvalidInput) as caught:
            BeatScheduleSync(beat_app(), store).start(NOW)
        assert "set swh_scheduler_beat_create_types = True" in str(caught.value)
        with pytest.raises(InvalidInput) as wrong:
            BeatScheduleSync(beat_app(swh_scheduler_beat_create_types="yes"), store)
        assert wrong.value.field == "swh_scheduler_beat_create_types"
        store.create_task_type(TaskType(type="ping", backend_name="proj.ping", queue="celery"))
        check = beat_app(swh_scheduler_import_beat_schedule="check")
        with pytest.raises(InvalidInput, match=r"the entries 'ping' \(not imported\)"):
            BeatScheduleSync(check, store).start(NOW)
        assert store.search_tasks() == []
    finally:
        store.close()


@pytest.mark.postgresql
def test_a_database_out_of_reach_at_start_is_imported_into_once_back(
    postgres_server: str, postgres_template: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="swh_like_scheduler.beat.sync")
    name = f"swh_beatsync_{uuid.uuid4().hex[:8]}"
    missing = services.database_url(postgres_server, name)
    store = SQLAlchemyStore.from_url(missing)
    app = beat_app(swh_scheduler_beat_create_types=True)
    try:
        sync = BeatScheduleSync(app, store, retry_every=0)
        sync.start(NOW)  # logged, not fatal
        assert sync.pending
        assert "beat_schedule not imported yet (tried again shortly)" in caplog.text
        services.create_database_from_template(postgres_server, postgres_template, name)
        sync.retry(NOW)
        assert not sync.pending
        assert [t.key for t in store.search_tasks()] == ["beat:ping"]
    finally:
        store.close()
        services.drop_database(postgres_server, name)


def test_beat_leaves_out_what_it_cannot_run_and_what_it_is_told_to(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from celery.schedules import solar

    from swh_like_scheduler.beat.sync import EXCLUDE_SETTING

    class Every5:  # a schedule class of one's own
        def is_due(self, last_run_at: datetime) -> tuple[bool, float]:
            return True, 5.0

    dawn = solar.__new__(solar)  # solar() itself needs ``ephem`` to compute sun times
    dawn.event, dawn.lat, dawn.lon = "sunrise", 48.85, 2.35
    app = beat_app(swh_scheduler_beat_create_types=True)
    app.conf.beat_schedule.update(
        {
            "dawn": {"task": "proj.ping", "schedule": dawn},
            "custom": {"task": "proj.ping", "schedule": Every5()},
            "skipped": {"task": "proj.ping", "schedule": 60, "args": ("s",)},
        }
    )
    app.conf[EXCLUDE_SETTING] = ["skipped"]
    store = SQLAlchemyStore.from_url(sqlite_url)
    caplog.set_level(logging.INFO, logger="swh_like_scheduler.beat.sync")
    try:
        BeatScheduleSync(app, store).start(NOW)
        assert [t.key for t in store.search_tasks()] == ["beat:ping"]
        left_out = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
        assert len(left_out) == 2, left_out
        assert any("'custom'" in m for m in left_out) and any("'dawn'" in m for m in left_out)
        assert all(r.levelno == logging.WARNING for r in caplog.records if "left out" in r.msg)
        # nothing named stale: the tasks of entries left out are kept as they are
        assert "no longer in beat_schedule" not in caplog.text
        app.conf[EXCLUDE_SETTING] = ["nosuch"]
        with pytest.raises(InvalidInput) as unknown:
            BeatScheduleSync(app, store)
        assert unknown.value.field == EXCLUDE_SETTING and "'nosuch'" in unknown.value.message
        app.conf[EXCLUDE_SETTING] = "skipped"
        with pytest.raises(InvalidInput, match="list of entry names"):
            BeatScheduleSync(app, store)
    finally:
        store.close()


def test_a_mistyped_monitor_setting_stops_beat_with_one_line_naming_it(
    sqlite_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swh_like_scheduler.beat.scheduler import RunnerScheduler

    monkeypatch.setenv("SWH_SCHEDULER_DB_URL", sqlite_url)
    app = beat_app(swh_scheduler_monitor={"ping_timeot": 30})
    with pytest.raises(SystemExit) as stopped:
        RunnerScheduler(app)
    assert stopped.value.code == 1
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert line.startswith("beat -S swh cannot start: swh_scheduler_monitor.ping_timeot")
    assert "unknown" in line and "\n" not in line
