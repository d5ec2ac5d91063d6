"""The live table of ``swh scheduler standalone``, one step at a time.

:func:`snapshot` reads the store once and returns the rows (one per task
type) plus what the next snapshot needs to compute rates; :func:`render`
turns rows into text. Neither touches the terminal, the clock or a process.

What a snapshot reads, with the store's existing methods only:

* every task once (``search_tasks``, by pages): waiting and ready counts, and
  each live or disabled task's condition through
  :func:`swh_like_scheduler.policy.condition` (as ``swh scheduler task status``);
* the recent runs (``get_task_runs``) of the tasks that have an open run or
  changed since shortly before the previous snapshot (``updated_at`` moves
  when a task is claimed and when a run of it ends): runs scheduled/started
  now, runs dispatched and ended since the previous snapshot, failed runs'
  errors.

The cost grows with the number of tasks (like ``task status``); it is meant
for the embedded, demonstration-sized platform.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from .. import policy
from ..domain.model import RunStatus, Task, TaskStatus
from ..store import SchedulerStore, TaskFilter

#: Runs and task updates this much older than the previous snapshot are
#: looked at again: a run is stamped (scheduled, ended) before the
#: transaction that records it commits.
MARGIN = timedelta(seconds=30)
#: The dispatched rate is averaged over this long (the runner dispatches in
#: bursts, one pass at a time: between two refreshes the rate is mostly 0)
RATE_WINDOW = timedelta(seconds=60)
#: Failed runs remembered per task type.
ERRORS_KEPT = 3
#: Recent runs read per changed task.
RUNS_PER_TASK = 10
#: Tasks read per page.
PAGE = 1000

#: Task statuses whose condition is counted (completed and cancelled tasks
#: promise nothing any more).
CONDITION_STATUSES = (TaskStatus.WAITING, TaskStatus.SCHEDULED, TaskStatus.DISABLED)
#: Run statuses counted as failed.
FAILED_RUNS = (RunStatus.FAILED, RunStatus.PERMFAILED, RunStatus.LOST, RunStatus.TIMED_OUT)


@dataclass(frozen=True)
class ErrorLine:
    """One failed run."""

    ended: datetime
    task_id: int
    status: str
    text: str


@dataclass(frozen=True)
class TypeRow:
    """One line of the table."""

    type: str
    #: tasks waiting for their next run, and those of them ready now (the
    #: table shows them apart: WAIT, not ready yet, and READY)
    waiting: int = 0
    ready: int = 0
    #: open runs: dispatched to the broker, and started by a worker
    scheduled: int = 0
    started: int = 0
    #: conditions of the live (and disabled) tasks
    ok: int = 0
    warning: int = 0
    error: int = 0
    #: runs dispatched per second over the last :data:`RATE_WINDOW` (or since
    #: the first snapshot, when younger; None: the first one)
    dispatched_per_s: float | None = None
    #: runs ended since the first snapshot, by outcome
    eventful: int = 0
    uneventful: int = 0
    failed: int = 0
    #: latest failed runs, newest first
    last_errors: tuple[ErrorLine, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The rows at ``taken_at``, and the memory the next snapshot needs."""

    taken_at: datetime
    rows: tuple[TypeRow, ...]
    #: backend ids of the runs already counted as dispatched / ended, with
    #: the instant that made them count (forgotten after 2 x MARGIN)
    dispatched_seen: Mapping[str, datetime] = field(default_factory=dict)
    ended_seen: Mapping[str, datetime] = field(default_factory=dict)
    #: (start, runs dispatched per type) of each interval between two
    #: snapshots within :data:`RATE_WINDOW`, oldest first (each ends where
    #: the next starts, the last at ``taken_at``)
    dispatch_history: tuple[tuple[datetime, Mapping[str, int]], ...] = ()

    def row(self, name: str) -> TypeRow | None:
        return next((r for r in self.rows if r.type == name), None)


def _ended_kind(status: RunStatus) -> str | None:
    if status is RunStatus.EVENTFUL:
        return "eventful"
    if status is RunStatus.UNEVENTFUL:
        return "uneventful"
    if status in FAILED_RUNS:
        return "failed"
    return None


def error_text(status: str, error: str | None, result: object) -> str:
    """The one line that says why a run failed."""
    text = error or ""
    if not text and isinstance(result, Mapping):
        text = str(result.get("error") or "")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else status


