"""The reference's model objects (swh-scheduler's ``swh.scheduler.model``)
and ours, each way: pure functions of their arguments.

What differs, and how it is carried:

- a lister's id is a UUID there, its 32 hexadecimal digits here;
- a snapshot id is 20 bytes there, 40 hexadecimal digits here;
- an origin's place in its visit type's queue (``next_visit_queue_position``)
  is a number of seconds there (the reference starts its queues at 0 and
  moves them by days), an instant here: the seconds since 1970-01-01 UTC;
- a task there has ``arguments`` (``args``, ``kwargs``), a ``policy``
  (``recurring`` or ``oneshot``) and four statuses; here a recurring task
  is an ``adaptive`` one (its interval from its type, as there), and the
  statuses read ``waiting`` as ``next_run_not_scheduled``, ``scheduled``
  as ``next_run_scheduled``, ``cancelled`` as ``disabled``;
- a task type here has more settings (retries, leases...): the reference's
  fields are given, the others keep their defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from ..domain.enums import Priority, ScheduleKind, TaskStatus
from ..domain.exceptions import InvalidInput
from ..domain.model import Task, TaskType
from ..visits.model import ListedOrigin, Lister, OriginMetrics, OriginVisitStats
from .swh_codec import Enumerated, Model

#: our task statuses as the reference names them
TASK_STATUS = {
    TaskStatus.WAITING: "next_run_not_scheduled",
    TaskStatus.SCHEDULED: "next_run_scheduled",
    TaskStatus.COMPLETED: "completed",
    TaskStatus.DISABLED: "disabled",
    TaskStatus.CANCELLED: "disabled",
}
#: the reference's task statuses as ours (``disabled``: both of ours)
STATUS_OF: dict[str, tuple[TaskStatus, ...]] = {
    "next_run_not_scheduled": (TaskStatus.WAITING,),
    "next_run_scheduled": (TaskStatus.SCHEDULED,),
    "completed": (TaskStatus.COMPLETED,),
    "disabled": (TaskStatus.DISABLED, TaskStatus.CANCELLED),
}
#: the reference's task type fields (every one may be given)
TASK_TYPE_FIELDS = (
    "type",
    "description",
    "backend_name",
    "default_interval",
    "min_interval",
    "max_interval",
    "backoff_factor",
    "max_queue_length",
    "num_retries",
    "retry_delay",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def model(where: str, value: Any, kind: str) -> dict[str, Any]:
    """The fields of ``value`` if it is a reference model object of class ``kind``."""
    if not isinstance(value, Model) or value.type != kind:
        found = value.type if isinstance(value, Model) else type(value).__name__
        raise InvalidInput(where, f"is a {found}, not a {kind}")
    return value.fields


def _only(where: str, fields: Mapping[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise InvalidInput(f"{where}.{unknown[0]}", f"is not a field of the reference's {where}")


def lister_uuid(lister_id: str) -> UUID:
    return UUID(hex=lister_id)


def lister_id_of(where: str, value: Any) -> str:
    """Our lister id from the reference's (a UUID, or its text)."""
    if isinstance(value, UUID):
        return value.hex
    if isinstance(value, str):
        try:
            return UUID(value).hex
        except ValueError:
            pass
    raise InvalidInput(where, f"{value!r} is not a lister id (a UUID)")


def lister_out(lister: Lister) -> Model:
    return Model(
        "Lister",
        {
            "name": lister.name,
            "instance_name": lister.instance_name,
            "id": None if lister.id is None else lister_uuid(lister.id),
            "current_state": dict(lister.current_state),
            "created": lister.created,
            "updated": lister.updated,
            "last_listing_finished_at": lister.last_listing_finished_at,
            "first_visits_queue_prefix": lister.first_visits_queue_prefix,
            "first_visits_scheduled_at": lister.first_visits_scheduled_at,
        },
    )


_LISTER_FIELDS = (
    "name",
    "instance_name",
    "id",
    "current_state",
    "created",
    "updated",
    "last_listing_finished_at",
    "first_visits_queue_prefix",
    "first_visits_scheduled_at",
)


def lister_in(where: str, value: Any) -> Lister:
    fields = dict(model(where, value, "Lister"))
    _only("Lister", fields, _LISTER_FIELDS)
    if fields.get("id") is not None:
        fields["id"] = lister_id_of(f"{where}.id", fields["id"])
    if fields.get("current_state") is None:
        fields["current_state"] = {}
    if fields.get("instance_name") is None:
        fields["instance_name"] = ""
    return Lister(**fields)


_ORIGIN_FIELDS = (
    "lister_id",
    "url",
    "visit_type",
    "extra_loader_arguments",
    "last_update",
    "is_fork",
    "forked_from_url",
    "enabled",
    "first_seen",
    "last_seen",
)


def origin_out(origin: ListedOrigin) -> Model:
    fields = {name: getattr(origin, name) for name in _ORIGIN_FIELDS}
    fields["lister_id"] = lister_uuid(origin.lister_id)
    fields["extra_loader_arguments"] = dict(origin.extra_loader_arguments)
    return Model("ListedOrigin", fields)


def origin_in(where: str, value: Any) -> ListedOrigin:
    fields = dict(model(where, value, "ListedOrigin"))
    _only("ListedOrigin", fields, _ORIGIN_FIELDS)
    fields["lister_id"] = lister_id_of(f"{where}.lister_id", fields.get("lister_id"))
    if fields.get("extra_loader_arguments") is None:
        fields["extra_loader_arguments"] = {}
    # the store sets first_seen and last_seen: a lister's are not its to give
    fields.pop("first_seen", None)
    fields.pop("last_seen", None)
    if fields.get("enabled") is None:
        fields["enabled"] = True
    return ListedOrigin(**fields)


