"""What the console's pages show, gathered from the store and the API's
background counts: plain data for the templates (and the live updates).

Every page reads a bounded amount: the overview reads the background
counts (conditions, open runs, runs dispatched and ended) and a few index
reads; the problem list filters the latest census in memory and reads one
page of tasks; the task page reads one task, its type and its latest runs.
Nothing here scans the task table on a page view."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .. import policy
from ..api.routes_observe import health_report
from ..api.state import ApiState
from ..domain.jsonable import without_secrets
from ..domain.model import OPEN_RUN_STATUSES, RunStatus, Task, TaskRun, TaskStatus, TaskType
from ..domain.text import visible
from ..health import conditions
from ..health.waits import Wait, why_it_waits
from ..intake.jobs import job_key_of
from ..policy.times import fmt_duration, fmt_instant
from ..store.values import ProblemEntry, ProblemQuery
from .sparkline import sparkline

#: tasks per page of the problem list
PAGE_SIZE = 50
#: the levels, worst first
LEVELS = ("ERROR", "WARNING", "OK")
#: run statuses counted as failures
FAILED = ("failed", "permfailed", "lost", "timed_out")


class Exact(str):
    """A text a page holds exactly as it is, past :func:`shown`: a form
    field's value that the browser sends back (an escaped search would look
    for another key, an escaped bulk filter select other tasks), or a block
    whose lines :func:`block` already made visible."""


def shown(value: Any) -> Any:
    """What every ``{{ }}`` of the pages writes (the templates' finalize,
    before the HTML escape): a text with its invisible and reordering
    characters as escapes (:func:`..text.visible`: a key behind a
    right-to-left override shows the override, not a reversed name).
    Markup the console made (the trend's SVG, ``tojson``, whose JSON
    escapes such characters itself) and :class:`Exact` texts are left as
    they are; numbers and ``None`` have nothing to escape."""
    if isinstance(value, Exact) or hasattr(value, "__html__"):
        return value
    if isinstance(value, str):
        return visible(value)
    if value is None or isinstance(value, int | float):
        return value
    return visible(str(value))


def exact(value: Any) -> Exact:
    """The ``exact`` filter: ``value`` written as it is (see :class:`Exact`)."""
    return Exact("" if value is None else value)


def block(value: Any) -> Exact:
    """The ``block`` filter, for a text shown as lines (an error text in a
    ``<pre>``): its line breaks and tabs kept, every other invisible
    character escaped."""
    return Exact(visible("" if value is None else str(value), lines=True))


def ago(seconds: float | None) -> str:
    """``3m05s ago``, ``in 2h``, ``never``."""
    if seconds is None:
        return "never"
    if abs(seconds) < 1:
        return "now"
    text = fmt_duration(timedelta(seconds=abs(int(seconds))))
    return f"{text} ago" if seconds > 0 else f"in {text}"


#: what a figure not known yet shows
UNKNOWN = "\u2013"


def number(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value:,}"


@dataclass
class TypeRow:
    """One line of the overview."""

    name: str
    description: str
    queue: str
    paused_at: datetime | None
    counts: dict[str, int] | None
    trend: str
    overdue: float | None
    queued: int | None
    running: int | None
    max_queue_length: int | None
    #: runs dispatched and ended within the last hour
    dispatched: int | None
    ended: int | None
    failures: int | None

    @property
    def dispatched_per_minute(self) -> float | None:
        return None if self.dispatched is None else self.dispatched / 60

    @property
    def ended_per_minute(self) -> float | None:
        return None if self.ended is None else self.ended / 60

    def live(self) -> dict[str, str]:
        """The texts the live update sets, by element key."""
        counts = self.counts or {}
        out = {f"{self.name}:{level}": number(counts.get(level)) for level in LEVELS}
        out[f"{self.name}:overdue"] = overdue_text(self.overdue)
        out[f"{self.name}:queued"] = queue_text(self.queued, self.max_queue_length)
        out[f"{self.name}:running"] = number(self.running)
        out[f"{self.name}:rates"] = rates_text(self.dispatched_per_minute, self.ended_per_minute)
        out[f"{self.name}:hour"] = hour_text(self.dispatched, self.ended)
        out[f"{self.name}:failures"] = number(self.failures)
        return out


def overdue_text(seconds: float | None) -> str:
    return "on time" if seconds is None else f"{fmt_duration(timedelta(seconds=int(seconds)))}"


def queue_text(queued: int | None, limit: int | None) -> str:
    return f"{number(queued)} / {'∞' if limit is None else f'{limit:,}'}"


def hour_text(dispatched: int | None, ended: int | None) -> str:
    return f"{number(dispatched)} / {number(ended)} in 1 h"


def rates_text(dispatched: float | None, ended: float | None) -> str:
    def rate(value: float | None) -> str:
        return UNKNOWN if value is None else f"{value:,.1f}"

    return f"{rate(dispatched)} / {rate(ended)}"


#: what the overview says of the runner and workers, by the health
#: report's status: the scheduler's own machinery, not the tasks' conditions
MACHINERY = {"ok": "alive", "degraded": "in trouble", "unavailable": "unknown"}


def machinery_text(health: dict[str, Any]) -> str:
    """``alive`` (the health report found nothing wrong), ``in trouble``
    (its reasons say what), ``unknown`` (the database does not answer),
    or ``not seen yet`` when nothing is wrong only because no runner pass
    and no worker was ever recorded."""
    status = str(health.get("status"))
    signs = ("last_claim_at", "last_room_at", "last_worker_seen_at")
    if status == "ok" and all(health.get(sign) is None for sign in signs):
        return "not seen yet"
    return MACHINERY.get(status, status)


@dataclass
class Overview:
    now: datetime
    health: dict[str, Any]
    rows: list[TypeRow]
    totals: dict[str, int] | None
    counts_age: float | None
    activity_age: float | None
    problems_total: int

    @property
    def machinery(self) -> str:
        return machinery_text(self.health)

    @property
    def machinery_look(self) -> str:
        """The health panel's class: the report's status, or ``unseen``
        (neither green nor red) when nothing was ever recorded."""
        return "unseen" if self.machinery == "not seen yet" else str(self.health["status"])

    def live(self) -> dict[str, Any]:
        texts: dict[str, str] = {}
        html: dict[str, str] = {}
        for row in self.rows:
            texts.update(row.live())
            html[f"{row.name}:trend"] = row.trend
        for level in LEVELS:
            texts[f"total:{level}"] = number((self.totals or {}).get(level))
        texts["health:status"] = self.machinery
        texts["health:claim"] = ago(self.health.get("last_claim_age_seconds"))
        texts["health:worker"] = ago(self.health.get("last_worker_seen_age_seconds"))
        texts["counts:age"] = ago(self.counts_age)
        said = [*self.health["reasons"], *self.health.get("warnings", ())]
        html["health:reasons"] = "".join(f"<li>{_escape(visible(reason))}</li>" for reason in said)
        return {
            "text": texts,
            "html": html,
            "status": self.health["status"],
            "look": self.machinery_look,
        }


def _escape(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def overview(state: ApiState) -> Overview:
    now = state.clock()
    health = health_report(state)
    counted, counts_age = (None, None)
    if state.table_counts is not None:
        counted, counts_age = state.table_counts.latest()
    figures, activity_age = (None, None)
    if state.activity is not None:
        figures, activity_age = state.activity.latest()
    # the health report read the oldest overdue task per type already
    overdue = health.get("oldest_overdue_seconds", {})
    history = state.table_counts.history() if state.table_counts is not None else []
    rows = []
    for task_type in sorted(state.store.get_task_types(), key=lambda t: t.type):
        name = task_type.type
        counts = None if counted is None else counted.conditions.get(name, dict.fromkeys(LEVELS, 0))
        open_runs = figures.open_runs if figures is not None else None
        ended = None
        failures = None
        if figures is not None:
            ended = sum(n for (t, _), n in figures.ended_runs.items() if t == name)
            failures = sum(
                n for (t, s), n in figures.ended_runs.items() if t == name and s in FAILED
            )
        rows.append(
            TypeRow(
                name=name,
                description=task_type.description,
                queue=task_type.effective_queue,
                paused_at=task_type.paused_at,
                counts=counts,
                trend=sparkline(
                    [
                        (
                            at,
                            value.conditions.get(name, {}).get("ERROR", 0),
                            value.conditions.get(name, {}).get("WARNING", 0),
                        )
                        for at, value in history
                    ],
                    now=now,
                ),
                overdue=overdue.get(name),
                queued=None if open_runs is None else open_runs.get((name, "scheduled"), 0),
                running=None if open_runs is None else open_runs.get((name, "started"), 0),
                max_queue_length=task_type.max_queue_length,
                dispatched=None if figures is None else figures.dispatched.get(name, 0),
                ended=ended,
                failures=failures,
            )
        )
    totals = None
    if counted is not None:
        per_type = counted.conditions.values()
        totals = {level: sum(c.get(level, 0) for c in per_type) for level in LEVELS}
    return Overview(
        now=now,
        health=health,
        rows=rows,
        totals=totals,
        counts_age=counts_age,
        activity_age=activity_age,
        problems_total=0 if counted is None else counted.not_ok,
    )


@dataclass(frozen=True)
class Filters:
    """The problem list's filters (empty: any)."""

    type: str = ""
    level: str = ""
    kind: str = ""
    priority: str = ""
    q: str = ""

    def store_query(self) -> ProblemQuery:
        """The filters as the store's problem query."""
        return ProblemQuery(
            type=self.type, level=self.level, kind=self.kind, priority=self.priority, q=self.q
        )

    def query(self) -> dict[str, str]:
        """The non-empty filters, as query parameters."""
        return {k: v for k, v in vars(self).items() if v}

    def describe(self) -> str:
        parts = [f"{name} {value!r}" for name, value in self.query().items()]
        return ", ".join(parts) if parts else "no filter"


