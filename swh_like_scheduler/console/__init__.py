"""The schedule-health console: pages served by the API's app at
``/console/`` (``GET /`` leads there), with the same tokens.

* overview: per task type, OK / WARNING / ERROR with their trend, the
  oldest overdue task, the queue against its limit, runs dispatched and
  ended per minute, failures within the hour, and ``/health`` at the top;
  live (it updates itself every few seconds);
* problems: the tasks in ERROR and WARNING, worst first, filtered and paged;
* a task: its schedule, start times, condition and reasons, cron firings,
  runs with their errors, its job's instants;
* logins: a pasted token or a one-time link, sessions that end at logout,
  "log out everywhere" or when unused (:mod:`.session`, :mod:`.keeper`);
* actions (read-write tokens): run now, respawn, disable, enable, cancel,
  delete; the same in bulk on a filtered selection; pause and resume a type.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ..api.auth import Token
from .session import IDLE


def mount_console(app: FastAPI, tokens: Iterable[Token], *, idle: int = IDLE) -> None:
    """Serve the console on ``app`` for sessions opened with ``tokens``,
    kept in the store of ``app.state.api`` (over after ``idle`` seconds
    unused)."""
    from .keeper import Keeper
    from .login import router as login_router
    from .routes import router
    from .session import Sessions

    api = app.state.api
    app.state.console_keeper = Keeper(Sessions(tokens, idle=idle), api.store, lambda: api.clock())
    app.include_router(login_router)
    app.include_router(router)
    static = Path(__file__).parent / "static"
    app.mount("/console/static", StaticFiles(directory=static), name="console-static")
