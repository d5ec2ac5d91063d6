"""The schedule-health console: pages served by the API's app at
``/console/`` (``GET /`` leads there), with the same tokens.

* overview: per task type, OK / WARNING / ERROR with their trend, the
  oldest overdue task, the queue against its limit, runs dispatched and
  ended per minute, failures within the hour, and ``/health`` at the top;
  live (it updates itself every few seconds);
* problems: the tasks in ERROR and WARNING, worst first, filtered and paged;
* a task: its schedule, start times, condition and reasons, cron firings,
  runs with their errors, its job's instants;
* actions (read-write tokens): run now, respawn, disable, enable, cancel,
  delete; the same in bulk on a filtered selection; pause and resume a type.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ..api.auth import Token


def mount_console(app: FastAPI, tokens: Iterable[Token]) -> None:
    """Serve the console on ``app`` for sessions opened with ``tokens``."""
    from .routes import router
    from .session import Sessions

    app.state.console_sessions = Sessions(tokens)
    app.include_router(router)
    static = Path(__file__).parent / "static"
    app.mount("/console/static", StaticFiles(directory=static), name="console-static")
