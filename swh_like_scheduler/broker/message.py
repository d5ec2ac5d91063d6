"""What the runner hands to the broker layer: one Celery task message per run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from swh_like_scheduler.domain.exceptions import InvalidInput
from swh_like_scheduler.domain.model import TaskType

#: AMQP carries the priority in one octet; kombu's Redis transport maps the
#: value onto its ``priority_steps`` (0, 3, 6, 9 by default).
MAX_PRIORITY = 255


@dataclass(frozen=True)
class Message:
    """One Celery task to enqueue.

    ``task_id`` becomes the Celery task id (``headers["id"]`` and the
    ``correlation_id`` property) and is the run's ``backend_id``.
    ``task_name`` is the Celery task name the worker looks up, ``queue`` the
    broker queue (the task type's queue), ``args``/``kwargs`` the call
    arguments (JSON-serialisable with the app's task serializer).

    ``priority`` is passed to the broker unchanged; ``None`` sends none (the
    broker's default, 0), as ``send_task`` does.  Its meaning is the broker's: on RabbitMQ a
    higher number is served first (the queue needs ``x-max-priority``); on
    Redis kombu serves the lowest step first (0 before 3 before 6 before 9).
    ``time_limits`` is Celery's ``[hard, soft]`` time limit in seconds
    (``timelimit`` header; ``None``: none): a prefork worker raises
    ``SoftTimeLimitExceeded`` in the body at the soft limit and kills the
    child at the hard one.
    """

    task_id: str
    task_name: str
    queue: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    priority: int | None = None
    time_limits: tuple[float | None, float | None] = (None, None)

    def __post_init__(self) -> None:
        # checked the fast way first: the runner builds thousands a second
        task_id, task_name, queue = self.task_id, self.task_name, self.queue
        if not (
            type(task_id) is str
            and type(task_name) is str
            and type(queue) is str
            and task_id
            and task_name
            and queue
        ):
            for name in ("task_id", "task_name", "queue"):
                value = getattr(self, name)
                if not isinstance(value, str) or not value:
                    raise InvalidInput(name, f"must be a non-empty string, not {value!r}")
        if type(self.args) is not tuple:
            if isinstance(self.args, list):
                object.__setattr__(self, "args", tuple(self.args))
            if not isinstance(self.args, tuple):
                raise InvalidInput("args", f"must be a tuple, not {type(self.args).__name__}")
        if type(self.kwargs) is not dict and not isinstance(self.kwargs, Mapping):
            raise InvalidInput("kwargs", f"must be a mapping, not {type(self.kwargs).__name__}")
        if self.priority is not None and (
            isinstance(self.priority, bool)
            or not isinstance(self.priority, int)
            or not 0 <= self.priority <= MAX_PRIORITY
        ):
            raise InvalidInput(
                "priority", f"must be an integer from 0 to {MAX_PRIORITY}, not {self.priority!r}"
            )
        if self.time_limits != (None, None):
            _check_time_limits(self.time_limits)


def _check_time_limits(limits: Any) -> None:
    if not isinstance(limits, tuple) or len(limits) != 2:
        raise InvalidInput("time_limits", f"must be a (hard, soft) pair, not {limits!r}")
    for value in limits:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
        ):
            raise InvalidInput("time_limits", f"{value!r} is not a number of seconds > 0")
    hard, soft = limits
    if hard is not None and soft is not None and soft > hard:
        raise InvalidInput("time_limits", f"the soft limit {soft} is above the hard one {hard}")


#: how long after the soft time limit (the body is interrupted) the hard
#: one kills the worker's child process
HARD_LIMIT_GRACE = 10.0


def time_limits(task_type: TaskType) -> tuple[float | None, float | None]:
    """Celery's ``(hard, soft)`` time limits of the type's runs: soft at
    ``max_allowed_duration``, hard :data:`HARD_LIMIT_GRACE` later; none
    without a bound."""
    allowed = task_type.max_allowed_duration
    if allowed is None or allowed.total_seconds() <= 0:
        return (None, None)
    soft = allowed.total_seconds()
    return (soft + HARD_LIMIT_GRACE, soft)