def snapshot(store: SchedulerStore, now: datetime, previous: Snapshot | None = None) -> Snapshot:
    """The table at ``now``; ``previous`` (the last snapshot) gives rates and
    the cumulative counts. Reads the store, writes nothing."""
    types = {t.type: t for t in store.get_task_types()}
    counts: dict[str, dict[str, int]] = {name: {} for name in types}

    def bump(name: str, key: str, by: int = 1) -> None:
        per_type = counts[name]
        per_type[key] = per_type.get(key, 0) + by

    since = (previous.taken_at if previous is not None else now) - MARGIN
    candidates: list[Task] = []
    after = 0
    while page := store.search_tasks(TaskFilter(), after_id=after, limit=PAGE):
        after = page[-1].id or after
        for task in page:
            task_type = types.get(task.type)
            if task_type is None:
                continue
            if task.status in CONDITION_STATUSES:
                level = policy.condition(task, task_type, now).level
                bump(task.type, level.value.lower())
            if task.status is TaskStatus.WAITING:
                bump(task.type, "waiting")
                if task.next_run <= now:
                    bump(task.type, "ready")
            if (
                task.status is TaskStatus.SCHEDULED
                or (previous is None and task.failure_count > 0)
                or (task.updated_at is not None and task.updated_at > since)
            ):
                candidates.append(task)

    forget = since - MARGIN
    dispatched_seen = {
        k: v for k, v in (previous.dispatched_seen if previous else {}).items() if v > forget
    }
    ended_seen = {k: v for k, v in (previous.ended_seen if previous else {}).items() if v > forget}
    errors: dict[str, dict[str, ErrorLine]] = {name: {} for name in types}
    if previous is not None:
        for row in previous.rows:
            if row.type in errors:
                errors[row.type] = {
                    f"{e.task_id}@{e.ended.isoformat()}": e for e in row.last_errors
                }
    dispatched: dict[str, int] = {}

    for task in candidates:
        assert task.id is not None
        for run in store.get_task_runs(task.id, limit=RUNS_PER_TASK):
            if run.status is RunStatus.SCHEDULED:
                bump(task.type, "scheduled")
            elif run.status is RunStatus.STARTED:
                bump(task.type, "started")
            if run.scheduled > since and run.backend_id not in dispatched_seen:
                dispatched_seen[run.backend_id] = run.scheduled
                if previous is not None:
                    dispatched[task.type] = dispatched.get(task.type, 0) + 1
            kind = _ended_kind(run.status)
            if kind is None or run.ended is None:
                continue
            if run.ended > since and run.backend_id not in ended_seen:
                ended_seen[run.backend_id] = run.ended
                if previous is not None:
                    bump(task.type, kind)
            if kind == "failed":
                line = ErrorLine(
                    run.ended,
                    task.id,
                    run.status.value,
                    error_text(run.status, run.error, run.result),
                )
                errors[task.type][f"{task.id}@{run.ended.isoformat()}"] = line

    history: tuple[tuple[datetime, Mapping[str, int]], ...] = ()
    if previous is not None:
        recent = tuple(h for h in previous.dispatch_history if h[0] >= now - RATE_WINDOW)
        history = (*recent, (previous.taken_at, dict(dispatched)))
    elapsed = (now - history[0][0]).total_seconds() if history else 0.0
    in_window: dict[str, int] = {}
    for _, per_type in history:
        for name, count in per_type.items():
            in_window[name] = in_window.get(name, 0) + count
    before = {r.type: r for r in previous.rows} if previous is not None else {}
    rows = []
    for name in sorted(types):
        c = counts[name]
        kept = sorted(errors[name].values(), key=lambda e: (e.ended, e.task_id), reverse=True)
        old = before.get(name, TypeRow(name))
        rows.append(
            TypeRow(
                type=name,
                waiting=c.get("waiting", 0),
                ready=c.get("ready", 0),
                scheduled=c.get("scheduled", 0),
                started=c.get("started", 0),
                ok=c.get("ok", 0),
                warning=c.get("warning", 0),
                error=c.get("error", 0),
                dispatched_per_s=(in_window.get(name, 0) / elapsed) if elapsed > 0 else None,
                eventful=old.eventful + c.get("eventful", 0),
                uneventful=old.uneventful + c.get("uneventful", 0),
                failed=old.failed + c.get("failed", 0),
                last_errors=tuple(kept[:ERRORS_KEPT]),
            )
        )
    return Snapshot(now, tuple(rows), dispatched_seen, ended_seen, history)


# --------------------------------------------------------------------------- #
# rendering
# --------------------------------------------------------------------------- #

#: (title, width) of each column after TYPE: disjoint counts, short titles,
#: so that a table of short type names fits 80 columns (:data:`LEGEND`)
COLUMNS = (
    ("WAIT", 5),
    ("READY", 5),
    ("QUEUED", 6),
    ("RUN", 5),
    ("OK", 5),
    ("WARN", 5),
    ("ERROR", 5),
    ("DISP/S", 6),
    ("EVENT", 5),
    ("UNEV", 5),
    ("FAIL", 5),
)
#: what the titles mean, under the table
LEGEND = (
    "WAIT not ready yet, READY may start now, QUEUED sent to the broker, RUN started",
    "OK/WARN/ERROR conditions; DISP/S runs sent/s (last min); EVENT/UNEV/FAIL ended",
)
#: the LAST ERROR column is left out when a terminal leaves it less than
#: this (the latest errors are listed under the table anyway)
LAST_ERROR_MIN = 20

