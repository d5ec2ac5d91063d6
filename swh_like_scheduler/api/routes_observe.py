"""Observation: ``/runs/{backend_id}``, ``/conditions``, ``/health``, ``/metrics``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..domain.exceptions import NotFound, SchedulerError
from ..domain.jsonable import plain, run_json
from ..domain.records import HostClock, WorkerState
from ..health import conditions
from ..policy.blind import blind_workers
from ..policy.times import fmt_duration
from ..store import SchedulerStore
from .deps import READ, State
from .responses import ConditionsOut, HealthOut, RunOut
from .routes_forecast import forecast_metrics
from .schemas import MAX_ID, NoNul
from .state import ApiState

router = APIRouter(tags=["observation"])


@router.get("/runs/{backend_id}", dependencies=[READ], response_model=RunOut)
def get_run(state: State, backend_id: Annotated[NoNul, Path(max_length=200)]) -> dict[str, Any]:
    """A run by its Celery task id."""
    found = state.store.get_task_run(backend_id)
    if found is None:
        raise NotFound(f"no run with backend id {backend_id!r}")
    return plain(run_json(found))


@router.get("/conditions", dependencies=[READ], response_model=ConditionsOut)
def get_conditions(
    state: State,
    type: Annotated[NoNul | None, Query(max_length=200)] = None,
    show: Literal["ERROR", "WARNING"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    after_id: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> dict[str, Any]:
    """How many live and disabled tasks are OK, WARNING or in ERROR, per
    type, as last counted in the background (``counts_age_seconds``; the
    same counts as ``/metrics``), and with ``show`` up to ``limit`` tasks
    at that level or worse among the next 5,000 tasks (``CONDITIONS_SCAN``)
    after ``after_id``; ``next_after_id`` continues (``null``: the end).
    A call reads a bounded number of tasks, whatever the table holds."""
    if type is not None and state.store.get_task_type(type) is None:
        raise NotFound(f"task type {type!r} is unknown")
    counted, age = (None, None) if state.table_counts is None else state.table_counts.latest()
    counts = None if counted is None else counted.conditions
    if counts is not None and type is not None:
        counts = {type: counts.get(type, dict.fromkeys(conditions.LEVELS, 0))}
    body: dict[str, Any] = {
        "now": state.clock().isoformat(),
        "counts": counts,
        "counts_age_seconds": age,
        "tasks": [],
        "next_after_id": None,
    }
    if show is not None:
        found, following = conditions.listing(
            state.store,
            state.clock(),
            show=show,
            task_type=type,
            limit=limit,
            after_id=after_id,
            scan=CONDITIONS_SCAN,
        )
        body["tasks"] = [{"id": t.id, "type": t.type, **r.to_dict()} for t, r in found]
        body["next_after_id"] = following
    return body


#: tasks one ``GET /conditions`` reads at most
CONDITIONS_SCAN = 5000


def _age(state: ApiState, instant: Any) -> float | None:
    return None if instant is None else (state.clock() - instant).total_seconds()


@router.get(
    "/health",
    response_model=HealthOut,
    responses={503: {"description": "degraded or unavailable: the reasons are in the body"}},
)
def health(state: State) -> Response:
    """Whether the platform does its work. Open to all (no token), and
    cheap: a few index reads.

    * ``ok`` (200): the database answers (and the broker, when one is
      configured), and no reason below holds;
    * ``degraded`` (503): the API works, the platform does not, with the
      ``reasons``: tasks overdue by more than ``stale_after`` seconds while
      no runner claimed nor had room for that long (no runner, or every
      queue full); runs open for longer than that while no worker sign of
      life was recorded for that long (no listener, or no worker); runs
      waiting in the broker (dispatched, not started) whose tasks' deadline
      passed more than that long ago (workers not keeping up); the broker
      does not answer; a live worker takes tasks without sending task
      events (``workers_without_task_events``: started without ``-E``,
      and the listener could not turn them on);
    * ``unavailable`` (503): the database does not answer.

    ``warnings`` (the status unchanged) name the hosts whose clock is
    further than the server's bound from the database's (``clocks_off``):
    the platform decides on the database's clock, but a host that far off
    should have its clock set right.

    Figures: the last claim, the last runner pass with room, the last
    worker sign of life, the oldest open run, the oldest overdue task per
    type (waiting, or dispatched and still in the broker: ``queued`` says
    how many runs wait per type, counted up to 1,000 (``runs_at_least``
    beyond), and how late the oldest is). Errors name their kind only,
    never a host."""
    body = health_report(state)
    return JSONResponse(status_code=200 if body["status"] == "ok" else 503, content=body)


#: runs waiting in the broker ``/health`` counts per type at most (it says
#: "at least" beyond): how late the oldest is does not depend on it, and a
#: deep queue costs no more than this many index entries
QUEUED_COUNTED = 1000


#: a host's clock offset counts in /health when measured this recently
CLOCKS_RECENT = timedelta(minutes=10)


def clocks_off(
    workers: Sequence[WorkerState], clocks: Sequence[HostClock], bound: float
) -> list[dict[str, Any]]:
    """The hosts (daemons, then live workers) whose clock is further than
    ``bound`` seconds from the database's."""
    found: list[dict[str, Any]] = [
        {"host": c.holder, "role": c.role, "offset_seconds": round(c.offset_seconds, 3)}
        for c in clocks
        if abs(c.offset_seconds) > bound
    ]
    found += [
        {"host": w.hostname, "role": "worker", "offset_seconds": round(w.clock_offset, 3)}
        for w in workers
        if w.online and w.clock_offset is not None and abs(w.clock_offset) > bound
    ]
    return found


