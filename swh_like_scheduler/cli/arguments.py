"""Checking task arguments against the worker's signature, for the commands
that create or change tasks (``task add``, ``task schedule``; a command
that edits arguments takes :data:`no_check_args_option` and calls
:func:`checked_arguments` the same way)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from ..domain.exceptions import InvalidInput
from ..domain.model import Task, TaskType
from ..intake.argcheck import check_arguments

no_check_args_option = click.option(
    "--no-check-args",
    "no_check_args",
    is_flag=True,
    help="Do not check the arguments against the signature of the type's Celery task "
    "(checked when the worker package is installed where the command runs).",
)


def checked_arguments(
    task_type: TaskType,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    check: bool = True,
    warned: set[str] | None = None,
) -> None:
    """Refuse arguments that do not fit the worker's signature (exit 2,
    naming the argument and the signature); warn on stderr when the
    worker's task cannot be imported here (once per type in ``warned``)."""
    if not check:
        return
    try:
        outcome = check_arguments(task_type, args, kwargs)
    except InvalidInput as error:
        raise InvalidInput(
            error.field, f"{error.message} (--no-check-args to accept them)"
        ) from None
    if outcome.skipped is None:
        return
    if warned is not None:
        if task_type.type in warned:
            return
        warned.add(task_type.type)
    click.echo(
        f"warning: arguments of task type {task_type.type!r} not checked: {outcome.skipped}",
        err=True,
    )


def task_checker(check: bool) -> Callable[[Task, TaskType], None] | None:
    """What an import calls on each task it builds (``None``: no check),
    warning once per type that cannot be checked."""
    if not check:
        return None
    warned: set[str] = set()

    def checker(task: Task, task_type: TaskType) -> None:
        checked_arguments(task_type, task.args, task.kwargs, warned=warned)

    return checker


__all__ = ["checked_arguments", "no_check_args_option", "task_checker"]
