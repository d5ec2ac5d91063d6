"""The console's doors: logging in (a pasted token or a one-time link),
logging out (this session, or every session of the token), and making a
one-time login link (``POST /console/links`` with a bearer token: what
``standalone`` and ``swh scheduler console-link`` print).

A login link carries a random code, never the token: the code opens one
session, within :data:`~.session.LINK_LIFETIME` seconds, and is worthless
after (a browser's history may keep the URL). Opening the link's page
does not use it (a chat's link preview must not log anyone in): the page
posts it, by itself with the console's script, else at a click."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ..api.auth import identify
from .keeper import Keeper, NoSessions
from .routes import (
    SECURITY_HEADERS,
    _form,
    _page,
    _refused,
    _safe_next,
    _same_origin,
    _viewer,
)
from .session import COOKIE, LINK_LIFETIME, Session, Sessions

router = APIRouter(prefix="/console")


def _keeper(request: Request) -> Keeper:
    keeper: Keeper = request.app.state.console_keeper
    return keeper


def _with_cookie(request: Request, target: str, cookie: str) -> RedirectResponse:
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=_keeper(request).sessions.lifetime,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/login", include_in_schema=False)
def login_page(request: Request, next: str = "/console/", ended: str = "") -> HTMLResponse:
    context = {"next": _safe_next(next), "ended": ended}
    return _page(request, "login.html", context, viewer=_viewer(request))


@router.post("/login", include_in_schema=False)
async def login(request: Request) -> Response:
    form = await _form(request)
    viewer = _viewer(request)
    if not _same_origin(request):
        return _refused(request, viewer, 403, "This form was sent from another site.")
    target = _safe_next(form.get("next"))
    try:
        opened = _keeper(request).login(form.get("token", ""))
    except NoSessions as exc:
        return _refused(request, viewer, 503, f"No login here: {exc}.")
    if opened is None:
        context = {"next": target, "error": "No such token."}
        return _page(request, "login.html", context, viewer=viewer, status=401)
    return _with_cookie(request, target, opened[0])


def _ending(request: Request, form: dict[str, str]) -> Session | HTMLResponse:
    viewer = _viewer(request)
    if viewer.session is None:  # ended already: nothing to end
        return _refused(request, viewer, 401, "Log in first: your session has ended.")
    if not Sessions.csrf_ok(viewer.session, form.get("csrf")) or not _same_origin(request):
        return _refused(request, viewer, 403, "This form has no valid CSRF token.")
    return viewer.session


def _logged_out(message: str) -> RedirectResponse:
    response = RedirectResponse(f"/console/login?ended={message}", status_code=303)
    response.delete_cookie(COOKIE, path="/console")
    return response


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    """End this session: the cookie, and every copy of it, is worthless."""
    session = _ending(request, await _form(request))
    if not isinstance(session, Session):
        return session
    _keeper(request).logout(session)
    return _logged_out("one")


@router.post("/logout-everywhere", include_in_schema=False)
async def logout_everywhere(request: Request) -> Response:
    """End every session opened with this session's token, in every browser."""
    session = _ending(request, await _form(request))
    if not isinstance(session, Session):
        return session
    _keeper(request).logout_everywhere(session)
    return _logged_out("all")


@router.get("/link/{code}", include_in_schema=False)
def link_page(request: Request, code: str) -> HTMLResponse:
    """The page of a login link: a form that posts its code (not used yet).
    Its referrer policy stays the console's ``same-origin``: the code goes
    to no other site, and with ``no-referrer`` a browser would send the
    form with ``Origin: null``, which the console refuses."""
    return _page(request, "link.html", {"code": code[:200]}, viewer=_viewer(request))


@router.post("/link", include_in_schema=False)
async def use_link(request: Request) -> Response:
    form = await _form(request)
    viewer = _viewer(request)
    if not _same_origin(request):
        return _refused(request, viewer, 403, "This form was sent from another site.")
    try:
        opened = _keeper(request).redeem(form.get("code", ""))
    except NoSessions as exc:
        return _refused(request, viewer, 503, f"No login here: {exc}.")
    if opened is None:
        message = (
            "This login link is used, expired or unknown: a link opens one session, "
            f"within {LINK_LIFETIME // 60} minutes. Ask for another (swh scheduler "
            "console-link) or paste a token."
        )
        return _refused(request, viewer, 401, message)
    return _with_cookie(request, "/console/", opened[0])


@router.post(
    "/links",
    status_code=201,
    tags=["console"],
    summary="Make a one-time console login link",
    responses={401: {"description": "No valid bearer token"}},
)
def make_link(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> JSONResponse:
    """A URL that opens one console session with this request's token's
    access, within 10 minutes; the token itself is not in it."""
    keeper = _keeper(request)
    access, number = identify(keeper.sessions.tokens, authorization)
    if number is None:
        body = {"detail": "a bearer token is required (Authorization: Bearer SECRET)"}
        headers = {"www-authenticate": "Bearer", **SECURITY_HEADERS}
        return JSONResponse(body, status_code=401, headers=headers)
    code, until = keeper.new_link(number)
    path = f"/console/link/{code}"
    body = {
        "url": str(request.base_url).rstrip("/") + path,
        "path": path,
        "access": "read-write" if access.name == "WRITE" else "read-only",
        "expires_at": until.isoformat(),
    }
    return JSONResponse(body, status_code=201, headers=SECURITY_HEADERS)
