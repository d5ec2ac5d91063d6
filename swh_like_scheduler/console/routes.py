"""The console's pages under ``/console/`` (HTML, server-rendered).

Reading needs a session opened with any token (or none with
``open_reads``); acting needs a session of a read-write token and the
session's CSRF token in the form, and a form posted from another origin is
refused. Every action is one of the store's operations, and its page says
what it did."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ..api.auth import Access
from ..api.state import ApiState
from ..domain.exceptions import InvalidInput, NotFound, SchedulerError
from ..domain.model import RunStatus, Task
from ..domain.text import celery_id
from ..domain.validation import parse_datetime
from ..health import conditions
from ..policy.times import fmt_duration, fmt_instant, hours_text
from ..store.values import LEVEL_RANKS as LEVELS
from ..store.values import BulkAction, BulkFilter, BulkReport
from . import views
from .forecast_view import forecast_view
from .keeper import Keeper
from .origins import coverage
from .session import COOKIE, Session, Sessions

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.globals.update(
    ago=views.ago,
    number=views.number,
    when=views.when,
    fmt_instant=fmt_instant,
    celery_id=celery_id,
    fmt_duration=fmt_duration,
    status_class=views.status_class,
    overdue_text=views.overdue_text,
    queue_text=views.queue_text,
    rates_text=views.rates_text,
    hour_text=views.hour_text,
    urlencode=urlencode,
    fmt_duration_s=views.overdue_text,
    qs=lambda base, **extra: urlencode({**base, **extra}),
)
# every {{ }} shows invisible and reordering characters as escapes, except
# a form's value sent back (| exact) and a block of lines (| block)
templates.env.finalize = views.shown
templates.env.filters.update(exact=views.exact, block=views.block)
router = APIRouter(prefix="/console", include_in_schema=False)

#: headers of every console response: no script but ours, no framing
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
#: largest selection a bulk action takes at once
BULK_MAX = 100_000
#: ids per store call of a bulk action
BULK_CHUNK = 1000


@dataclass(frozen=True)
class Viewer:
    """Who looks at a page: what they may do, and their session (if any)."""

    access: Access
    session: Session | None

    @property
    def can_write(self) -> bool:
        return self.access >= Access.WRITE

    @property
    def csrf(self) -> str:
        return self.session.csrf if self.session else ""


def _state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def _viewer(request: Request, *, seen: bool = True) -> Viewer:
    """Who sends ``request``: its session while open (``seen``: the request
    counts as a use of it), else what open reads allow."""
    keeper: Keeper = request.app.state.console_keeper
    session = keeper.current(request.cookies.get(COOKIE), seen=seen)
    if session is not None:
        return Viewer(session.access, session)
    opened = _state(request).settings.open_reads
    return Viewer(Access.READ if opened else Access.NONE, None)


def _page(
    request: Request, name: str, context: dict[str, Any], *, viewer: Viewer, status: int = 200
) -> HTMLResponse:
    response = templates.TemplateResponse(
        request,
        name,
        {"viewer": viewer, "now": _state(request).clock(), **context},
        status_code=status,
    )
    response.headers.update(SECURITY_HEADERS)
    return response


def _to_login(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/console/login?{urlencode({'next': target})}", status_code=303)


def _refused(request: Request, viewer: Viewer, status: int, message: str) -> HTMLResponse:
    context = {"title": "Refused", "message": message}
    return _page(request, "message.html", context, viewer=viewer, status=status)


def _safe_next(target: str | None) -> str:
    """Where to go after logging in: a console path of this site only."""
    if not target:
        return "/console/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/console/"):
        return "/console/"
    return target


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _same_origin(request: Request) -> bool:
    """A browser names the page a form came from; it must be this site."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


def _writer(request: Request, form: dict[str, str]) -> Viewer | HTMLResponse:
    """The viewer of a state-changing request, or the page refusing it."""
    viewer = _viewer(request)
    if viewer.session is None:
        return _refused(request, viewer, 401, "Log in first: your session has ended.")
    if not _same_origin(request):
        return _refused(request, viewer, 403, "This form was sent from another site.")
    if not Sessions.csrf_ok(viewer.session, form.get("csrf")):
        return _refused(
            request, viewer, 403, "This form has no valid CSRF token: reload the page, try again."
        )
    if not viewer.can_write:
        return _refused(request, viewer, 403, "Your token may only read.")
    return viewer


# -- reading -------------------------------------------------------------------


