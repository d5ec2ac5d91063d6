"""Workload files: the shipped ones, refusals naming the field, scaling."""

from __future__ import annotations

from datetime import timedelta

import pytest

from swh_like_scheduler.exceptions import InvalidInput
from swh_like_scheduler.model import ScheduleKind
from swh_like_scheduler.simulator.workload import SHIPPED, load_workload, parse_workload


def minimal(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "types": {"job": {"workers": 2}},
        "tasks": [{"type": "job", "count": 3, "kind": "oneshot", "duration": "30 min"}],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_workloads_read(name: str) -> None:
    workload = load_workload(name)
    # the fleets are large; always-changing is the small case of issue 32
    assert workload.task_count >= (100 if name == "always-changing" else 5000)
    assert set(workload.workers) == {t.type for t in workload.types}
    # every shipped fleet is sized under its workers' capacity as written
    assert all(0 < load < 1 for load in workload.natural_load().values()), workload.natural_load()


def test_always_changing_is_one_worker_at_full_load() -> None:
    workload = load_workload("always-changing")
    assert workload.workers == {"crawl": 1}
    assert 0.99 < workload.natural_load()["crawl"] < 1


def test_the_crawler_fleet_has_every_schedule_kind() -> None:
    kinds = {g.kind for g in load_workload("crawler-fleet").groups}
    assert kinds == set(ScheduleKind)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (minimal(days=0), "days"),
        (minimal(seed="x"), "seed"),
        (minimal(runner={"period": "soon"}), "runner.period"),
        (minimal(runner={"tick": "1 s"}), "runner.tick"),
        (minimal(types={}), "types"),
        (minimal(types={"job": {"workers": 0}}), "types.job.workers"),
        (minimal(types={"job": {"default_interval": "often"}}), "types.job.default_interval"),
        (minimal(tasks=[{"type": "other"}]), "tasks[0].type"),
        (minimal(tasks=[{"type": "job", "colour": "red"}]), "tasks[0].colour"),
        (minimal(tasks=[{"type": "job", "kind": "hourly"}]), "tasks[0].kind"),
        (
            minimal(tasks=[{"type": "job", "duration": {"median": "0 s"}}]),
            "tasks[0].duration.median",
        ),
        (minimal(tasks=[{"type": "job", "failure": 2}]), "tasks[0].failure"),
        (minimal(tasks=[{"type": "job", "spread": ["2 h", "1 h"]}]), "tasks[0].spread"),
        (minimal(tasks=[{"type": "job", "args": [1]}]), "tasks[0].args"),
    ],
)
def test_refusals_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_workload(data)
    assert refused.value.field == field


def test_a_file_that_is_not_toml_or_not_there(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.toml"
    bad.write_text("types = [")
    with pytest.raises(InvalidInput, match="not valid TOML"):
        load_workload(bad)
    with pytest.raises(InvalidInput, match="nor a shipped workload"):
        load_workload(tmp_path / "missing.toml")


def test_scaling_tasks_and_load() -> None:
    workload = parse_workload(
        {
            "days": 1,
            "types": {"job": {"workers": 4, "default_interval": "1 h", "max_queue_length": 20}},
            "tasks": [
                {"type": "job", "count": 100, "kind": "adaptive", "duration": "3 min"},
                {
                    "type": "job",
                    "count": 10,
                    "kind": "periodic",
                    "period": "30 min",
                    "cooldown": "27 min",
                    "duration": "3 min",
                },
            ],
        }
    )
    # 100 tasks an hour of 3 min, 10 tasks every 30 min of 3 min: 5 + 1 workers busy
    assert workload.demand() == {"job": pytest.approx(6.0)}
    assert workload.natural_load() == {"job": pytest.approx(1.5)}
    assert workload.with_load(0.5).workers == {"job": 12}
    assert workload.with_load(2.0).natural_load() == {"job": pytest.approx(2.0)}
    # 6 / 1.6 = 3.75 workers: 4, with runs 4 x 1.6 / 6 times as long (the
    # periodic tasks then run a little less often: within 1 %)
    tuned = workload.with_load(1.6)
    assert tuned.workers == {"job": 4}
    assert tuned.natural_load() == {"job": pytest.approx(1.6, rel=0.01)}
    assert tuned.groups[0].duration.median == timedelta(minutes=3) * (4 * 1.6 / 6)
    # a demand of 6 workers at a load of 100: one worker, durations kept
    assert workload.with_load(100).workers == {"job": 1}
    assert workload.with_load(100).natural_load() == {"job": pytest.approx(6)}
    half = workload.with_tasks(55)
    assert [g.count for g in half.groups] == [50, 5] and half.workers == {"job": 2}
    # the queue per worker is kept: 5 per worker as written
    assert half.task_type("job").max_queue_length == 10
    assert workload.with_load(0.5).task_type("job").max_queue_length == 60
    assert workload.with_load(100).task_type("job").max_queue_length == 5
    assert workload.with_workers({"job": 8}).task_type("job").max_queue_length == 20
    assert workload.with_days(0.5).horizon == timedelta(hours=12)
    with pytest.raises(InvalidInput, match="load"):
        workload.with_load(0)
    with pytest.raises(InvalidInput, match="workers"):
        workload.with_workers({"other": 3})