#: problems read per store call
SELECTION_PAGE = 10_000


def selection(
    state: ApiState, filters: Filters, *, limit: int
) -> tuple[list[ProblemEntry], int, Any]:
    """Up to ``limit`` problems of the ledger that match ``filters``, worst
    first (read a page of :data:`SELECTION_PAGE` at a time), how many match
    in all, and the latest census (``None``: not counted yet, and nothing
    is listed)."""
    if state.table_counts is None:
        return [], 0, None
    counted, _ = state.table_counts.latest()
    if counted is None:
        return [], 0, None
    query = filters.store_query()
    found, total = state.store.problem_page(query, limit=min(limit, SELECTION_PAGE))
    seen = {p.id for p in found}
    while len(found) < min(limit, total):
        page, _ = state.store.problem_page(
            query, offset=len(found), limit=min(limit - len(found), SELECTION_PAGE)
        )
        fresh = [p for p in page if p.id not in seen]
        if not fresh:
            break
        seen.update(p.id for p in fresh)
        found += fresh
    return found, total, counted


@dataclass
class ProblemRow:
    entry: ProblemEntry
    task: Task | None
    report: policy.ConditionReport | None
    late: float | None

    @property
    def changed(self) -> bool:
        """Whether the task's level changed since the census assessed it."""
        return self.report is not None and self.report.level.value != self.entry.level


