"""The filter flags every command that filters tasks spells the same way:
``--type/-t``, ``--kind``, ``--status/-s``, ``--condition``, ``--key-prefix``.

Older spellings (``--task-type``) still work, hidden from the help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..domain.enums import ScheduleKind, TaskStatus

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

#: the levels of a task's condition (``task status``)
LEVELS = ("OK", "WARNING", "ERROR")


class Aliased(click.Option):
    """An option whose ``aliases`` (old spellings) are accepted but not shown."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = aliases

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [o for o in shown if o not in self.aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def type_option(
    help: str = "Only tasks of this type.", *, dest: str = "type_name", multiple: bool = False
) -> Decorator:
    """``--type/-t`` (also ``--task-type``, the old spelling)."""
    return click.option(
        "--type",
        "-t",
        "--task-type",
        dest,
        cls=Aliased,
        aliases=("--task-type",),
        multiple=multiple,
        metavar="TYPE",
        help=help,
    )


def kind_option(help: str = "Only tasks of this schedule kind.") -> Decorator:
    return click.option("--kind", type=click.Choice([k.value for k in ScheduleKind]), help=help)


def status_option(help: str = "Only tasks in this status (repeatable).") -> Decorator:
    return click.option(
        "--status",
        "-s",
        "statuses",
        multiple=True,
        type=click.Choice([s.value for s in TaskStatus]),
        help=help,
    )


def condition_option(
    help: str = "Only tasks whose condition now (as `task status` computes it) is at "
    "this level (repeatable).",
) -> Decorator:
    return click.option(
        "--condition",
        "levels",
        multiple=True,
        type=click.Choice(LEVELS, case_sensitive=False),
        help=help,
    )


def key_prefix_option(help: str = "Only tasks whose key starts with this.") -> Decorator:
    return click.option("--key-prefix", help=help)
