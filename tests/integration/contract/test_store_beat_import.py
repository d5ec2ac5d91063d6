"""Importing a beat_schedule (:mod:`swh_like_scheduler.beat.importer`) through
every store: SQLite, PostgreSQL, PostgreSQL with the Redis index, and the
remote client."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery.schedules import crontab

from swh_like_scheduler.beat.importer import Action, import_entries
from swh_like_scheduler.beat.schedule import BeatEntry, translate_schedule
from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import ScheduleKind, TaskStatus, TaskType

NOW = datetime(2026, 3, 2, 10, 0, 7, tzinfo=UTC)
LATER = NOW + timedelta(minutes=10)

SCHEDULE: dict[str, Any] = {
    "ping": {"task": "proj.ping", "schedule": timedelta(seconds=30), "args": ("a",)},
    "report": {
        "task": "proj.report",
        "schedule": crontab(minute=0, hour=6, day_of_week="mon-fri"),
        "kwargs": {"to": "ops"},
        "options": {"queue": "reports"},
    },
}


def route(task: str, options: Mapping[str, Any]) -> str:
    return str(options.get("queue", "celery"))


def entries(schedule: Mapping[str, Any], tz: str = "Europe/Paris") -> list[BeatEntry]:
    return translate_schedule(schedule, tz=tz, route=route)


def by_key(store: Any) -> dict[str, Any]:
    return {t.key: t for t in store.search_tasks()}


def test_an_empty_database_gets_its_types_and_tasks_then_nothing_changes(store: Any) -> None:
    first = import_entries(store, entries(SCHEDULE), now=NOW, create_types=True)
    assert [(o.name, o.action) for o in first.outcomes] == [
        ("ping", Action.CREATED),
        ("report", Action.CREATED),
    ]
    assert first.types_created == (
        ("proj.ping", "proj.ping", "celery"),
        ("proj.report", "proj.report", "reports"),
    )
    report_type = store.get_task_type("proj.report")
    assert report_type is not None and report_type.effective_queue == "reports"
    tasks = by_key(store)
    ping, report = tasks["beat:ping"], tasks["beat:report"]
    assert ping.schedule_kind is ScheduleKind.PERIODIC
    assert (ping.period, ping.cooldown) == (timedelta(seconds=30), timedelta(seconds=27))
    assert ping.next_run == NOW + timedelta(seconds=30)  # one period on, as beat
    assert ping.args == ("a",) and ping.tz == "Europe/Paris"
    assert (report.schedule_kind, report.cron, report.tz) == (
        ScheduleKind.CRON,
        "0 6 * * 1-5",
        "Europe/Paris",
    )
    assert report.next_run == datetime(2026, 3, 3, 5, 0, tzinfo=UTC)  # 06:00 CET
    assert report.cron_max_duration == timedelta(hours=24)  # the shortest gap
    assert dict(report.kwargs) == {"to": "ops"}

    again = import_entries(store, entries(SCHEDULE), now=LATER, create_types=True)
    assert [o.action for o in again.outcomes] == [Action.UNCHANGED, Action.UNCHANGED]
    assert not again.wrote and not again.types_created
    assert again.summary() == "2 beat_schedule entries: 2 unchanged"
    assert by_key(store) == tasks  # not a field rewritten, updated_at included
    assert len(store.get_task_types()) == 2


def test_a_changed_entry_is_updated_in_place(store: Any) -> None:
    import_entries(store, entries(SCHEDULE), now=NOW, create_types=True)
    before = by_key(store)
    changed = {
        "ping": {**SCHEDULE["ping"], "schedule": 60, "args": ("b",)},
        "report": {**SCHEDULE["report"], "schedule": timedelta(hours=1)},
    }
    dry = import_entries(store, entries(changed), now=LATER, dry_run=True)
    assert [o.action for o in dry.outcomes] == [Action.UPDATED, Action.UPDATED]
    assert by_key(store) == before  # a dry run writes nothing
    report = import_entries(store, entries(changed), now=LATER)
    ping_outcome = report.outcomes[0]
    assert ping_outcome.changes == ("args: ['a'] -> ['b']", "schedule: every 30s -> every 1m")
    after = by_key(store)
    ping, cron_to_periodic = after["beat:ping"], after["beat:report"]
    assert ping.id == before["beat:ping"].id and ping.created_at == before["beat:ping"].created_at
    assert (ping.period, ping.cooldown, ping.args) == (
        timedelta(minutes=1),
        timedelta(seconds=54),
        ("b",),
    )
    assert ping.next_run == LATER + timedelta(minutes=1)  # never ran: a period from now
    assert cron_to_periodic.id == before["beat:report"].id
    assert cron_to_periodic.schedule_kind is ScheduleKind.PERIODIC
    assert (cron_to_periodic.cron, cron_to_periodic.cron_max_duration) == (None, None)
    assert cron_to_periodic.period == timedelta(hours=1)
    assert ping.updated_at == LATER
    # and once more: nothing to do
    assert not import_entries(store, entries(changed), now=LATER + timedelta(1)).wrote


def test_arguments_alone_keep_the_next_run_and_a_hand_set_cooldown_stays(store: Any) -> None:
    import_entries(store, entries(SCHEDULE), now=NOW, create_types=True)
    ping = by_key(store)["beat:ping"]
    tuned = store.update_task(
        ping.updated(cooldown=timedelta(seconds=5), updated_at=NOW),
        expected_updated_at=ping.updated_at,
    )
    changed = {**SCHEDULE, "ping": {**SCHEDULE["ping"], "args": ("c",)}}
    report = import_entries(store, entries(changed), now=LATER)
    assert report.count(Action.UPDATED) == 1 and report.count(Action.UNCHANGED) == 1
    after = by_key(store)["beat:ping"]
    assert after.args == ("c",)
    assert (after.next_run, after.deadline) == (tuned.next_run, tuned.deadline)
    assert after.cooldown == timedelta(seconds=5)  # the period did not change


def test_a_disabled_task_stays_disabled_and_a_task_with_a_run_open_is_busy(store: Any) -> None:
    import_entries(store, entries(SCHEDULE), now=NOW, create_types=True)
    tasks = by_key(store)
    store.disable_tasks([tasks["beat:report"].id], now=NOW)
    store.schedule_task_run(tasks["beat:ping"].id, now=NOW)
    held = by_key(store)
    changed = {name: {**fields, "args": ("new",)} for name, fields in SCHEDULE.items()}
    report = import_entries(store, entries(changed), now=LATER)
    ping, cron = report.outcomes
    assert ping.action is Action.BUSY and ping.changes == ("args: ['a'] -> ['new']",)
    assert "busy, task" in ping.line(dry_run=False)
    assert cron.action is Action.UPDATED and cron.status == "disabled"
    after = by_key(store)
    assert after["beat:ping"] == held["beat:ping"]  # not written
    assert after["beat:report"].status is TaskStatus.DISABLED
    assert after["beat:report"].args == ("new",)
    assert report.busy == [ping]


def test_entries_gone_are_reported_and_pruned_only_when_asked(store: Any) -> None:
    import_entries(store, entries(SCHEDULE), now=NOW, create_types=True)
    store.create_task_type(TaskType(type="other", backend_name="proj.other"))
    only_ping = {"ping": SCHEDULE["ping"]}
    report = import_entries(store, entries(only_ping), now=LATER)
    stale = [o for o in report.outcomes if o.action is Action.STALE]
    assert [o.key for o in stale] == ["beat:report"]
    assert "remove it with --prune" in stale[0].line(dry_run=False)
    assert "beat:report" in by_key(store)
    # an entry left out of this import (--exclude) is not stale
    kept = import_entries(store, entries(only_ping), now=LATER, keep=["beat:report"])
    assert kept.count(Action.STALE) == 0
    dry = import_entries(store, entries(only_ping), now=LATER, prune=True, dry_run=True)
    assert dry.count(Action.PRUNED) == 1 and "beat:report" in by_key(store)
    pruned = import_entries(store, entries(only_ping), now=LATER, prune=True)
    assert pruned.count(Action.PRUNED) == 1
    assert set(by_key(store)) == {"beat:ping"}
    # a stale task with a run open is disabled, and deleted by a later prune
    ping_id = by_key(store)["beat:ping"].id
    store.schedule_task_run(ping_id, now=LATER)
    held = import_entries(store, [], now=LATER, prune=True)
    assert [o.action for o in held.outcomes] == [Action.DISABLED]
    assert store.get_tasks([ping_id])[0].status is TaskStatus.DISABLED


def test_an_entry_without_its_task_type_refuses_the_import_whole(store: Any) -> None:
    store.create_task_type(TaskType(type="ping", backend_name="proj.ping", queue="pings"))
    with pytest.raises(InvalidInput) as caught:
        import_entries(store, entries(SCHEDULE), now=NOW)
    message = str(caught.value)
    assert "2 entries refused, nothing imported" in message
    assert "beat_schedule['ping'].task: no task type runs the Celery task 'proj.ping' on " in (
        message
    )
    assert "(type ping runs it on queue 'pings')" in message
    assert "--create-types" in message
    assert store.search_tasks() == [] and len(store.get_task_types()) == 1
    # given the queue the type serves, the entry finds it
    routed = {"ping": {**SCHEDULE["ping"], "options": {"queue": "pings"}}}
    report = import_entries(store, entries(routed), now=NOW)
    assert report.outcomes[0].task_type == "ping" and not report.types_created


def test_two_types_for_one_task_and_queue_are_ambiguous(store: Any) -> None:
    for name in ("a", "b"):
        store.create_task_type(TaskType(type=name, backend_name="proj.ping", queue="celery"))
    with pytest.raises(InvalidInput, match="the task types a, b all run"):
        import_entries(store, entries({"ping": SCHEDULE["ping"]}), now=NOW)
    assert store.search_tasks() == []


def test_a_type_whose_retries_outlast_the_period_is_refused_naming_the_entry(store: Any) -> None:
    store.create_task_type(
        TaskType(type="ping", backend_name="proj.ping", queue="celery", num_retries=3)
    )
    with pytest.raises(InvalidInput) as caught:
        import_entries(store, entries({"ping": SCHEDULE["ping"]}), now=NOW)
    assert caught.value.field.startswith("beat_schedule['ping']")
    assert store.search_tasks() == []


class Racing:
    """``store`` on which someone else changes a task just before the
    importer's first update of it (an outcome, an operator)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.raced = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def update_task(self, task: Any, **kwargs: Any) -> Any:
        if not self.raced:
            self.raced = True
            current = self.store.get_tasks([task.id])[0]
            self.store.update_task(
                current.updated(
                    cooldown=timedelta(seconds=1), updated_at=current.updated_at + timedelta(1)
                ),
                expected_updated_at=current.updated_at,
            )
        return self.store.update_task(task, **kwargs)


def test_an_update_that_loses_a_race_is_planned_again(store: Any) -> None:
    import_entries(store, entries(SCHEDULE), now=NOW, create_types=True)
    changed = {**SCHEDULE, "ping": {**SCHEDULE["ping"], "args": ("z",)}}
    racing = Racing(store)
    report = import_entries(racing, entries(changed), now=LATER)
    assert racing.raced and report.count(Action.UPDATED) == 1
    ping = by_key(store)["beat:ping"]
    assert ping.args == ("z",)  # the import's change
    assert ping.cooldown == timedelta(seconds=1)  # and the other one, not overwritten
