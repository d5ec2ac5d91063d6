"""Jobs by key (seed 004): a client names a job with its own key, gives the
instants (ISO 8601) at which a callback must happen, and may later replace
the instants or delete the job.

A job is stored as one one-shot task per instant, whose task key is
``JOBKEY@INSTANT`` (the instant in UTC, ISO 8601: it holds no ``@``, so the
job's key is what comes before the last ``@``). The callback says which
task type carries it out:

- ``{"type": "rabbitmq", "data": {"queue": Q, "payload": {...}}}``: the
  ``notify`` worker publishes the payload to queue Q;
- ``{"type": "http", "data": {"url": U, "payload": {...}}}``: the
  ``webhook`` worker posts the payload to U with an ``Idempotency-Key``
  header derived from the job's key and the instant (seed 001), the same
  for every attempt of that instant; a 2xx answer is a success.

Replacing a job's instants keeps the instants given again (an instant that
already ran does not run again), adds the new ones and cancels those no
longer given that have not run."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import Priority, RunStatus, ScheduleKind, Task, TaskRun, TaskStatus
from ..plumbing.reach import Reach

#: longest job key (the task key adds ``@`` and a 25-character instant)
MAX_KEY = 400
#: most instants in one job
MAX_INSTANTS = 1000
#: the task type of each callback type
CALLBACK_TASK_TYPES = {"rabbitmq": "notify", "http": "webhook"}
#: namespace of the idempotency keys of http callbacks
IDEMPOTENCY_NAMESPACE = uuid.UUID("6f1d3a52-2b8e-4d0b-9a55-3f1d1c0e7a10")
SEPARATOR = "@"
#: an ISO 8601 instant that says its offset (``Z``, ``+02:00``, ``-0500``)
_ZONED = re.compile(r"(Z|[+-]\d\d(:?\d\d)?)$", re.IGNORECASE)
#: an HTTP header name (RFC 9110's token)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def instant_text(instant: datetime) -> str:
    """The instant as it appears in task keys: UTC, seconds, ``+00:00``."""
    return instant.astimezone(UTC).isoformat(timespec="seconds")


def task_key(job_key: str, instant: datetime) -> str:
    return f"{job_key}{SEPARATOR}{instant_text(instant)}"


def job_key_of(key: str | None) -> str | None:
    """The job key of a task key made by :func:`task_key`, else ``None``."""
    if key is None or SEPARATOR not in key:
        return None
    job, _, instant = key.rpartition(SEPARATOR)
    return job if len(instant) == 25 and instant.endswith("+00:00") else None


def idempotency_key(job_key: str, instant: datetime) -> str:
    """What an http callback sends as ``Idempotency-Key``: a UUID of the job
    and the instant, the same on every attempt and every re-publication."""
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, task_key(job_key, instant)))


@dataclass(frozen=True)
class Callback:
    """What happens at each instant: ``type`` (``rabbitmq``, ``http``) and its ``data``."""

    type: str
    data: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.type not in CALLBACK_TASK_TYPES:
            choices = ", ".join(CALLBACK_TASK_TYPES)
            raise InvalidInput("callback.type", f"{self.type!r} is not one of {choices}")
        if not isinstance(self.data, Mapping):
            raise InvalidInput("callback.data", "must be an object")
        payload = self.data.get("payload", {})
        if not isinstance(payload, Mapping):
            raise InvalidInput("callback.data.payload", "must be a JSON object")
        validation.storable("callback.data", dict(self.data))
        if self.type == "rabbitmq":
            self._check_rabbitmq()
        else:
            self._check_http()
        object.__setattr__(self, "data", dict(self.data))

    def _check_rabbitmq(self) -> None:
        unknown = sorted(set(self.data) - {"queue", "payload"})
        if unknown:
            raise InvalidInput(f"callback.data.{unknown[0]}", "is not a rabbitmq callback field")
        queue = self.data.get("queue")
        if not isinstance(queue, str) or not queue.strip() or len(queue.encode()) > 255:
            raise InvalidInput("callback.data.queue", "must be a queue name (1-255 bytes)")
        if queue.startswith("amq."):
            raise InvalidInput("callback.data.queue", "names starting with 'amq.' are reserved")

    def _check_http(self) -> None:
        unknown = sorted(set(self.data) - {"url", "payload", "method", "headers"})
        if unknown:
            raise InvalidInput(f"callback.data.{unknown[0]}", "is not an http callback field")
        url = self.data.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput("callback.data.url", "must be an http:// or https:// URL")
        if self.data.get("method", "POST") not in ("POST", "PUT"):
            raise InvalidInput("callback.data.method", "must be POST or PUT")
        headers = self.data.get("headers", {})
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise InvalidInput("callback.data.headers", "must map header names to strings")
        for name, value in headers.items():
            if not _HEADER_NAME.fullmatch(name):
                raise InvalidInput("callback.data.headers", f"{name!r} is not a header name")
            if any(c in value for c in "\r\n\x00"):
                raise InvalidInput(
                    f"callback.data.headers.{name}", "holds a line break (CR, LF) or a NUL"
                )

    @property
    def task_type(self) -> str:
        return CALLBACK_TASK_TYPES[self.type]

    def kwargs(self, job_key: str, instant: datetime) -> dict[str, Any]:
        """The keyword arguments of the task that carries out this callback at ``instant``."""
        payload = dict(self.data.get("payload", {}))
        if self.type == "rabbitmq":
            return {
                "queue": self.data["queue"],
                "payload": payload,
                "key": task_key(job_key, instant),
            }
        kwargs = {
            "url": self.data["url"],
            "payload": payload,
            "idempotency_key": idempotency_key(job_key, instant),
        }
        if "method" in self.data:
            kwargs["method"] = self.data["method"]
        if self.data.get("headers"):
            kwargs["headers"] = dict(self.data["headers"])
        return kwargs

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "data": dict(self.data)}


@dataclass(frozen=True)
class Job:
    """A key, its instants (UTC, sorted, distinct) and its callback."""

    key: str
    schedules: tuple[datetime, ...]
    callback: Callback
    #: how late an instant may still run (default: the one-shot default)
    max_delay: timedelta | None = None
    priority: Priority = Priority.NORMAL

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not 0 < len(self.key) <= MAX_KEY:
            raise InvalidInput("key", f"must be a non-empty string of at most {MAX_KEY} characters")
        validation.storable("key", self.key)
        if not self.schedules:
            # a PUT of none answered 201 and made nothing to GET: to cancel a
            # job's instants, delete it
            raise InvalidInput(
                "schedules",
                "holds no instant: a job needs at least one (to cancel a job's instants, "
                "delete it: DELETE /jobs/{key}, swh scheduler job delete KEY)",
            )
        if len(self.schedules) > MAX_INSTANTS:
            raise InvalidInput("schedules", f"holds more than {MAX_INSTANTS} instants")
        instants = sorted({t.astimezone(UTC).replace(microsecond=0) for t in self.schedules})
        object.__setattr__(self, "schedules", tuple(instants))

    def task(self, instant: datetime, now: datetime, *, retries: int = 0) -> Task:
        """The one-shot task of ``instant`` (``retries``: its type's ``num_retries``)."""
        return Task(
            type=self.callback.task_type,
            next_run=instant,
            deadline=instant + (self.max_delay or timedelta(0)),
            kwargs=self.callback.kwargs(self.key, instant),
            schedule_kind=ScheduleKind.ONESHOT,
            key=task_key(self.key, instant),
            priority=self.priority,
            max_delay=self.max_delay,
            created_at=now,
            retries_left=retries,
        )


def job_from_input(key: str, body: Mapping[str, Any], *, reach: Reach | None = None) -> Job:
    """A job from seed 004's JSON body (``key`` optional, equal to ``key`` if
    given); an ``http`` callback must go where ``reach`` allows (default:
    public addresses only, :mod:`.reach`)."""
    known = {"key", "schedules", "callback", "max_delay", "priority"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise InvalidInput(unknown[0], f"is not a job field (known: {', '.join(sorted(known))})")
    if body.get("key") not in (None, key):
        raise InvalidInput("key", f"{body['key']!r} differs from the key in the path, {key!r}")
    schedules = body.get("schedules")
    if not isinstance(schedules, Sequence) or isinstance(schedules, str):
        raise InvalidInput("schedules", "must be a list of ISO 8601 instants")
    instants = []
    for index, text in enumerate(schedules):
        if not isinstance(text, str):
            raise InvalidInput(f"schedules.{index}", "must be an ISO 8601 instant (text)")
        instant = validation.parse_datetime(f"schedules.{index}", text)
        if not _ZONED.search(text.strip()):
            raise InvalidInput(
                f"schedules.{index}",
                f"{text!r} has no time zone: end it with Z (UTC) or an offset (+02:00)",
            )
        if "T" not in text or (instant.tzinfo is None):  # pragma: no cover - parse gives UTC
            raise InvalidInput(f"schedules.{index}", "must be an instant with a time")
        if instant.microsecond:
            raise InvalidInput(
                f"schedules.{index}",
                f"{text!r} has a fraction of a second: a job's instants are whole seconds",
            )
        instants.append(instant)
    callback = body.get("callback")
    if not isinstance(callback, Mapping):
        raise InvalidInput("callback", "must be an object with a type and data")
    max_delay = validation.optional_duration("max_delay", body.get("max_delay"))
    try:
        priority = Priority(body.get("priority") or "normal")
    except ValueError:
        raise InvalidInput(
            "priority", f"{body.get('priority')!r} is not high, normal or low"
        ) from None
    job = Job(
        key=key,
        schedules=tuple(instants),
        callback=Callback(str(callback.get("type")), callback.get("data", {})),
        max_delay=max_delay,
        priority=priority,
    )
    if job.callback.type == "http":
        problem = (reach or Reach()).problem(str(job.callback.data["url"]))
        if problem is not None:
            raise InvalidInput("callback.data.url", problem)
    return job


@dataclass(frozen=True)
class JobInstant:
    """One instant of a job: its task and the task's latest run."""

    at: datetime
    task: Task
    last_run: TaskRun | None = None

    @property
    def state(self) -> str:
        """``pending`` (not run yet), ``dispatched``, ``running``, ``done``,
        ``failed``, ``cancelled`` or ``expired``."""
        status = self.task.status
        if status is TaskStatus.CANCELLED:
            return "cancelled"
        if status is TaskStatus.COMPLETED:
            return "done"
        run = self.last_run
        if status is TaskStatus.DISABLED:
            expired = run is not None and run.status is RunStatus.CANCELLED
            return "expired" if expired else "failed"
        if run is not None and run.status is RunStatus.STARTED:
            return "running"
        if status is TaskStatus.SCHEDULED:
            return "dispatched"
        return "pending"

    def to_dict(self) -> dict[str, Any]:
        run = self.last_run
        return {
            "at": instant_text(self.at),
            "state": self.state,
            "task_id": self.task.id,
            "next_run": self.task.next_run.isoformat(),
            "run": None
            if run is None
            else {
                "backend_id": run.backend_id,
                "status": run.status.value,
                "started": run.started.isoformat() if run.started else None,
                "ended": run.ended.isoformat() if run.ended else None,
                "error": run.error,
            },
        }


@dataclass(frozen=True)
class JobView:
    """A job as stored: every instant it ever had (those removed by a
    replacement or a delete show as ``cancelled`` if they had not run),
    and what the last change did."""

    key: str
    instants: tuple[JobInstant, ...] = ()
    added: tuple[datetime, ...] = ()
    removed: tuple[datetime, ...] = ()
    kept: tuple[datetime, ...] = ()
    #: the runs a change cancelled whose messages may be in a queue (to revoke)
    cancelled_runs: tuple[str, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "instants": [i.to_dict() for i in self.instants],
            "added": [instant_text(t) for t in self.added],
            "removed": [instant_text(t) for t in self.removed],
            "kept": [instant_text(t) for t in self.kept],
        }
