"""What routes depend on: the API's state and the caller's access."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..domain.exceptions import InvalidInput
from .auth import Access, access_of
from .state import ApiState


def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


State = Annotated[ApiState, Depends(api_state)]


def no_nul_parameters(request: Request) -> None:
    """A NUL character in a path or query parameter is a 422 naming it (the
    database could not even compare such text)."""
    for where, values in (("path", request.path_params), ("query", request.query_params)):
        for name, value in values.items():
            if isinstance(value, str) and "\x00" in value:
                request.state.error_prefix = [where]
                raise InvalidInput(name, "contains a NUL character (%00)")


def require(state: ApiState, authorization: str | None, wanted: Access) -> None:
    """401 without a valid token, 403 with one that may not do ``wanted``."""
    if wanted is Access.READ and state.settings.open_reads:
        return
    granted = access_of(state.settings.tokens, authorization)
    if granted is Access.NONE:
        raise HTTPException(
            status_code=401,
            detail="a bearer token is required (Authorization: Bearer SECRET)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if granted < wanted:
        raise HTTPException(status_code=403, detail="this token may only read")


#: the bearer token, documented as the API's security scheme
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="A token of rpc-serve (--tokens / SWH_SCHEDULER_API_TOKENS): SECRET:rw "
    "may read and write, SECRET:ro may only read",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]


def bearer_header(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The ``Authorization`` value these credentials came from."""
    return None if credentials is None else f"{credentials.scheme} {credentials.credentials}"


def _needs(wanted: Access):  # type: ignore[no-untyped-def]
    def check(state: State, credentials: Credentials) -> None:
        require(state, bearer_header(credentials), wanted)

    return Depends(check)


#: route dependencies: the request may read / write
READ = _needs(Access.READ)
WRITE = _needs(Access.WRITE)