def clock_warning(item: Mapping[str, Any]) -> str:
    """A host's clock off, in words."""
    offset = float(item["offset_seconds"])
    where = "behind" if offset > 0 else "ahead of"
    return (
        f"the clock of {item['role']} {item['host']} is {abs(offset):.1f} s {where} the "
        "database's: the platform uses the database's clock, but set this host's right (NTP)"
    )


def health_report(state: ApiState) -> dict[str, Any]:
    """The body of ``GET /health`` (its doc); ``status`` says the code."""
    now = state.clock()
    stale = state.settings.health_stale_after
    body: dict[str, Any] = {"status": "ok", "stale_after": stale, "reasons": []}
    try:
        figures = state.store.schedule_health(
            now=now, counts=False, runs=False, queued_upto=QUEUED_COUNTED
        )
    except SchedulerError as error:
        body.update(
            status="unavailable",
            database={
                "ok": False,
                "error": f"the database does not answer ({type(error).__name__})",
            },
            reasons=["the database does not answer"],
        )
        return body
    body["database"] = {"ok": True}
    reasons: list[str] = body["reasons"]
    if state.broker_check is not None:
        problem = state.broker_check()
        body["broker"] = {"ok": problem is None}
        if problem is not None:
            reasons.append("the broker does not answer")
    overdue = {
        name: (now - deadline).total_seconds() for name, deadline in figures.oldest_overdue.items()
    }
    passes = [t for t in (figures.last_claim_at, figures.last_room_at) if t is not None]
    last_pass = _age(state, max(passes)) if passes else None
    late = sorted(name for name, seconds in overdue.items() if seconds > stale)
    if late and (last_pass is None or last_pass > stale):
        silent = (
            "no runner has ever claimed a task or had room"
            if last_pass is None
            else f"no runner has claimed a task or had room for {last_pass:.0f} s"
        )
        types = (
            f"task type {late[0]} has" if len(late) == 1 else f"task types {', '.join(late)} have"
        )
        reasons.append(
            f"{silent}, while {types} tasks overdue by more than {stale:.0f} s "
            "(no runner, or every queue full)"
        )
    open_age = _age(state, figures.oldest_open_run)
    seen = _age(state, figures.last_worker_seen_at)
    if open_age is not None and open_age > stale and (seen is None or seen > stale):
        silent = (
            "no worker sign of life has ever been recorded"
            if seen is None
            else f"no worker sign of life has been recorded for {seen:.0f} s"
        )
        reasons.append(
            f"{silent}, while runs have been open for {open_age:.0f} s (no listener, or no worker)"
        )
    # runs waiting in the broker are late too: their wait against their deadline
    queued: dict[str, dict[str, Any]] = {}
    for name, (runs, deadline) in sorted(figures.queued.items()):
        lag = (now - deadline).total_seconds()
        more = runs >= QUEUED_COUNTED
        queued[name] = {
            "runs": runs,
            "runs_at_least": more,
            "oldest_late_seconds": lag if lag > 0 else None,
        }
        if lag > 0:
            overdue[name] = max(overdue.get(name, lag), lag)  # after the runner check
        if lag > stale:
            held = f"at least {runs:,} runs" if more else f"{runs:,} run(s)"
            reasons.append(
                f"the queue of {name} holds {held} not started, the oldest late by "
                f"{fmt_duration(timedelta(seconds=round(lag)))} (workers not keeping up)"
            )
    try:
        workers = state.store.get_workers()
        clocks = state.store.get_host_clocks(since=now - CLOCKS_RECENT)
    except SchedulerError:  # the database went away since: said by the next report
        workers, clocks = [], []
    blind = [w.hostname for w in blind_workers(workers)]
    body["clocks_off"] = clocks_off(workers, clocks, state.settings.clock_bound)
    body["warnings"] = [clock_warning(item) for item in body["clocks_off"]]
    body["workers_without_task_events"] = blind
    if blind:
        reasons.append(
            f"worker(s) {', '.join(blind)} take tasks without sending task events (started "
            "without -E, and they could not be turned on): their runs are never seen to "
            "start or end; start them with -E"
        )
    if reasons:
        body["status"] = "degraded"
    body.update(
        last_claim_at=plain(figures.last_claim_at),
        last_claim_age_seconds=_age(state, figures.last_claim_at),
        last_room_at=plain(figures.last_room_at),
        last_worker_seen_at=plain(figures.last_worker_seen_at),
        last_worker_seen_age_seconds=seen,
        oldest_open_run_age_seconds=open_age,
        oldest_overdue_seconds=overdue,
        queued=queued,
    )
    return body