@dataclass
class Problems:
    filters: Filters
    rows: list[ProblemRow]
    total: int
    first: int
    page: int
    pages: int
    counted: bool
    counted_at: datetime | None
    generation: int
    types: list[str] = field(default_factory=list)


#: the levels the problem list shows
PROBLEMS = ("ERROR", "WARNING")


def census_total(conditions: dict[str, dict[str, int]], filters: Filters) -> int | None:
    """How many problems match ``filters`` by the census's counts per type
    and level (what the ledger held when it was stored), without counting
    the ledger again; ``None`` when a filter is one the census does not
    count by (kind, priority, text)."""
    if filters.kind or filters.priority or filters.q or filters.level not in ("", *PROBLEMS):
        return None
    levels = [filters.level] if filters.level else list(PROBLEMS)
    types = [filters.type] if filters.type else list(conditions)
    return sum(conditions.get(name, {}).get(level, 0) for name in types for level in levels)


def problems(state: ApiState, filters: Filters, page: int) -> Problems:
    counted = None if state.table_counts is None else state.table_counts.latest()[0]
    # the newest census stored (one index read): what the ledger held when
    # its step ended, which this process's copy may not have read yet
    census = None if counted is None else state.store.latest_census()
    shown: list[ProblemEntry] = []
    total = first = 0
    pages = 1
    if census is not None:
        query = filters.store_query()
        known = census_total(census.conditions, filters)
        # a filter the census does not count by: the ledger counts
        total = known if known is not None else state.store.problem_page(query, limit=0)[1]
        pages = max(1, -(-total // PAGE_SIZE))
        page = min(max(1, page), pages)
        first = (page - 1) * PAGE_SIZE
        shown, total = state.store.problem_page(
            query, offset=first, limit=PAGE_SIZE, known_total=total
        )
    types = {t.type: t for t in state.store.get_task_types()}
    now = state.clock()
    found = {t.id: t for t in state.store.get_tasks([p.id for p in shown])}
    rows = []
    for entry in shown:
        task = found.get(entry.id)
        if task is None or task.type not in types:  # deleted since
            rows.append(ProblemRow(entry, None, None, None))
            continue
        current, report = conditions.problem_of(task, types[task.type], now)
        rows.append(ProblemRow(entry, without_secrets(task), report, current.late))
    return Problems(
        filters=filters,
        rows=rows,
        total=total,
        first=first,
        page=page,
        pages=pages,
        counted=census is not None,
        counted_at=None if census is None else census.at,
        generation=0 if census is None else census.id,
        types=sorted(types),
    )


@dataclass
class RunRow:
    run: TaskRun
    duration: str
    waited: str


def _run_row(run: TaskRun) -> RunRow:
    duration = waited = ""
    if run.started is not None:
        waited = fmt_duration(run.started - run.scheduled)
        if run.ended is not None:
            duration = fmt_duration(run.ended - run.started)
    return RunRow(run, duration, waited)


@dataclass
class TaskPage:
    task: Task
    task_type: TaskType
    explanation: policy.Explanation
    firings: list[datetime]
    runs: list[RunRow]
    job: Any
    open_run: bool
    #: where it stands in line, when it is due (``None``: it is not)
    wait: Wait | None = None


#: runs shown on a task page
RUNS_SHOWN = 50
#: cron firings shown
FIRINGS_SHOWN = 5


def task_page(state: ApiState, task_id: int) -> TaskPage | None:
    found = state.store.get_tasks([task_id])
    if not found:
        return None
    task = found[0]
    task_type = state.store.get_task_type(task.type)
    if task_type is None:  # pragma: no cover - the foreign key forbids it
        return None
    now = state.clock()
    firings: list[datetime] = []
    if task.cron:
        firings = list(itertools.islice(policy.cron_times(task.cron, task.tz, now), FIRINGS_SHOWN))
    runs = state.store.get_task_runs(task_id, limit=RUNS_SHOWN)
    job_key = job_key_of(task.key)
    job = state.store.get_job(job_key) if job_key is not None else None
    return TaskPage(
        task=without_secrets(task),
        task_type=task_type,
        explanation=policy.explain(
            task,
            task_type,
            now,
            # the latest failure among the runs shown (the runs table has the rest)
            last_failure=next((r for r in runs if r.status in policy.FAILED_STATUSES), None),
            run=conditions.latest_run_state(
                state.store,
                task,
                now,
                queue=task_type.effective_queue,
                backend=task_type.backend_name,
            ),
        ),
        firings=firings,
        runs=[_run_row(r) for r in runs],
        job=job,
        open_run=any(r.status in OPEN_RUN_STATUSES for r in runs)
        or task.status is TaskStatus.SCHEDULED,
        wait=why_it_waits(state.store, task, task_type, now),
    )


def when(instant: datetime | None, now: datetime) -> str:
    """An instant in UTC with how far it is from now."""
    if instant is None:
        return UNKNOWN
    return f"{fmt_instant(instant)} ({ago((now - instant).total_seconds())})"


def status_class(status: RunStatus | TaskStatus | str) -> str:
    value = str(getattr(status, "value", status))
    if value in FAILED:
        return "bad"
    if value in ("eventful", "uneventful", "completed", "done"):
        return "good"
    return "neutral"


__all__: Sequence[str] = (
    "Exact",
    "Filters",
    "Overview",
    "Problems",
    "TaskPage",
    "block",
    "exact",
    "overview",
    "problems",
    "selection",
    "shown",
    "task_page",
)
