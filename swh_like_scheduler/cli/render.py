"""Human output of tasks and runs, in swh-scheduler's layout where it has one."""

from __future__ import annotations

from datetime import datetime

import humanize

from ..domain.jsonable import run_json, task_json
from ..domain.model import ScheduleKind, Task, TaskRun
from ..domain.text import headline, visible

#: the narrowest the error column of :func:`runs_table` gets
ERROR_WIDTH = 60

__all__ = ["run_json", "runs_table", "task_json", "task_lines", "when"]


def when(instant: datetime | None, now: datetime) -> str:
    """``in 4 hours (2019-07-10 17:56:48+00:00)``."""
    if instant is None:
        return ""
    relative = humanize.naturaltime(instant, when=now)
    return f"{relative} ({instant.isoformat(sep=' ', timespec='seconds')})"


def schedule_line(task: Task) -> str:
    kind = task.schedule_kind
    if kind is ScheduleKind.ADAPTIVE:
        return f"  Interval: {task.current_interval}"
    if kind is ScheduleKind.PERIODIC:
        cooldown = f", cooldown {task.cooldown}" if task.cooldown is not None else ""
        if task.cooldown is not None and task.cooldown_is_default:
            cooldown += " (the default: it follows the run time)"
        return f"  Period: {task.period}{cooldown}"
    if kind is ScheduleKind.CRON:
        return f"  Cron: {task.cron} ({task.tz}), max duration {task.cron_max_duration}"
    return f"  Max delay: {task.max_delay or '0:00:00'}"


def task_lines(task: Task, now: datetime) -> list[str]:
    lines = [
        f"Task {task.id}",
        f"  Next run: {when(task.next_run, now)}",
        f"  Deadline: {when(task.deadline, now)}",
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
    header = ("ID", "BACKEND ID", "STATUS", "SCHEDULED", "STARTED", "ENDED", "WORKER", "ERROR")
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
    return instant.isoformat(sep=" ", timespec="seconds") if instant else "-"
