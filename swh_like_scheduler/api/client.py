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

The server bounds each read (:data:`~.api.routes_rpc.READ_CAPS`); what can
be paged is paged here, so a caller asks as much as of a local store:
``search_tasks`` by id, ``get_tasks``, ``origin_visit_stats_get`` and
``get_listers_by_id`` in chunks of ids, ``preview_bulk`` window after window. A read that cannot
be paged (``list_pending``, ``get_task_runs``) past its cap is the
server's 422 naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import httpx

from ..domain.exceptions import InvalidInput, SchedulerError, StoreError, StoreUnavailable
from ..domain.model import Task
from ..store import wire
from ..store.interface import Capabilities, ImportSummary, SchedulerStore
from ..store.values import BULK_MAX_SCAN, BulkReport
from .routes_rpc import METHODS, READ_CAPS

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

    # -- reads paged within the server's caps ----------------------------------

    def search_tasks(self, *args: Any, after_id: Any = 0, limit: Any = 100, **kwargs: Any) -> Any:
        cap = READ_CAPS["search_tasks"]["limit"]
        if not _number(limit) or limit <= cap:
            return self._call("search_tasks", *args, after_id=after_id, limit=limit, **kwargs)
        found: list[Task] = []
        while len(found) < limit:
            want = min(cap, limit - len(found))
            page = self._call("search_tasks", *args, after_id=after_id, limit=want, **kwargs)
            found.extend(page)
            if len(page) < want:
                break
            after_id = page[-1].id
        return found

    def get_tasks(self, ids: Any) -> Any:
        return self._chunked("get_tasks", ids)

    def origin_visit_stats_get(self, ids: Any) -> Any:
        return self._chunked("origin_visit_stats_get", ids)

    def preview_bulk(
        self, action: Any, criteria: Any, *, now: Any, after_id: Any = 0, scan: Any = 10_000
    ) -> Any:
        cap = READ_CAPS["preview_bulk"]["scan"]
        if not _number(scan) or scan <= cap or scan > BULK_MAX_SCAN:
            # within the cap, or the store's own refusal
            return self._call(
                "preview_bulk", action, criteria, now=now, after_id=after_id, scan=scan
            )
        report: BulkReport | None = None
        left = scan
        while True:
            window = min(cap, left)
            part = self._call(
                "preview_bulk", action, criteria, now=now, after_id=after_id, scan=window
            )
            report = part if report is None else report.then(part)
            left -= window
            if part.next_after_id is None or left <= 0:
                return report
            after_id = part.next_after_id

    def get_listers_by_id(self, lister_ids: Any) -> Any:
        return self._chunked("get_listers_by_id", lister_ids, "lister_ids")

    def _chunked(self, method: str, ids: Any, name: str = "ids") -> Any:
        cap = READ_CAPS[method][name]
        if not isinstance(ids, list | tuple) or len(ids) <= cap:
            return self._call(method, ids)
        return [
            found
            for at in range(0, len(ids), cap)
            for found in self._call(method, ids[at : at + cap])
        ]

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


def _number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