class ScheduleCollector(Collector):
    """The store's schedule-health figures as Prometheus gauges, read at
    each scrape."""

    def __init__(self, store: SchedulerStore, state: ApiState) -> None:
        self.store, self.state = store, state

    def _table_counts(self) -> Iterator[GaugeMetricFamily]:
        if self.state.table_counts is None:
            return
        counts, age = self.state.table_counts.latest()
        if counts is None or age is None:
            return
        tasks = GaugeMetricFamily(
            "swh_scheduler_tasks",
            "Tasks per type and status, as last counted",
            labels=["type", "status"],
        )
        for (name, status), count in sorted(counts.tasks.items()):
            tasks.add_metric([name, status], count)
        yield tasks
        levels = GaugeMetricFamily(
            "swh_scheduler_task_conditions",
            "Live and disabled tasks per type and condition (OK, WARNING, ERROR), as last counted",
            labels=["type", "condition"],
        )
        for name, per_level in sorted(counts.conditions.items()):
            for level, count in per_level.items():
                levels.add_metric([name, level], count)
        yield levels
        yield GaugeMetricFamily(
            "swh_scheduler_counts_age_seconds",
            "Seconds since the tasks were counted per status and condition",
            value=age,
        )

    def _open_runs(self) -> Iterator[GaugeMetricFamily]:
        if self.state.run_counts is None:
            return
        open_runs, age = self.state.run_counts.latest()
        if open_runs is None or age is None:
            return
        runs = GaugeMetricFamily(
            "swh_scheduler_runs_open",
            "Runs scheduled (published, not started) or started, per type and status, "
            "as last counted",
            labels=["type", "status"],
        )
        for (name, status), count in sorted(open_runs.items()):
            runs.add_metric([name, status], count)
        yield runs
        yield GaugeMetricFamily(
            "swh_scheduler_runs_open_age_seconds",
            "Seconds since the open runs were counted",
            value=age,
        )

    def _origins(self, now: datetime) -> Iterator[GaugeMetricFamily]:
        """The origin-visit scheduler's counts, as ``update_metrics`` last
        stored them (nothing is counted here)."""
        metrics = self.store.get_metrics()
        if not metrics:
            return
        listers = {x.id: x for x in self.store.get_listers()}
        origins = GaugeMetricFamily(
            "swh_scheduler_origins",
            "Listed origins per lister, visit type and state (known, enabled, "
            "never_visited, pending_changes; the enabled ones per condition: ok, "
            "warning, error), as last counted",
            labels=["lister", "instance", "visit_type", "state"],
        )
        for m in metrics:
            lister = listers.get(m.lister_id)
            name = lister.name if lister else m.lister_id
            instance = lister.instance_name if lister else ""
            for state, count in (
                ("known", m.origins_known),
                ("enabled", m.origins_enabled),
                ("never_visited", m.origins_never_visited),
                ("pending_changes", m.origins_with_pending_changes),
                ("ok", m.origins_ok),
                ("warning", m.origins_warning),
                ("error", m.origins_error),
            ):
                origins.add_metric([name, instance, m.visit_type, state], count)
        yield origins
        yield GaugeMetricFamily(
            "swh_scheduler_origins_age_seconds",
            "Seconds since the listed origins were counted (origin update-metrics)",
            value=(now - min(m.last_update for m in metrics)).total_seconds(),
        )

    def collect(self) -> Iterator[GaugeMetricFamily]:
        started = time.perf_counter()
        now = self.state.clock()
        figures = self.store.schedule_health(now=now, counts=False, runs=False, queued_upto=0)
        yield from self._table_counts()
        overdue = GaugeMetricFamily(
            "swh_scheduler_oldest_overdue_seconds",
            "Seconds past its deadline (should_start_by) of the oldest waiting task, per type",
            labels=["type"],
        )
        names = {t.type for t in self.store.get_task_types()} | set(figures.oldest_overdue)
        for name in sorted(names):  # 0 for a type on time: an alert sees it
            deadline = figures.oldest_overdue.get(name)
            overdue.add_metric(
                [name], 0.0 if deadline is None else (now - deadline).total_seconds()
            )
        yield overdue
        yield from self._open_runs()
        yield from self._origins(now)
        yield from forecast_metrics(self.store, now)
        ended = GaugeMetricFamily(
            "swh_scheduler_runs_ended_last_hour",
            "Runs ended within the last hour, per type and final status",
            labels=["type", "status"],
        )
        for (name, status), count in sorted(figures.ended_runs.items()):
            ended.add_metric([name, status], count)
        yield ended
        expired = GaugeMetricFamily(
            "swh_scheduler_oneshots_expired_last_hour",
            "One-shot tasks expired (disabled unrun: past max_delay and the expiry grace "
            "although a runner had room) within the last hour, per type",
            labels=["type"],
        )
        for name in sorted(names):
            expired.add_metric([name], figures.expired.get(name, 0))
        yield expired
        for metric, instant, text in (
            (
                "swh_scheduler_last_claim_age_seconds",
                figures.last_claim_at,
                "a runner's last claim",
            ),
            (
                "swh_scheduler_last_worker_seen_age_seconds",
                figures.last_worker_seen_at,
                "a worker's last sign of life recorded by the listener",
            ),
        ):
            if instant is not None:
                yield GaugeMetricFamily(
                    metric, f"Seconds since {text}", value=(now - instant).total_seconds()
                )
        yield GaugeMetricFamily(
            "swh_scheduler_scrape_seconds",
            "Seconds the database took to answer this scrape",
            value=time.perf_counter() - started,
        )


@router.get("/metrics", dependencies=[READ], response_class=Response)
def metrics(state: State) -> Response:
    """Prometheus text format: tasks per type and status, the oldest overdue
    task per type, open runs, the age of the last claim and worker sign of life."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScheduleCollector(state.store, state))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