def position_seconds(position: datetime | None) -> int | None:
    """An instant in a queue as the reference's position: whole seconds since 1970."""
    if position is None:
        return None
    return int((position - _EPOCH).total_seconds())


def position_instant(where: str, seconds: Any) -> datetime | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidInput(where, f"{seconds!r} is not a queue position (whole seconds)")
    try:
        return _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidInput(where, f"{seconds} is past any date a queue reaches") from None


def stats_out(stats: OriginVisitStats) -> Model:
    status = stats.last_visit_status
    return Model(
        "OriginVisitStats",
        {
            "url": stats.url,
            "visit_type": stats.visit_type,
            "last_successful": stats.last_successful,
            "last_visit": stats.last_visit,
            "last_visit_status": None
            if status is None
            else Enumerated("last_visit_status", status.value),
            "last_scheduled": stats.last_scheduled,
            "last_snapshot": None
            if stats.last_snapshot is None
            else bytes.fromhex(stats.last_snapshot),
            "next_visit_queue_position": position_seconds(stats.next_visit_queue_position),
            "next_position_offset": stats.next_position_offset,
            "successive_visits": stats.successive_visits,
        },
    )


_STATS_FIELDS = (
    "url",
    "visit_type",
    "last_successful",
    "last_visit",
    "last_visit_status",
    "last_scheduled",
    "last_snapshot",
    "next_visit_queue_position",
    "next_position_offset",
    "successive_visits",
)


def stats_in(where: str, value: Any) -> OriginVisitStats:
    fields = dict(model(where, value, "OriginVisitStats"))
    _only("OriginVisitStats", fields, _STATS_FIELDS)
    status = fields.get("last_visit_status")
    if isinstance(status, Enumerated):
        fields["last_visit_status"] = status.value
    fields["next_visit_queue_position"] = position_instant(
        f"{where}.next_visit_queue_position", fields.get("next_visit_queue_position")
    )
    for name, default in (("next_position_offset", 4), ("successive_visits", 1)):
        if fields.get(name) is None:
            fields[name] = default
    return OriginVisitStats(**fields)


def metrics_out(metrics: OriginMetrics) -> Model:
    return Model(
        "SchedulerMetrics",
        {
            "lister_id": lister_uuid(metrics.lister_id),
            "visit_type": metrics.visit_type,
            "last_update": metrics.last_update,
            "origins_known": metrics.origins_known,
            "origins_enabled": metrics.origins_enabled,
            "origins_never_visited": metrics.origins_never_visited,
            "origins_with_pending_changes": metrics.origins_with_pending_changes,
        },
    )


def task_type_out(task_type: TaskType) -> Model:
    return Model(
        "TaskType",
        {
            "type": task_type.type,
            "description": task_type.description,
            "backend_name": task_type.backend_name,
            "default_interval": task_type.default_interval,
            "min_interval": task_type.min_interval,
            "max_interval": task_type.max_interval,
            "backoff_factor": None
            if task_type.backoff_factor is None
            else float(task_type.backoff_factor),
            "max_queue_length": task_type.max_queue_length,
            "num_retries": task_type.num_retries,
            "retry_delay": task_type.retry_delay,
        },
    )


def task_type_values(where: str, value: Any) -> dict[str, Any]:
    """The fields the reference's task type gives (``None`` left out: our
    default holds), for :func:`~..intake.builders.task_type_from_input`."""
    fields = model(where, value, "TaskType")
    _only("TaskType", fields, TASK_TYPE_FIELDS)
    return {name: v for name, v in fields.items() if v is not None}


def task_out(task: Task) -> Model:
    arguments = Model("TaskArguments", {"args": list(task.args), "kwargs": dict(task.kwargs)})
    oneshot = task.schedule_kind is ScheduleKind.ONESHOT
    return Model(
        "Task",
        {
            "type": task.type,
            "arguments": arguments,
            "next_run": task.next_run,
            "status": TASK_STATUS[task.status],
            "policy": "oneshot" if oneshot else "recurring",
            "retries_left": task.retries_left,
            "id": task.id,
            "current_interval": task.current_interval,
            "priority": task.priority.value,
        },
    )


_TASK_FIELDS = (
    "type",
    "arguments",
    "next_run",
    "status",
    "policy",
    "retries_left",
    "id",
    "current_interval",
    "priority",
)


def task_values(where: str, value: Any, policy: str) -> dict[str, Any]:
    """A new task's values as :func:`~..intake.builders.task_from_input`
    takes them; ``policy``: the call's default when the task names none."""
    fields = model(where, value, "Task")
    _only("Task", fields, _TASK_FIELDS)
    if fields.get("id") is not None:
        raise InvalidInput(f"{where}.id", "is given by the scheduler: a new task has none")
    status = fields.get("status")
    if status not in (None, "next_run_not_scheduled"):
        raise InvalidInput(
            f"{where}.status", f"a new task is next_run_not_scheduled, not {status!r}"
        )
    arguments = model(f"{where}.arguments", fields.get("arguments"), "TaskArguments")
    _only("TaskArguments", arguments, ("args", "kwargs"))
    values: dict[str, Any] = {
        "type": fields.get("type"),
        "args": list(arguments.get("args") or []),
        "kwargs": dict(arguments.get("kwargs") or {}),
        "policy": fields.get("policy") or policy,
        "next_run": fields.get("next_run"),
    }
    if fields.get("priority") is not None:
        values["priority"] = fields["priority"]
    if fields.get("current_interval") is not None and values["policy"] == "recurring":
        values["interval"] = fields["current_interval"]
    return values


def priority_of(where: str, value: Any) -> Priority:
    try:
        return Priority(value)
    except ValueError:
        raise InvalidInput(where, f"{value!r} is not one of high, normal, low") from None
