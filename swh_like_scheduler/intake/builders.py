"""Turning raw input (command-line options, CSV cells, JSON) into domain objects.

Every value is parsed by :mod:`.validation`, so a refusal names its field;
a new task gets its first can_start_by / should_start_by from the policy
engine, exactly as the runner and listener will compute them later. A task
whose worker calls a URL it is given (``webhook``) is refused when the URL
goes where the callback rule does not allow (:mod:`.reach`,
:func:`.argcheck.check_callback_url`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .. import policy
from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import (
    TASK_TYPE_DURATIONS,
    TYPE_LOAD_FIELDS,
    BlackoutPeriod,
    Priority,
    ScheduleKind,
    Task,
    TaskType,
    catch_up_value,
)
from ..plumbing.reach import Reach
from .argcheck import check_callback_url

TASK_FIELDS = (
    "type",
    "args",
    "kwargs",
    "key",
    "policy",
    "kind",
    "next_run",
    "interval",
    "period",
    "cooldown",
    "cron",
    "cron_max_duration",
    "max_delay",
    "catch_up",
    "catch_up_grace",
    "priority",
    "tz",
    "blackout_periods",
    "dont_run_on_nodes",
    "max_expected_duration",
    "max_allowed_duration",
    "expected_duration",
)

_TASK_DURATIONS = (
    "interval",
    "period",
    "cooldown",
    "cron_max_duration",
    "max_delay",
    "catch_up_grace",
    "max_expected_duration",
    "max_allowed_duration",
    "expected_duration",
)

#: the task durations that must be longer than zero (a cooldown or a
#: max_delay of 0 means "none")
_POSITIVE = frozenset(
    {"interval", "period", "cron_max_duration", "max_expected_duration", "max_allowed_duration"}
)

_POSITIVE_TYPE = frozenset(
    {
        "default_interval",
        "min_interval",
        "max_interval",
        "max_expected_duration",
        "max_allowed_duration",
    }
)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def task_type_from_input(values: Mapping[str, Any]) -> TaskType:
    """A :class:`TaskType` from loosely typed values (strings allowed)."""
    # ``paused_at`` is the operator's (``pause_task_type``), not a setting,
    # and the ``load_*`` fields the monitor's measurement (``measure_type_loads``)
    known = {f for f in TaskType.__dataclass_fields__} - {"paused_at", *TYPE_LOAD_FIELDS}
    unknown = sorted(set(values) - known)
    if unknown:
        raise InvalidInput(
            unknown[0], f"is not a task type field (known: {', '.join(sorted(known))})"
        )
    parsed: dict[str, Any] = {k: v for k, v in values.items() if not _blank(v)}
    for name in TASK_TYPE_DURATIONS:
        if name in parsed:
            raw = parsed[name]
            parsed[name] = validation.parse_duration(name, raw, positive=name in _POSITIVE_TYPE)
    for name in ("max_queue_length", "num_retries"):
        if name in parsed:
            parsed[name] = validation.non_negative_int(name, parsed[name])
    if "backoff_factor" in parsed:
        parsed["backoff_factor"] = validation.positive_float(
            "backoff_factor", parsed["backoff_factor"], minimum=1.0
        )
    if "retry_growth" in parsed:
        parsed["retry_growth"] = validation.positive_float("retry_growth", parsed["retry_growth"])
    if "uses_lease" in parsed:
        parsed["uses_lease"] = boolean_value("uses_lease", parsed["uses_lease"])
    for name in ("type", "backend_name"):
        if name not in parsed:
            raise InvalidInput(name, "is required")
    return TaskType(**parsed)


def boolean_value(field: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise InvalidInput(field, f"{value!r} is not a boolean (true/false)")


def json_value(field: str, value: Any, expected: type) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            # where in the value (not a column of the input file)
            shown = value if len(value) <= 60 else value[:57] + "..."
            raise InvalidInput(
                field, f"{shown!r} is not valid JSON ({exc.msg} at character {exc.pos + 1})"
            ) from None
    if not isinstance(value, expected):
        raise InvalidInput(field, f"must be a JSON {expected.__name__}, got {type(value).__name__}")
    return value


def schedule_kind(values: Mapping[str, Any]) -> ScheduleKind:
    """The schedule kind asked for: explicit ``kind``, else deduced from the
    parameters given, else from ``policy`` (recurring → adaptive, like swh)."""
    if not _blank(values.get("kind")):
        try:
            return ScheduleKind(str(values["kind"]).strip())
        except ValueError:
            choices = ", ".join(k.value for k in ScheduleKind)
            raise InvalidInput("kind", f"{values['kind']!r} is not one of {choices}") from None
    policy_name = str(values.get("policy") or "recurring").strip()
    if policy_name not in ("oneshot", "recurring"):
        raise InvalidInput("policy", f"{policy_name!r} is not 'oneshot' or 'recurring'")
    if policy_name == "oneshot":
        return ScheduleKind.ONESHOT
    if not _blank(values.get("cron")):
        return ScheduleKind.CRON
    if not _blank(values.get("period")):
        return ScheduleKind.PERIODIC
    return ScheduleKind.ADAPTIVE


#: the field each schedule kind cannot do without, and an example
_REQUIRED = {
    ScheduleKind.CRON: ("cron", "example: '0 3 * * *'"),
    ScheduleKind.PERIODIC: ("period", "example: '1 day'"),
}


def task_from_input(
    values: Mapping[str, Any], task_type: TaskType, *, now: datetime, reach: Reach | None = None
) -> Task:
    """A new task (no id) with its first start times computed by the policy
    engine. A callback URL among its arguments must go where ``reach``
    allows (default: public addresses only)."""
    unknown = sorted(set(values) - set(TASK_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a task field (known: {', '.join(TASK_FIELDS)})")
    kind = schedule_kind(values)
    required = _REQUIRED.get(kind)
    if required is not None and _blank(values.get(required[0])):
        raise InvalidInput(required[0], f"a {kind} task needs one ({required[1]})")
    fields: dict[str, Any] = {"type": task_type.type, "schedule_kind": kind}
    tz = str(values.get("tz") or "UTC").strip()
    validation.zone("tz", tz)
    fields["tz"] = tz
    for name in _TASK_DURATIONS:
        if not _blank(values.get(name)):
            fields[name] = validation.parse_duration(name, values[name], positive=name in _POSITIVE)
    if not _blank(values.get("args")):
        fields["args"] = tuple(json_value("args", values["args"], list))
    if not _blank(values.get("kwargs")):
        fields["kwargs"] = json_value("kwargs", values["kwargs"], dict)
    check_callback_url(
        task_type.type,
        task_type.backend_name,
        fields.get("args", ()),
        fields.get("kwargs", {}),
        reach if reach is not None else Reach(),
    )
    if not _blank(values.get("key")):
        fields["key"] = str(values["key"])
    if not _blank(values.get("priority")):
        try:
            fields["priority"] = Priority(str(values["priority"]).strip())
        except ValueError:
            raise InvalidInput(
                "priority", f"{values['priority']!r} is not one of high, normal, low"
            ) from None
    if not _blank(values.get("catch_up")):
        fields["catch_up"] = catch_up_value(str(values["catch_up"]).strip())
    if not _blank(values.get("cron")):
        fields["cron"] = validation.cron_expression("cron", str(values["cron"]))
    if not _blank(values.get("blackout_periods")):
        windows = json_value("blackout_periods", values["blackout_periods"], list)
        fields["blackout_periods"] = tuple(BlackoutPeriod.parse(w) for w in windows)
    if not _blank(values.get("dont_run_on_nodes")):
        nodes = values["dont_run_on_nodes"]
        if isinstance(nodes, str) and not nodes.lstrip().startswith("["):
            nodes = [n.strip() for n in nodes.split(",") if n.strip()]
        nodes = json_value("dont_run_on_nodes", nodes, list)
        fields["dont_run_on_nodes"] = tuple(str(n) for n in nodes)
    interval = fields.pop("interval", None)
    if kind is ScheduleKind.ADAPTIVE:
        if interval is None:
            interval = task_type.default_interval
        if interval is None:
            raise InvalidInput(
                "interval",
                f"task type {task_type.type!r} has no default_interval; give an interval",
            )
        fields["current_interval"] = interval
    elif interval is not None:
        raise InvalidInput("interval", f"does not apply to {kind} tasks (use period or cron)")
    if kind is ScheduleKind.CRON and "cron_max_duration" not in fields:
        fields["cron_max_duration"] = policy.default_cron_max_duration(fields, task_type, now)
    requested = (
        now
        if _blank(values.get("next_run"))
        else validation.parse_datetime("next_run", values["next_run"], tz)
    )
    draft = Task(
        next_run=requested,
        deadline=requested,
        created_at=now,
        retries_left=task_type.num_retries or 0,
        **fields,
    )
    prepared = policy.prepare_new_task(draft, task_type, now)
    if prepared.next_run >= requested:
        return prepared
    # a first run later than the policy's: honour it, keeping the slack
    return prepared.updated(next_run=requested, deadline=max(prepared.deadline, requested))
