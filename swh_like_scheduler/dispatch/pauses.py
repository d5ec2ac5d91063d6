"""The pauses a runner process has already logged: a paused task type is
said to be skipped once per pause, and said to be served again once when
it is resumed (the runner's pass filters its due types through
:func:`not_paused`)."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from ..domain.model import TaskType

logger = logging.getLogger("swh_like_scheduler.dispatch.serve")


class Paused:
    """The pauses already logged in this process: a paused type is said
    to be skipped once per pause (its ``paused_at``), and said to be served
    again once when it is resumed."""

    def __init__(self) -> None:
        self._seen: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def filter(self, task_types: list[TaskType]) -> list[TaskType]:
        serving: list[TaskType] = []
        with self._lock:
            for task_type in task_types:
                name, paused_at = task_type.type, task_type.paused_at
                if paused_at is None:
                    if self._seen.pop(name, None) is not None:
                        logger.info("task type %s was resumed; its tasks are dispatched", name)
                    serving.append(task_type)
                elif self._seen.get(name) != paused_at:
                    self._seen[name] = paused_at
                    logger.info(
                        "task type %s is paused since %s; none of its tasks is dispatched",
                        name,
                        paused_at.isoformat(),
                    )
        return serving


_PAUSED = Paused()


def not_paused(task_types: list[TaskType]) -> list[TaskType]:
    """``task_types`` without the paused ones (logged once per pause)."""
    return _PAUSED.filter(task_types)


__all__ = ["Paused", "not_paused"]
