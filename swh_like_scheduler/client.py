"""The remote store: :class:`SchedulerStore` over the HTTP API
(``swh scheduler rpc-serve``), swh-scheduler's client pattern.

Every method of the interface is a ``POST /rpc/METHOD`` (:mod:`.wire`
carries the values); the server's errors come back as the same exception
classes, so code written against a local store runs against a remote one.
What cannot cross the network:

- ``transaction()``: each call is its own transaction on the server (the
  methods that must be atomic, like :meth:`put_job`, are atomic there);
- ``end_task_run(s)(apply=...)``: only the listener's outcome policy
  (:func:`~swh_like_scheduler.listener.handler.outcome_applier`) is
  applied, by the server, with its own task types;
- ``import_tasks`` sends the whole stream in one request (atomic, as
  locally), within the server's request size limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import httpx

from . import wire
from .api.routes_rpc import METHODS
from .exceptions import InvalidInput, SchedulerError, StoreError, StoreUnavailable
from .model import Task
from .store.interface import Capabilities, ImportSummary, SchedulerStore

#: seconds a call may take (a claim of thousands of tasks, a bulk import)
TIMEOUT = 120.0


class RemoteStore:
    """A store served by ``swh scheduler rpc-serve`` at ``url``."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )
        self._served: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"RemoteStore({self.url!r})"

    # -- what is not a plain call ------------------------------------------------

    def _about(self) -> dict[str, Any]:
        if self._served is None:
            self._served = self._request("GET", "/rpc")
        return self._served

    @property
    def capabilities(self) -> Capabilities:
        flags = wire.decode(self._about()["capabilities"])
        assert isinstance(flags, Capabilities)
        return flags

    @property
    def max_argument_bytes(self) -> int | None:
        """The server's limit (it enforces it)."""
        limit = self._about().get("max_argument_bytes")
        return limit if isinstance(limit, int) else None

    def close(self) -> None:
        self._http.close()

    @contextmanager
    def transaction(self) -> Iterator[RemoteStore]:
        raise StoreError(
            f"{self.url}: a remote store has no transactions across calls "
            "(each call is atomic on the server)"
        )
        yield self  # pragma: no cover

    def import_tasks(
        self,
        tasks: Iterable[Task],
        *,
        now: Any,
        batch_size: int = 1000,
        progress: Callable[[int, int], None] | None = None,
    ) -> ImportSummary:
        summary = cast(
            ImportSummary,
            self._call("import_tasks", tasks=list(tasks), now=now, batch_size=batch_size),
        )
        if progress is not None:
            progress(summary.created, summary.existing)
        return summary

    def end_task_run(self, backend_id: str, **kwargs: Any) -> Any:
        return self._call("end_task_run", backend_id, **_applied(kwargs))

    def end_task_runs(self, ends: Any, **kwargs: Any) -> Any:
        return self._call("end_task_runs", ends, **_applied(kwargs))

    # -- the calls ----------------------------------------------------------------

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        body = {"args": wire.encode(list(args)), "kwargs": wire.encode(kwargs)}
        return wire.decode(self._request("POST", f"/rpc/{method}", json=body)["result"])

    def _request(self, verb: str, path: str, **options: Any) -> Any:
        try:
            answer = self._http.request(verb, path, **options)
        except httpx.TransportError as exc:
            raise StoreUnavailable(f"{self.url}: {type(exc).__name__}: {exc}") from None
        try:
            data = answer.json()
        except ValueError:
            data = {"detail": answer.text[:500]}
        if answer.status_code == 200:
            return data
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            raise wire.decode_error(data["error"])
        raise _refusal(self.url, answer.status_code, data)


def _applied(kwargs: dict[str, Any]) -> dict[str, Any]:
    apply = kwargs.get("apply")
    if apply is None:
        return kwargs
    name = getattr(apply, "wire_name", None)
    if name is None:
        raise InvalidInput(
            "apply",
            "a remote store applies the outcome policy on the server only "
            "(listener.handler.outcome_applier); a function cannot be sent",
        )
    return {**kwargs, "apply": name}


def _refusal(url: str, status: int, data: Any) -> SchedulerError:
    detail = data.get("detail") if isinstance(data, dict) else data
    if status == 422 and isinstance(detail, list) and detail:
        first = detail[0]
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        return InvalidInput(".".join(loc) or "request", str(first.get("msg")))
    if status == 413:
        return InvalidInput("request", f"{url}: {detail} (the server's request size limit)")
    if status in (401, 403):
        return StoreError(f"{url}: {detail} (set SWH_SCHEDULER_API_TOKEN)")
    if status in (502, 503, 504):
        return StoreUnavailable(f"{url}: HTTP {status}: {detail}")
    return StoreError(f"{url}: HTTP {status}: {detail}")


def _method(name: str) -> Callable[..., Any]:
    def call(self: RemoteStore, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    call.__name__ = name
    call.__doc__ = getattr(SchedulerStore, name).__doc__
    return call


for _name in sorted(METHODS):
    if _name not in vars(RemoteStore):
        setattr(RemoteStore, _name, _method(_name))


def open_remote(url: str, *, token: str | None = None) -> SchedulerStore:
    """A :class:`RemoteStore` typed as the interface it implements."""
    return cast(SchedulerStore, RemoteStore(url, token=token))