@router.get("/")
def overview_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer.access is Access.NONE:
        return _to_login(request)
    context = {"view": views.overview(_state(request)), "message": _message(request)}
    return _page(request, "overview.html", context, viewer=viewer)


@router.get("/live")
def live(request: Request) -> Response:
    """The overview's figures for the page's live update."""
    # the page's own updates do not keep its session from going idle
    if _viewer(request, seen=False).access is Access.NONE:
        return JSONResponse({"detail": "log in"}, status_code=401)
    response = JSONResponse(views.overview(_state(request)).live())
    response.headers.update(SECURITY_HEADERS)
    return response


def _filters(request: Request) -> views.Filters:
    query = request.query_params
    return views.Filters(
        **{name: query.get(name, "")[:200] for name in ("type", "level", "kind", "priority", "q")}
    )


def _page_number(value: str | None) -> int:
    return int(value) if value and value.isdigit() and len(value) < 9 else 1


@router.get("/problems")
def problems_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer.access is Access.NONE:
        return _to_login(request)
    found = views.problems(
        _state(request), _filters(request), _page_number(request.query_params.get("page"))
    )
    message = _message(request)
    return _page(request, "problems.html", {"view": found, "message": message}, viewer=viewer)


@router.get("/origins")
def origins_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer.access is Access.NONE:
        return _to_login(request)
    context = {"view": coverage(_state(request).store), "message": _message(request)}
    return _page(request, "origins.html", context, viewer=viewer)


@router.get("/forecast")
def forecast_page(request: Request) -> Response:
    viewer = _viewer(request)
    if viewer.access is Access.NONE:
        return _to_login(request)
    context = {
        "view": forecast_view(_state(request)),
        "hours": hours_text,
        "message": _message(request),
    }
    return _page(request, "forecast.html", context, viewer=viewer)


@router.get("/tasks/{task_id}")
def task_page(request: Request, task_id: int) -> Response:
    viewer = _viewer(request)
    if viewer.access is Access.NONE:
        return _to_login(request)
    found = views.task_page(_state(request), task_id) if 0 < task_id < 2**63 else None
    if found is None:
        return _refused(request, viewer, 404, f"There is no task {task_id}.")
    return _page(request, "task.html", {"page": found, "message": _message(request)}, viewer=viewer)


# -- acting --------------------------------------------------------------------

#: what a finished action says, by its code in the redirect
MESSAGES = {
    "run-now": "will run at the runner's next pass",
    "respawn": "was respawned",
    "disable": "was disabled",
    "enable": "was enabled",
    "cancel": "was cancelled",
    "delete": "was deleted",
    "pause": "is paused",
    "resume": "is resumed",
}


_WHAT = re.compile(r"Task \d{1,19}|Task type [A-Za-z0-9_.-]{1,100}")


def _message(request: Request) -> str | None:
    query = request.query_params
    did = query.get("did", "")
    if did.startswith("bulk-"):
        return _bulk_message(did[5:], query)
    if did == "recount":
        return (
            "Counted again."
            if query.get("done") == "1"
            else "Counting again: it goes on in the background, reload in a while."
        )
    if did in MESSAGES:
        # what a link may name: a task or a type, never free text
        what = query.get("what", "")
        if not _WHAT.fullmatch(what):
            what = "It"
        if query.get("changed") == "0":
            return f"{what}: {_unchanged_reason(request, did, what)}."
        return f"{what} {MESSAGES[did]}."
    return None


def _bulk_message(action: str, query: Any) -> str | None:
    """What a bulk action did, and why it left tasks alone (from numbers
    in the link only, never its words)."""
    numbers = {k: query.get(k, "0") for k in ("n", "changed", "gone", "moved", "held")}
    if action not in BULK_ACTIONS or not all(v.isdigit() and len(v) < 10 for v in numbers.values()):
        return None
    n = {k: int(v) for k, v in numbers.items()}
    level = query.get("level", "")
    said = f"{BULK_ACTIONS[action][0]}: {n['changed']:,} of {n['n']:,} tasks changed."
    why = []
    if n["gone"]:
        why.append(f"{n['gone']:,} no longer matched the filters")
    if n["moved"]:
        if level in LEVELS:
            why.append(f"{n['moved']:,} are no longer in {level} (checked as they were written)")
        else:
            why.append(f"{n['moved']:,} changed since they were counted")
    if n["held"]:
        why.append(f"{n['held']:,} were held (an open run, or the same task live already)")
    if why:
        said += " Left alone: " + "; ".join(why) + "."
    return said