_SPACES = re.compile(r"\s+")


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (``…`` when cut)."""
    text = _SPACES.sub(" ", text).strip()
    if limit <= 0:
        return ""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def age(then: datetime, now: datetime | None) -> str:
    if now is None:
        return then.strftime("%H:%M:%S")
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def _cells(row: TypeRow) -> list[str]:
    rate = "-" if row.dispatched_per_s is None else f"{row.dispatched_per_s:.2f}"
    return [
        str(row.waiting - row.ready),
        str(row.ready),
        str(row.scheduled),
        str(row.started),
        str(row.ok),
        str(row.warning),
        str(row.error),
        rate,
        str(row.eventful),
        str(row.uneventful),
        str(row.failed),
    ]


@dataclass(frozen=True)
class ConsoleLink:
    """A one-time login link to the console, made at start: it holds a
    code, never a token, and opens one session until ``expires_at``."""

    access: str
    url: str
    expires_at: datetime | None = None


def console_lines(
    links: Sequence[ConsoleLink],
    *,
    console_url: str,
    new_link: str,
    token_file: str,
    now: datetime | None = None,
) -> list[str]:
    """What the table shows under its legend at every redraw: the console's
    login links made at start (the first as ``Console: URL``), until when
    each opens a session (or that it expired), and ``new_link``, the command
    that makes another. Without links, the console's address and where the
    token to paste is (``token_file``): a token is never shown."""
    if not links:
        return [
            f"Console: {console_url} (log in with the token in {token_file})",
            f"  a login link: {new_link}",
        ]
    lines = []
    for number, link in enumerate(links):
        when = []
        if number == 0:
            when.append(link.access)
        if link.expires_at is not None:
            until = f"{link.expires_at:%H:%M:%S} UTC"
            expired = now is not None and now >= link.expires_at
            when.append(f"expired at {until}" if expired else f"one session, until {until}")
        head = "Console: " if number == 0 else f"  {link.access}: "
        lines.append(f"{head}{link.url}" + (f" ({'; '.join(when)})" if when else ""))
    lines.append(f"  a new link: {new_link}")
    return lines


def render(
    rows: Sequence[TypeRow],
    *,
    now: datetime | None = None,
    width: int | None = None,
    console: Sequence[str] = (),
) -> str:
    """The table as text: one line per task type, the legend, the
    ``console`` lines (:func:`console_lines`), then the latest errors.

    ``now`` makes error times relative ("12s ago"); ``width`` cuts every line
    to that many characters (a terminal's width), but the console lines (a
    link cut short opens nothing), and leaves out the LAST ERROR column when
    it would be narrower than :data:`LAST_ERROR_MIN`.
    """
    name_width = max([4, *(len(r.type) for r in rows)])
    titles = ["TYPE".ljust(name_width), *(title.rjust(w) for title, w in COLUMNS)]
    fixed = len(" ".join(titles)) + 1
    room = width - fixed if width else 60
    last_column = room >= LAST_ERROR_MIN
    lines = [" ".join([*titles, "LAST ERROR"] if last_column else titles)]
    for row in rows:
        cells = [c.rjust(w) for c, (_, w) in zip(_cells(row), COLUMNS, strict=True)]
        line = [row.type.ljust(name_width), *cells]
        if last_column:
            last = "-"
            if row.last_errors:
                newest = row.last_errors[0]
                text = f"{age(newest.ended, now)} task {newest.task_id}: {newest.text}"
                last = shorten(text, room)
            line.append(last)
        lines.append(" ".join(line))
    totals = TypeRow(
        "total",
        **{
            key: sum(getattr(r, key) for r in rows)
            for key in (
                "waiting",
                "ready",
                "scheduled",
                "started",
                "ok",
                "warning",
                "error",
                "eventful",
                "uneventful",
                "failed",
            )
        },
    )
    rates = [r.dispatched_per_s for r in rows if r.dispatched_per_s is not None]
    totals = replace(totals, dispatched_per_s=sum(rates) if rates else None)
    cells = [c.rjust(w) for c, (_, w) in zip(_cells(totals), COLUMNS, strict=True)]
    lines.append(" ".join([totals.type.ljust(name_width), *cells]))
    lines = _cut([*lines, *LEGEND], width)
    if console:
        lines += ["", *console]
    errors = sorted(
        ((row.type, e) for row in rows for e in row.last_errors),
        key=lambda item: item[1].ended,
        reverse=True,
    )
    if errors:
        told = ["", "Last errors:"]
        for name, e in errors:
            told.append(f"  {age(e.ended, now):>8} {name} task {e.task_id} {e.status}: {e.text}")
        lines += _cut(told, width)
    return "\n".join(lines)


def _cut(lines: Sequence[str], width: int | None) -> list[str]:
    """Each line at most ``width`` characters (``…`` when cut)."""
    if not width:
        return list(lines)
    return [line if len(line) <= width else line[: width - 1] + "…" for line in lines]
