"""A task's arguments checked against its worker's signature, where the
worker's code can be imported (``task add``, ``task schedule``).

The type's ``backend_name`` is looked up among the Celery tasks of the
installed worker packages (the ``swh.workers`` entry points and the task
modules they declare, as a worker loads them), registered on a private
Celery app made for the look-up: nothing is configured, no broker is
reached, the current app is left as it is. A task found there is checked
with ``inspect.signature(task.run).bind(*args, **kwargs)``; a mismatch
is :class:`~.exceptions.InvalidInput` naming the argument and the
signature. A task not found (another machine's worker, a broken worker
package) is not checked, and :attr:`ArgumentCheck.skipped` says why.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from .celery_factory import WORKERS_GROUP
from .exceptions import InvalidInput
from .model import TaskType


@dataclass(frozen=True)
class ArgumentCheck:
    """The outcome of :func:`check_arguments`: ``signature`` when the
    arguments were checked (and fit), else ``skipped``, the reason."""

    task_type: str
    signature: str | None = None
    skipped: str | None = None

    @property
    def checked(self) -> bool:
        return self.signature is not None


@dataclass(frozen=True)
class WorkerTasks:
    """The Celery tasks the installed worker packages register, by name,
    and the packages or modules that could not be imported."""

    runs: Mapping[str, Callable[..., Any]]
    problems: tuple[str, ...] = ()


def load_worker_tasks() -> WorkerTasks:
    """Import the worker packages and their task modules, and read the
    tasks they register on a private Celery app (see the module doc)."""
    from celery import Celery

    problems: list[str] = []
    for entry in entry_points(group=WORKERS_GROUP):
        try:
            registration = dict(entry.load()())
        except Exception as error:  # a broken package must not stop the command
            problems.append(f"worker package {entry.name!r}: {type(error).__name__}: {error}")
            continue
        for module in registration.get("task_modules", ()):
            try:
                import_module(module)
            except Exception as error:
                problems.append(f"task module {module!r}: {type(error).__name__}: {error}")
    # shared tasks join every app when it is finalised; this one is never current
    app = Celery("swh-argument-check", set_as_current=False)
    runs = {name: task.run for name, task in app.tasks.items() if not name.startswith("celery.")}
    return WorkerTasks(runs, tuple(problems))


_lock = threading.Lock()
_loaded: WorkerTasks | None = None


def worker_tasks() -> WorkerTasks:
    """:func:`load_worker_tasks`, once per process."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = load_worker_tasks()
        return _loaded


def _describe(signature: inspect.Signature, name: str) -> str:
    """``name(duration=0.0, seed=None)``: names and defaults (annotations
    left out: they are often strings, and long)."""
    empty = inspect.Parameter.empty
    bare = signature.replace(
        parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
        return_annotation=empty,
    )
    return f"{name}{bare}"


def check_arguments(
    task_type: TaskType,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    tasks: WorkerTasks | None = None,
) -> ArgumentCheck:
    """Check ``args`` and ``kwargs`` against the signature of
    ``task_type``'s Celery task (``tasks``: default, the installed worker
    packages'). Raises :class:`InvalidInput` (field ``arguments``) when they
    do not fit; returns how the check went otherwise."""
    found = tasks if tasks is not None else worker_tasks()
    name = task_type.backend_name
    run = found.runs.get(name)
    if run is None:
        why = f"its Celery task {name!r} is not importable here"
        if found.problems:
            why += f" ({'; '.join(found.problems)})"
        return ArgumentCheck(task_type.type, skipped=why)
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError) as error:
        return ArgumentCheck(task_type.type, skipped=f"{name!r} has no signature: {error}")
    described = _describe(signature, name)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        raise InvalidInput(
            "arguments",
            f"{error} for task type {task_type.type!r}, whose worker is {described}",
        ) from None
    return ArgumentCheck(task_type.type, signature=described)


__all__ = ["ArgumentCheck", "WorkerTasks", "check_arguments", "load_worker_tasks", "worker_tasks"]
