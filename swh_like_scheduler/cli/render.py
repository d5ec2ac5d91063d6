"""Human output of tasks and runs, in swh-scheduler's layout where it has one.

One clock per output: every instant a human output prints is in one zone,
UTC unless the command's ``--tz`` names another (:func:`tz_option`), named
once on a header line (:func:`zone_line`); the policy's sentences printed
in the same output follow it (:func:`..policy.times.shown_in`). JSON keeps
ISO 8601 UTC. One vocabulary: a task's ``next_run`` is its *earliest
start* (can_start_by), its ``deadline`` its *latest start*
(should_start_by); a run is its number, with the Celery id beside it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import click
import humanize

from ..domain.jsonable import run_json, task_json
from ..domain.model import ScheduleKind, Task, TaskRun
from ..domain.text import ELLIPSIS, celery_id, headline, visible
from ..domain.text import run_name as _run_name
from ..domain.validation import zone as parse_zone
from ..policy.condition import ConditionReport
from ..policy.explain import EARLIEST_START, LATEST_START
from ..policy.times import fmt_shown, reader_zone, shown_in

#: the narrowest the error column of :func:`runs_table` gets
ERROR_WIDTH = 60

#: the narrowest a key is cut to, and a condition's sentence, in :func:`tasks_table`
KEY_WIDTH = 24
DETAIL_WIDTH = 40

__all__ = [
    "EARLIEST_START",
    "LATEST_START",
    "celery_id",
    "one_clock",
    "run_json",
    "run_name",
    "runs_table",
    "shorten",
    "task_json",
    "task_lines",
    "tasks_table",
    "tz_option",
    "when",
    "zone_line",
]


def _zone(ctx: click.Context, param: click.Parameter, value: str) -> ZoneInfo:
    return parse_zone("--tz", value)


#: what ``--tz`` says of itself
TZ_HELP = "Show the times in this IANA time zone (JSON stays UTC)."


def tz_option(help: str = TZ_HELP) -> Any:
    """``--tz ZONE`` (default UTC): the one zone of a human output, checked
    with zoneinfo (an unknown name is refused, naming ``--tz``); the
    command gets a :class:`~zoneinfo.ZoneInfo` as ``zone``."""
    return click.option(
        "--tz", "zone", default="UTC", show_default=True, metavar="ZONE", callback=_zone, help=help
    )


def zone_name(zone: tzinfo) -> str:
    return zone.key if isinstance(zone, ZoneInfo) else str(zone)


def zone_line(zone: tzinfo) -> str:
    """The header line that names the output's zone: ``Times in UTC``."""
    return f"Times in {zone_name(zone)}"


@contextmanager
def one_clock(zone: tzinfo, *, as_json: bool = False) -> Iterator[None]:
    """Within the block, a human output's instants, and those of the
    policy's sentences, are in ``zone``; JSON (``as_json``) is left as it
    is (ISO 8601 UTC, the sentences as the API gives them)."""
    if as_json:
        yield
        return
    with shown_in(zone):
        yield


def shown(instant: datetime) -> str:
    """``2019-07-10 17:56:48+00:00``: in the output's zone, to the second."""
    return fmt_shown(instant, reader_zone() or UTC)


def short(instant: datetime | None, empty: str = "-") -> str:
    """``2019-07-10 17:56``: in the output's zone, to the minute (a table's
    cell; its header line names the zone)."""
    if instant is None:
        return empty
    return instant.astimezone(reader_zone() or UTC).strftime("%Y-%m-%d %H:%M")


def when(instant: datetime | None, now: datetime) -> str:
    """``in 4 hours (2019-07-10 17:56:48+00:00)``."""
    if instant is None:
        return ""
    relative = humanize.naturaltime(instant, when=now)
    return f"{relative} ({shown(instant)})"