def _unchanged_reason(request: Request, action: str, what: str) -> str:
    """Why ``action`` changed nothing, read from the store now (the link
    names the task only, never the words)."""
    if not what.startswith("Task ") or not what[5:].isdigit():
        return "unchanged (it already was)"
    state = _state(request)
    return conditions.unchanged_reason(state.store, action, int(what[5:]), state.clock())


def _cancel(state: ApiState, ids: Sequence[int], now: datetime) -> list[Task]:
    """Cancel, and revoke the runs whose messages may still be queued."""
    changed = state.store.cancel_tasks(ids, now=now)
    if changed and state.revoke is not None:
        pending = [
            run.backend_id
            for task in changed
            for run in state.store.get_task_runs(task.id or 0, limit=1)
            if run.status is RunStatus.CANCELLED and not run.started
        ]
        if pending:
            state.revoke(pending)
    return changed


@dataclass
class _Tally:
    """What a bulk action did over its chunks."""

    matched: int = 0
    changed: int = 0

    def add(self, report: BulkReport) -> None:
        self.matched += report.matched
        self.changed += report.changed


def _bulk_store_action(state: ApiState, action: str, ids: list[int], level: str) -> BulkReport:
    """The store's bulk action on a chunk of the confirmed selection: each
    task's level is checked again as it is written (one that got better
    since the census is left alone: not matched), and a cancel's
    dispatched runs are revoked."""
    criteria = BulkFilter(ids=tuple(ids), condition=(level,) if level else None)
    report = state.store.apply_bulk(
        BulkAction(action), criteria, now=state.clock(), batch_size=len(ids)
    )
    if report.revoke and state.revoke is not None:
        state.revoke(list(report.revoke))
    return report


def _acts(state: ApiState, form: dict[str, str]) -> dict[str, Callable[[list[int]], list[Any]]]:
    now = state.clock()
    store = state.store

    def respawn_at(ids: list[int]) -> list[Task]:
        given = form.get("at", "").strip()
        if len(given) == 16:  # a datetime-local field: minutes, no zone (UTC)
            given += ":00"
        at = parse_datetime("at", given + "+00:00") if given else now
        return store.respawn_tasks(ids, next_run=at, now=now)

    return {
        "run-now": lambda ids: store.respawn_tasks(ids, next_run=now, now=now),
        "respawn": respawn_at,
        "disable": lambda ids: store.disable_tasks(ids, now=now),
        "enable": lambda ids: store.enable_tasks(ids, now=now),
        "cancel": lambda ids: _cancel(state, ids, now),
        "delete": lambda ids: [None] * store.delete_tasks(ids),
    }


def _recount(state: ApiState) -> None:
    if state.table_counts is not None:
        state.table_counts.soon()


#: seconds a recount asked for in the console may assess tasks before the
#: page answers (the rest goes on in the background)
RECOUNT_BUDGET = 5.0


@router.post("/recount")
async def recount(request: Request) -> Response:
    """Run the census step now (within :data:`RECOUNT_BUDGET`), then show
    the problem list again with the same filters."""
    from ..domain.records import default_holder
    from ..health.census import refresh

    form = await _form(request)
    viewer = _writer(request, form)
    if isinstance(viewer, HTMLResponse):
        return viewer
    state = _state(request)
    step = refresh(
        state.store, state.clock(), holder=f"console:{default_holder()}", budget=RECOUNT_BUDGET
    )
    _recount(state)
    filters = {
        name: form[name][:200]
        for name in ("type", "level", "kind", "priority", "q")
        if form.get(name)
    }
    said = {"did": "recount", "done": str(int(step.census is not None))}
    return RedirectResponse(f"/console/problems?{urlencode({**said, **filters})}", status_code=303)


@router.post("/tasks/{task_id}/{action}")
async def act_on_task(request: Request, task_id: int, action: str) -> Response:
    form = await _form(request)
    viewer = _writer(request, form)
    if isinstance(viewer, HTMLResponse):
        return viewer
    state = _state(request)
    acts = _acts(state, form)
    if action not in acts:
        return _refused(request, viewer, 404, f"There is no action {action!r}.")
    if not 0 < task_id < 2**63:
        return _refused(request, viewer, 404, f"There is no task {task_id}.")
    if action == "delete" and form.get("confirm") != "yes":
        return _refused(request, viewer, 400, "Tick the box to confirm the deletion.")
    try:
        changed = acts[action]([task_id])
    except InvalidInput as error:
        return _refused(request, viewer, 422, f"{error.field}: {error.message}")
    _recount(state)
    query = urlencode({"did": action, "what": f"Task {task_id}", "changed": int(bool(changed))})
    if action == "delete":
        return RedirectResponse(f"/console/problems?{query}", status_code=303)
    return RedirectResponse(f"/console/tasks/{task_id}?{query}", status_code=303)


