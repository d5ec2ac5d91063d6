"""A task's arguments checked against its worker's signature, where the
worker's code can be imported (``task add``, ``task schedule``).

The type's ``backend_name`` is looked up among the Celery tasks of the
installed worker packages (the ``swh.workers`` entry points and the task
modules they declare, as a worker loads them), registered on a private
Celery app made for the look-up: nothing is configured, no broker is
reached, the current app is left as it is. A task found there is checked
with ``inspect.signature(task.run).bind(*args, **kwargs)``; a mismatch
is :class:`~.exceptions.InvalidInput` naming the argument and the
signature. So is a positional argument whose text is the name of one of
the worker's keyword parameters (``task add sleep duration``, a forgotten
``=0``: "did you mean `duration=VALUE`?"), which would otherwise bind.
A task not found (another machine's worker, a broken worker package) is
not checked, not even by name, and :attr:`ArgumentCheck.skipped` says
why.

Some arguments are checked at every door whether or not the worker can be
imported (:func:`check_callback_url`): the URL a ``webhook`` task posts to
must go where the callback rule allows (:mod:`.reach`). The task types
concerned are known by name and by Celery task name
(:data:`CALLBACK_URL_ARGUMENTS`), so a type renamed or a second type over
the same worker is checked as well.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from ..domain.exceptions import InvalidInput
from ..domain.model import TaskType
from ..plumbing.celery_factory import WORKERS_GROUP
from ..plumbing.reach import Reach

#: the argument holding a URL the worker calls, as (parameter name,
#: position), by task type name and by Celery task name (``webhook``'s
#: ``post(url, payload, idempotency_key, ...)``)
CALLBACK_URL_ARGUMENTS: Mapping[str, tuple[str, int]] = {
    "webhook": ("url", 0),
    "swh_like_workers.webhook.post": ("url", 0),
}


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


#: the kinds of parameter a caller may name (``name=value``)
_NAMEABLE = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def parameter_named(signature: inspect.Signature, args: Sequence[Any]) -> str | None:
    """The first positional argument that is the text of the name of one of
    the parameters ``signature`` takes by keyword (``sleep duration`` for
    ``sleep duration=0``: a forgotten ``=VALUE``), or ``None``."""
    names = {p.name for p in signature.parameters.values() if p.kind in _NAMEABLE}
    for value in args:
        if isinstance(value, str) and value in names:
            return value
    return None


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
    mistaken = parameter_named(signature, args)
    if mistaken is not None:
        raise InvalidInput(
            "arguments",
            f"positional argument {mistaken!r} is the name of a parameter of task type "
            f"{task_type.type!r}: did you mean `{mistaken}=VALUE`? "
            f"(its worker is {described})",
        )
    try:
        signature.bind(*args, **kwargs)
    except TypeError as error:
        raise InvalidInput(
            "arguments",
            f"{error} for task type {task_type.type!r}, whose worker is {described}",
        ) from None
    return ArgumentCheck(task_type.type, signature=described)


def check_callback_url(
    type_name: str,
    backend_name: str | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    reach: Reach,
    *,
    where: str = "",
) -> None:
    """Refuse (:class:`InvalidInput` naming ``{where}kwargs.url`` or
    ``{where}args.0``) a callback URL argument of a task of type
    ``type_name`` (Celery task ``backend_name``) that ``reach`` does not
    allow, or that is not a URL; tasks of other types pass."""
    found = CALLBACK_URL_ARGUMENTS.get(type_name)
    if found is None and backend_name is not None:
        found = CALLBACK_URL_ARGUMENTS.get(backend_name)
    if found is None:
        return
    name, position = found
    given: list[tuple[str, Any]] = []
    if isinstance(kwargs, Mapping) and name in kwargs:
        given.append((f"{where}kwargs.{name}", kwargs[name]))
    if isinstance(args, Sequence) and not isinstance(args, str) and len(args) > position:
        given.append((f"{where}args.{position}", args[position]))
    for field, url in given:
        if not isinstance(url, str):
            raise InvalidInput(
                field, f"must be an http:// or https:// URL (text), not {type(url).__name__}"
            )
        problem = reach.problem(url)
        if problem is not None:
            raise InvalidInput(field, problem)


__all__ = [
    "CALLBACK_URL_ARGUMENTS",
    "ArgumentCheck",
    "WorkerTasks",
    "check_arguments",
    "check_callback_url",
    "load_worker_tasks",
    "parameter_named",
    "worker_tasks",
]
