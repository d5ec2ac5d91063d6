"""The methods of swh-scheduler's ``SchedulerInterface`` served under
``/swh/`` (:mod:`.routes_swh`), each on this scheduler's store, and those
that mean nothing here, with why.

Each endpoint takes the reference method's arguments by name (its client
sends every one, defaults included) and refuses any other, naming it.
Where this scheduler cannot do what the reference's argument asks, the
call is refused saying so (``update_last_seen=False``, ``tablesample``),
never done otherwise in silence.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..domain.exceptions import DuplicateTaskType, InvalidInput, SchedulerError
from ..domain.jsonable import without_secrets
from ..domain.model import Task
from ..intake.builders import task_from_input, task_type_from_input
from ..store.values import TaskFilter
from ..visits.policy import Cooldowns, VisitPolicy
from . import swh_listers
from . import swh_models as m
from .routes_bulk import MAX_SCAN
from .routes_tasks import MAX_PAGE
from .rpc_caps import MAX_NAMES, READ_CAPS
from .state import ApiState
from .swh_codec import Paged

#: an argument without a default
REQUIRED = object()
#: the most rows a search reads to find its tasks (``after`` is checked on
#: the rows read; past this, the caller narrows the search)
SEARCH_SCAN = MAX_SCAN


class UnknownPolicy(InvalidInput):
    """A visit policy this scheduler does not have (the reference's ``UnknownPolicy``)."""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One method: its name, whether it only reads, its arguments with
    their defaults (:data:`REQUIRED`: none) and what serves it."""

    method: str
    reads: bool
    parameters: dict[str, Any]
    serve: Callable[..., Any]

    def call(self, state: ApiState, given: dict[str, Any]) -> Any:
        unknown = sorted(str(k) for k in set(given) - set(self.parameters))
        if unknown:
            raise InvalidInput(unknown[0], f"is not an argument of {self.method}")
        arguments = {}
        for name, default in self.parameters.items():
            if name in given:
                arguments[name] = given[name]
            elif default is REQUIRED:
                raise InvalidInput(name, f"is required by {self.method}")
            else:
                arguments[name] = default
        try:
            return self.serve(state, **arguments)
        except SchedulerError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as error:
            # values of the wrong kind (a text where a list goes...): the caller's
            raise InvalidInput(
                "arguments", f"do not fit {self.method}: {type(error).__name__}: {error}"
            ) from None


ENDPOINTS: dict[str, Endpoint] = {}


def endpoint(path: str, *, reads: bool, **parameters: Any) -> Callable[..., Any]:
    def register(serve: Callable[..., Any]) -> Callable[..., Any]:
        ENDPOINTS[path] = Endpoint(serve.__name__, reads, parameters, serve)
        return serve

    return register


# -- small checks ----------------------------------------------------------


def _listed(where: str, value: Any, cap: int) -> list[Any]:
    if isinstance(value, str | bytes | dict) or not isinstance(value, list | tuple):
        raise InvalidInput(where, f"{type(value).__name__} is not a list")
    if len(value) > cap:
        raise InvalidInput(where, f"names at most {cap:,} per call")
    return list(value)


def _count(where: str, value: Any, cap: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(where, f"{value!r} is not a whole number")
    if not 1 <= value <= cap:
        raise InvalidInput(where, f"is between 1 and {cap:,}, not {value}")
    return value


def _text(where: str, value: Any, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(where, f"{value!r} is not a text")
    return value


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(where, f"{value!r} is not true or false")
    return value


def _when(where: str, value: Any) -> datetime | None:
    if value is not None and not isinstance(value, datetime):
        raise InvalidInput(where, f"{value!r} is not a date-time")
    return value


def _now(state: ApiState, timestamp: Any = None) -> datetime:
    return _when("timestamp", timestamp) or state.clock()


# -- listers ---------------------------------------------------------------


endpoint("listers/get", reads=True, with_first_visits_to_schedule=False)(swh_listers.get_listers)
endpoint("listers/get_by_id", reads=True, lister_ids=REQUIRED)(swh_listers.get_listers_by_id)
endpoint("lister/get", reads=True, name=REQUIRED, instance_name=None)(swh_listers.get_lister)
endpoint("lister/visit_types", reads=True, lister=REQUIRED)(
    swh_listers.get_visit_types_for_listed_origins
)
endpoint("visit_scheduler/get", reads=True)(swh_listers.visit_scheduler_queue_position_get)
endpoint("visit_scheduler/set", reads=False, visit_type=REQUIRED, position=REQUIRED)(
    swh_listers.visit_scheduler_queue_position_set
)


@endpoint(
    "lister/get_or_create",
    reads=False,
    name=REQUIRED,
    instance_name=None,
    first_visits_queue_prefix=None,
)
def get_or_create_lister(
    state: ApiState, name: Any, instance_name: Any, first_visits_queue_prefix: Any
) -> Any:
    lister = state.store.get_or_create_lister(
        _text("name", name) or "",
        _text("instance_name", instance_name, optional=True) or "",
        _text("first_visits_queue_prefix", first_visits_queue_prefix, optional=True),
        now=state.clock(),
    )
    return m.lister_out(lister)


@endpoint("lister/update", reads=False, lister=REQUIRED)
def update_lister(state: ApiState, lister: Any) -> Any:
    return m.lister_out(state.store.update_lister(m.lister_in("lister", lister), now=state.clock()))


# -- listed origins --------------------------------------------------------


@endpoint("origins/record", reads=False, listed_origins=REQUIRED, update_last_seen=True)
def record_listed_origins(state: ApiState, listed_origins: Any, update_last_seen: Any) -> Any:
    if not _flag("update_last_seen", update_last_seen):
        raise InvalidInput(
            "update_last_seen",
            "false is not served: this scheduler records every listed origin's last_seen "
            "(when a lister last listed it)",
        )
    origins = [
        m.origin_in(f"listed_origins[{n}]", v)
        for n, v in enumerate(_listed("listed_origins", listed_origins, 10 * MAX_SCAN))
    ]
    recorded = state.store.record_listed_origins(origins, now=state.clock())
    # an origin given twice in one call is one row: returned once, as the reference does
    unique = {x.key: x for x in recorded}
    return [m.origin_out(x) for x in unique.values()]


_ORIGIN_CAPS = READ_CAPS["get_listed_origins"]


@endpoint(
    "origins/get",
    reads=True,
    lister_id=None,
    url=None,
    urls=None,
    enabled=True,
    limit=1000,
    page_token=None,
)
def get_listed_origins(
    state: ApiState,
    lister_id: Any,
    url: Any,
    urls: Any,
    enabled: Any,
    limit: Any,
    page_token: Any,
) -> Any:
    if page_token is not None and not isinstance(page_token, str):
        # ours is one text; we hand it out as the reference's pair (last url, token)
        pair = _listed("page_token", page_token, 2)
        if len(pair) != 2:
            raise InvalidInput("page_token", "is the pair (url, token) a page gave")
        page_token = pair[1]
    if enabled is not None:
        _flag("enabled", enabled)
    page = state.store.get_listed_origins(
        lister_id=None if lister_id is None else m.lister_id_of("lister_id", lister_id),
        url=_text("url", url, optional=True),
        urls=None if urls is None else _listed("urls", urls, _ORIGIN_CAPS["urls"]),
        enabled=enabled,
        limit=_count("limit", limit, _ORIGIN_CAPS["limit"]),
        page_token=_text("page_token", page_token, optional=True),
    )
    token = page.next_page_token
    following = None if token is None else (page.origins[-1].url, token)
    return Paged([m.origin_out(x) for x in page.origins], following)


@endpoint("origins/grab_next", reads=False, **{
    "visit_type": REQUIRED,
    "count": REQUIRED,
    "policy": REQUIRED,
    "enabled": True,
    "lister_uuid": None,
    "lister_name": None,
    "lister_instance_name": None,
    "timestamp": None,
    "absolute_cooldown": timedelta(hours=12),
    "scheduled_cooldown": timedelta(days=7),
    "failed_cooldown": timedelta(days=14),
    "not_found_cooldown": timedelta(days=31),
    "tablesample": None,
    "dry_run": False,
})  # fmt: skip
def grab_next_visits(
    state: ApiState,
    visit_type: Any,
    count: Any,
    policy: Any,
    enabled: Any,
    lister_uuid: Any,
    lister_name: Any,
    lister_instance_name: Any,
    timestamp: Any,
    absolute_cooldown: Any,
    scheduled_cooldown: Any,
    failed_cooldown: Any,
    not_found_cooldown: Any,
    tablesample: Any,
    dry_run: Any,
) -> list[Any]:
    if policy not in {p.value for p in VisitPolicy}:
        choices = ", ".join(p.value for p in VisitPolicy)
        raise UnknownPolicy("policy", f"{policy!r} is not a policy of this scheduler ({choices})")
    if tablesample is not None:
        raise InvalidInput(
            "tablesample",
            "is not served: this scheduler's claims read each policy's own index, never a "
            "sample of the table (give None)",
        )
    lister_id = None if lister_uuid is None else m.lister_id_of("lister_uuid", lister_uuid)
    cooldowns = Cooldowns(
        scheduled=absolute_cooldown or timedelta(0),
        no_result=scheduled_cooldown or timedelta(0),
        failed=failed_cooldown or timedelta(0),
        not_found=not_found_cooldown or timedelta(0),
    )
    take = (
        state.store.peek_next_visits if _flag("dry_run", dry_run) else state.store.grab_next_visits
    )
    origins = take(
        _text("visit_type", visit_type) or "",
        _count("count", count, MAX_SCAN),
        policy,
        now=_now(state, timestamp),
        lister_id=lister_id,
        enabled=_flag("enabled", enabled),
        cooldowns=cooldowns,
        # one lister of that name (several instances: refused; none: no origins)
        lister_name=_text("lister_name", lister_name, optional=True),
        lister_instance_name=_text("lister_instance_name", lister_instance_name, optional=True),
    )
    return [m.origin_out(x) for x in origins]


# -- visit statistics and metrics -----------------------------------------


@endpoint("visit_stats/upsert", reads=False, origin_visit_stats=REQUIRED)
def origin_visit_stats_upsert(state: ApiState, origin_visit_stats: Any) -> None:
    given = _listed("origin_visit_stats", origin_visit_stats, 10 * MAX_SCAN)
    stats = [m.stats_in(f"origin_visit_stats[{n}]", v) for n, v in enumerate(given)]
    state.store.origin_visit_stats_upsert(stats)


@endpoint("visit_stats/get", reads=True, ids=REQUIRED)
def origin_visit_stats_get(state: ApiState, ids: Any) -> list[Any]:
    pairs: list[tuple[str, str]] = []
    for n, pair in enumerate(_listed("ids", ids, READ_CAPS["origin_visit_stats_get"]["ids"])):
        items = _listed(f"ids[{n}]", pair, 2)
        if len(items) != 2 or not all(isinstance(x, str) for x in items):
            raise InvalidInput(f"ids[{n}]", "is a pair (url, visit_type)")
        pairs.append((items[0], items[1]))
    return [m.stats_out(x) for x in state.store.origin_visit_stats_get(pairs)]


@endpoint("scheduler_metrics/update", reads=False, lister_id=None, timestamp=None)
def update_metrics(state: ApiState, lister_id: Any, timestamp: Any) -> list[Any]:
    lister = None if lister_id is None else m.lister_id_of("lister_id", lister_id)
    return [
        m.metrics_out(x) for x in state.store.update_metrics(lister, now=_now(state, timestamp))
    ]


@endpoint("scheduler_metrics/get", reads=True, lister_id=None, visit_type=None)
def get_metrics(state: ApiState, lister_id: Any, visit_type: Any) -> list[Any]:
    lister = None if lister_id is None else m.lister_id_of("lister_id", lister_id)
    found = state.store.get_metrics(lister, _text("visit_type", visit_type, optional=True))
    return [m.metrics_out(x) for x in found]


# -- task types and tasks --------------------------------------------------


@endpoint("task_type/create", reads=False, task_type=REQUIRED)
def create_task_type(state: ApiState, task_type: Any) -> None:
    created = task_type_from_input(m.task_type_values("task_type", task_type))
    # the reference's rule: a type of that name is left as it is
    with contextlib.suppress(DuplicateTaskType):
        state.store.create_task_type(created)


@endpoint("task_type/get", reads=True, task_type_name=REQUIRED)
def get_task_type(state: ApiState, task_type_name: Any) -> Any:
    found = state.store.get_task_type(_text("task_type_name", task_type_name) or "")
    return None if found is None else m.task_type_out(found)


@endpoint("task_type/get_all", reads=True)
def get_task_types(state: ApiState) -> list[Any]:
    return [m.task_type_out(x) for x in state.store.get_task_types()]


@endpoint("task/create", reads=False, tasks=REQUIRED, policy="recurring")
def create_tasks(state: ApiState, tasks: Any, policy: Any) -> list[Any]:
    if policy not in ("recurring", "oneshot"):
        raise InvalidInput("policy", f"{policy!r} is not recurring or oneshot")
    now = state.clock()
    built: list[Task] = []
    types: dict[str, Any] = {}
    for n, given in enumerate(_listed("tasks", tasks, 10 * MAX_SCAN)):
        values = m.task_values(f"tasks[{n}]", given, policy)
        name = _text(f"tasks[{n}].type", values["type"]) or ""
        if name not in types:
            types[name] = state.store.get_task_type(name)
        if types[name] is None:
            raise InvalidInput(f"tasks[{n}].type", f"no task type {name!r} is registered")
        try:
            built.append(task_from_input(values, types[name], now=now, reach=state.settings.reach))
        except InvalidInput as error:
            raise InvalidInput(f"tasks[{n}].{error.field}", error.message) from None
    return [m.task_out(x) for x in state.store.create_tasks(built, now=now)]


def _ids(where: str, value: Any) -> list[int]:
    items = [value] if isinstance(value, int) else _listed(where, value, MAX_PAGE)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 < item < 2**63:
            raise InvalidInput(where, f"{item!r} is not a task id")
    return items


@endpoint("task/get", reads=True, task_ids=REQUIRED)
def get_tasks(state: ApiState, task_ids: Any) -> list[Any]:
    return [
        m.task_out(without_secrets(x)) for x in state.store.get_tasks(_ids("task_ids", task_ids))
    ]


@endpoint("task/disable", reads=False, task_ids=REQUIRED)
def disable_tasks(state: ApiState, task_ids: Any) -> None:
    state.store.disable_tasks(_ids("task_ids", task_ids), now=state.clock())


def _choices(where: str, value: Any, cap: int) -> list[Any]:
    """A criterion of a search as a list (``[None]``: any)."""
    if value is None or value == []:
        return [None]
    return [value] if isinstance(value, str) else _listed(where, value, cap)


@endpoint("task/search", reads=True, **{
    "task_id": None,
    "task_type": None,
    "status": None,
    "priority": None,
    "policy": None,
    "before": None,
    "after": None,
    "limit": None,
})  # fmt: skip
def search_tasks(
    state: ApiState,
    task_id: Any,
    task_type: Any,
    status: Any,
    priority: Any,
    policy: Any,
    before: Any,
    after: Any,
    limit: Any,
) -> list[Any]:
    wanted = MAX_PAGE if limit is None else _count("limit", limit, MAX_PAGE)
    statuses: list[Any] = []
    for name in _choices("status", status, len(m.STATUS_OF)):
        if name is not None and name not in m.STATUS_OF:
            raise InvalidInput("status", f"{name!r} is not one of {', '.join(m.STATUS_OF)}")
        statuses.extend(m.STATUS_OF[name] if name is not None else ())
    priorities = [
        None if p is None else m.priority_of("priority", p)
        for p in _choices("priority", priority, 3)
    ]
    if policy not in (None, "recurring", "oneshot"):
        raise InvalidInput("policy", f"{policy!r} is not recurring or oneshot")
    types = _choices("task_type", task_type, MAX_NAMES)
    first, last = _when("after", after), _when("before", before)

    def fits(task: Task) -> bool:
        oneshot = task.policy.value == "oneshot"
        return (
            (not statuses or task.status in statuses)
            and (priorities == [None] or task.priority in priorities)
            and (types == [None] or task.type in types)
            and (policy is None or oneshot == (policy == "oneshot"))
            and (first is None or task.next_run >= first)
            and (last is None or task.next_run <= last)
        )

    if task_id is not None:
        found = [x for x in state.store.get_tasks(_ids("task_id", task_id)) if fits(x)]
    else:
        found = _scan(state, types, priorities, statuses, last, fits, wanted + 1)
    found.sort(key=lambda x: x.id or 0)
    if limit is None and len(found) > wanted:
        raise InvalidInput(
            "limit",
            f"more than {wanted:,} tasks match: give a limit (at most {MAX_PAGE:,}) or "
            "narrower criteria",
        )
    return [m.task_out(without_secrets(x)) for x in found[:wanted]]


def _scan(
    state: ApiState,
    types: Sequence[Any],
    priorities: Sequence[Any],
    statuses: Sequence[Any],
    before: datetime | None,
    fits: Callable[[Task], bool],
    enough: int,
) -> list[Task]:
    """Up to ``enough`` tasks that ``fits``, read by id in pages of each
    (type, priority) the search names; past :data:`SEARCH_SCAN` rows read,
    the search is refused (the filter on ``after`` reads rows it drops)."""
    found: dict[int, Task] = {}
    read = 0
    for name in types:
        for priority in priorities:
            criteria = TaskFilter(
                type=name,
                status=tuple(statuses) or None,
                priority=priority,
                next_run_before=before,
            )
            after_id = 0
            while len(found) < enough:
                page = state.store.search_tasks(criteria, after_id=after_id, limit=MAX_PAGE)
                read += len(page)
                if read > SEARCH_SCAN:
                    raise InvalidInput(
                        "after",
                        f"the search reads more than {SEARCH_SCAN:,} tasks to find its own: "
                        "narrow it (a task_type, a status, a smaller limit)",
                    )
                found.update((x.id, x) for x in page if x.id is not None and fits(x))
                if len(page) < MAX_PAGE:
                    break
                after_id = page[-1].id or 0
    return sorted(found.values(), key=lambda x: x.id or 0)[:enough]


# -- what means nothing here ----------------------------------------------

_RUNNER = (
    "this scheduler's runner claims ready tasks and sends them to Celery itself "
    "(swh scheduler start-runner); tasks handed to the reference's runner would run twice"
)
_RUNS = (
    "runs are written by this scheduler's runner and workers, fenced by their leases; "
    "read them with GET /tasks/{id}/runs"
)
_ARCHIVE = "finished runs are pruned by this scheduler's own retention, not archived"
#: the reference's methods not served, by path: (method, why)
UNSERVED: dict[str, tuple[str, str]] = {
    "task/set_status": ("set_status_tasks", _RUNNER),
    "task/peek_ready": ("peek_ready_tasks", _RUNNER),
    "task/grab_ready": ("grab_ready_tasks", _RUNNER),
    "task/peek_ready_with_priority": ("peek_ready_priority_tasks", _RUNNER),
    "task/grab_ready_with_priority": ("grab_ready_priority_tasks", _RUNNER),
    "task_run/schedule_one": ("schedule_task_run", _RUNS),
    "task_run/schedule": ("mass_schedule_task_runs", _RUNS),
    "task_run/start": ("start_task_run", _RUNS),
    "task_run/end": ("end_task_run", _RUNS),
    "task_run/get": ("get_task_runs", _RUNS),
    "task/filter_for_archive": ("filter_task_to_archive", _ARCHIVE),
    "task/delete_archived": ("delete_archived_tasks", _ARCHIVE),
}
#: the paths whose calls only read (a read token may call them)
READ_PATHS = frozenset(
    {p for p, e in ENDPOINTS.items() if e.reads}
    | {"task/peek_ready", "task/peek_ready_with_priority", "task_run/get"}
    | {"task/filter_for_archive"}
)
WRITE_PATHS = frozenset(set(ENDPOINTS) | set(UNSERVED)) - READ_PATHS
__all__ = ["ENDPOINTS", "READ_PATHS", "UNSERVED", "WRITE_PATHS"]