@router.post("/types/{name}/{action}")
async def act_on_type(request: Request, name: str, action: str) -> Response:
    form = await _form(request)
    viewer = _writer(request, form)
    if isinstance(viewer, HTMLResponse):
        return viewer
    state = _state(request)
    try:
        if action == "pause":
            state.store.pause_task_type(name, now=state.clock())
        elif action == "resume":
            state.store.resume_task_type(name)
        else:
            return _refused(request, viewer, 404, f"There is no action {action!r}.")
    except NotFound as error:
        return _refused(request, viewer, 404, str(error))
    query = urlencode({"did": action, "what": f"Task type {name}"})
    return RedirectResponse(f"/console/?{query}", status_code=303)


#: bulk actions: (what the result says, the button's words)
BULK_ACTIONS = {
    "disable": ("Disabled", "Disable"),
    "enable": ("Enabled", "Enable"),
    "run-now": ("Run now", "Run now"),
    "cancel": ("Cancelled", "Cancel"),
}


def _bulk_context(
    request: Request, action: str, filters: views.Filters, note: str | None = None
) -> dict[str, Any]:
    sample, total, counted = views.selection(_state(request), filters, limit=20)
    return {
        "action": action,
        "words": BULK_ACTIONS[action][1],
        "filters": filters,
        "count": total,
        "sample": [p.id for p in sample],
        "generation": 0 if counted is None else counted.generation,
        "too_many": total > BULK_MAX,
        "limit": BULK_MAX,
        "note": note,
    }


@router.get("/bulk")
def bulk_confirm(request: Request, action: str = "") -> Response:
    viewer = _viewer(request)
    if viewer.access is Access.NONE:
        return _to_login(request)
    if action not in BULK_ACTIONS:
        return _refused(request, viewer, 404, f"There is no bulk action {action!r}.")
    context = _bulk_context(request, action, _filters(request))
    return _page(request, "bulk.html", context, viewer=viewer)


@router.post("/bulk")
async def bulk_apply(request: Request) -> Response:
    form = await _form(request)
    viewer = _writer(request, form)
    if isinstance(viewer, HTMLResponse):
        return viewer
    action = form.get("action", "")
    if action not in BULK_ACTIONS:
        return _refused(request, viewer, 404, f"There is no bulk action {action!r}.")
    filters = views.Filters(
        **{name: form.get(name, "")[:200] for name in ("type", "level", "kind", "priority", "q")}
    )
    state = _state(request)
    matching, total, _ = views.selection(state, filters, limit=BULK_MAX + 1)
    confirmed = form.get("expected", "")
    if total > BULK_MAX:
        return _refused(request, viewer, 413, f"A bulk action takes at most {BULK_MAX:,} tasks.")
    if not confirmed.isdigit() or len(confirmed) > 9 or total > int(confirmed):
        # more tasks than the ones confirmed would be acted on
        note = (
            f"{total:,} tasks match now, more than the {confirmed or 'none'} you confirmed: "
            "confirm the new selection."
        )
        context = _bulk_context(request, action, filters, note)
        return _page(request, "bulk.html", context, viewer=viewer, status=409)
    act = _acts(state, form)[action]
    ids = [p.id for p in matching]
    tally = _Tally()
    try:
        for start in range(0, len(ids), BULK_CHUNK):
            chunk = ids[start : start + BULK_CHUNK]
            if action in ("disable", "enable", "cancel"):
                tally.add(_bulk_store_action(state, action, chunk, filters.level))
            else:
                acted = len(act(chunk))
                tally.add(BulkReport(BulkAction.DISABLE, matched=acted, changed=acted))
    except SchedulerError as error:
        return _refused(
            request, viewer, 503, f"Stopped after {tally.changed:,} tasks changed: {error}"
        )
    _recount(state)
    said = {
        "did": f"bulk-{action}",
        "n": int(confirmed),
        "changed": tally.changed,
        "gone": int(confirmed) - len(ids),
        "moved": len(ids) - tally.matched,
        "held": tally.matched - tally.changed,
    }
    query = urlencode({**said, **filters.query()})
    return RedirectResponse(f"/console/problems?{query}", status_code=303)