def run_name(run: TaskRun) -> str:
    """``run 216 (celery id dbf6279e…)``: a run by its number, its Celery id beside."""
    return _run_name(run.id, run.backend_id)


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, its middle an ellipsis when
    cut (a key's prefix and its end both say which one it is)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = width // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def duration_text(value: timedelta | None) -> str:
    """``value`` as ``str(timedelta)`` does, to the millisecond: a default
    cooldown follows the measured run time and an adaptive interval is
    multiplied, so both carry microseconds nobody reads (``0:00:03.954``,
    not ``0:00:03.954478``; ``0:54:00`` stays as it is)."""
    if value is None:
        return "-"
    rounded = timedelta(milliseconds=round(value / timedelta(milliseconds=1)))
    text = str(rounded)
    return text[:-3] if rounded.microseconds else text


def schedule_line(task: Task) -> str:
    kind = task.schedule_kind
    if kind is ScheduleKind.ADAPTIVE:
        return f"  Interval: {duration_text(task.current_interval)}"
    if kind is ScheduleKind.PERIODIC:
        cooldown = f", cooldown {duration_text(task.cooldown)}" if task.cooldown is not None else ""
        if task.cooldown is not None and task.cooldown_is_default:
            cooldown += " (the default: it follows the run time)"
        return f"  Period: {duration_text(task.period)}{cooldown}"
    if kind is ScheduleKind.CRON:
        max_duration = duration_text(task.cron_max_duration)
        return f"  Cron: {task.cron} ({task.tz}), max duration {max_duration}"
    return f"  Max delay: {duration_text(task.max_delay or timedelta(0))}"


def task_lines(task: Task, now: datetime) -> list[str]:
    lines = [
        f"Task {task.id}",
        f"  {EARLIEST_START}: {when(task.next_run, now)}",
        f"  {LATEST_START}: {when(task.deadline, now)}",
        schedule_line(task),
        f"  Type: {task.type}",
        f"  Policy: {task.policy}",
        f"  Schedule: {task.schedule_kind}",
        f"  Status: {task.status}",
        f"  Priority: {task.priority}",
    ]
    if task.key:
        lines.append(f"  Key: {task.key}")
    if task.blackout_periods:
        windows = ", ".join(str(b) for b in task.blackout_periods)
        lines.append(f"  Blackout: {windows} ({task.tz})")
    if task.dont_run_on_nodes:
        lines.append(f"  Not on nodes: {', '.join(task.dont_run_on_nodes)}")
    if task.last_start_at:
        lines.append(f"  Last run: {when(task.last_start_at, now)}")
    if task.failure_count:
        lines.append(f"  Consecutive failures: {task.failure_count}")
    lines.append("  Args:")
    lines.extend(f"    {arg!r}" for arg in task.args)
    lines.append("  Keyword args:")
    lines.extend(f"    {key}: {value!r}" for key, value in task.kwargs.items())
    return lines


def runs_table(runs: list[TaskRun], *, columns: int = 80, full: bool = False) -> list[str]:
    """The runs as a table; the last column is each run's error: its first
    line, cut to the room the terminal's ``columns`` leave (at least
    :data:`ERROR_WIDTH`); with ``full``, the whole of it, the lines after
    the first under the run's row. Every cell shows its invisible
    characters as escapes (:func:`..text.visible`), before the widths are
    measured and the error cut."""
    header = ("RUN", "CELERY ID", "STATUS", "SCHEDULED", "STARTED", "ENDED", "WORKER", "ERROR")
    rows = [header]
    for run in runs:
        rows.append(
            (
                str(run.id),
                visible(run.backend_id),
                run.status.value,
                _short(run.scheduled),
                _short(run.started),
                _short(run.ended),
                visible(run.worker or ""),
                "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    # the error column starts after the others and their gaps
    start = sum(widths[:-1]) + 2 * (len(header) - 1)
    room = max(ERROR_WIDTH, columns - 1 - start)
    out = [lines[0]]
    for run, line in zip(runs, lines[1:], strict=True):
        # each line escaped on its own: the breaks stay lines, nothing else hides
        text = "\n".join(visible(part) for part in (run.error or "").strip().splitlines())
        if not text:
            out.append(line)
            continue
        first, *rest = text.splitlines()
        cell = first.rstrip() if full else headline(text, room)
        out.append(f"{line.ljust(start)}{cell}")
        if full:
            out.extend(f"    {more.rstrip()}" for more in rest if more.strip())
    return out


def _short(instant: datetime | None) -> str:
    return shown(instant) if instant else "-"


def tasks_table(
    rows: Sequence[tuple[Task, ConditionReport | None]],
    *,
    columns: int = 80,
    detail: bool = False,
) -> list[str]:
    """One line per task, columns aligned: its id, type, status, condition
    (level and reason), earliest start (``-`` when it is not live), last
    run and key, the key cut in its middle to the room the terminal's
    ``columns`` leave (at least :data:`KEY_WIDTH`). With ``detail``, each
    condition's sentence follows, cut to the room left (at least
    :data:`DETAIL_WIDTH`), and the keys to :data:`KEY_WIDTH`. Every cell
    shows its invisible characters as escapes (:func:`..text.visible`)."""
    header = ("ID", "TYPE", "STATUS", "CONDITION", EARLIEST_START.upper(), "LAST RUN")
    body = []
    for task, report in rows:
        body.append(
            (
                str(task.id),
                visible(task.type),
                task.status.value,
                f"{report.level} {report.reason}" if report is not None else "-",
                short(task.next_run) if task.status.is_live else "-",
                short(task.last_start_at, "never"),
            )
        )
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(len(header))]
    start = sum(widths) + 2 * len(widths)
    room = KEY_WIDTH if detail else max(KEY_WIDTH, columns - 1 - start)
    keys = [shorten(visible(task.key or "-"), room) for task, _ in rows]
    key_width = max([3, *map(len, keys)])
    room = max(DETAIL_WIDTH, columns - 1 - start - key_width - 2)

    def line(cells: Sequence[str], key: str, more: str | None) -> str:
        text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
        text = f"{text}  {key}"
        return f"{text.ljust(start + key_width)}  {more}".rstrip() if detail else text.rstrip()

    lines = [line(header, "KEY", "DETAIL")]
    for cells, key, (_, report) in zip(body, keys, rows, strict=True):
        why = headline(visible(report.detail, lines=True), room) if report is not None else ""
        lines.append(line(cells, key, why))
    return lines
