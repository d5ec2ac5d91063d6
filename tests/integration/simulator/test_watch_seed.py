"""A simulation's condition watch starts from the tasks it created instead
of reading them all back: those are the tasks as stored, and the counts
from them are the counts of a full read, then and after time passes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from swh_like_scheduler.domain.model import RUNNER_ORDER
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.watch import ConditionWatch
from swh_like_scheduler.simulator.workload import load_workload
from swh_like_scheduler.store import SQLAlchemyStore

START = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)
TASKS = 200


@pytest.mark.parametrize("name", ["crawler-fleet", "mixed-platform", "reminders"])
def test_a_watch_seeded_with_the_created_tasks_counts_as_one_that_read_them(
    store: SQLAlchemyStore, name: str
) -> None:
    workload = replace(load_workload(name).with_tasks(TASKS), start=START)
    simulation = Simulation(workload, RUNNER_ORDER)
    created = simulation._populate(store)
    assert len(created) == sum(g.count for g in workload.groups) >= TASKS
    by_id = {t.id: t for t in store.get_tasks([t.id for t in created if t.id is not None])}
    assert [by_id[t.id] for t in created] == created  # the premise: created is stored

    types = {t.type: t for t in workload.types}
    seeded = ConditionWatch(store, types, simulation._group_of)
    seeded.seed(created, START)
    read = ConditionWatch(store, types, simulation._group_of)
    for later in (timedelta(0), timedelta(hours=2), timedelta(days=3)):
        now = START + later
        assert seeded.counts(now, set()) == read.counts(now, None if not later else set())
        assert seeded.group_counts == read.group_counts
        assert seeded.group_causes == read.group_causes
        assert seeded.group_intervals == read.group_intervals
    assert sum(sum(c.values()) for c in read.counts(START + timedelta(days=3)).values()) > 0
