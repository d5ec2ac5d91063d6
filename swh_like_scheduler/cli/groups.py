"""Command groups that load their commands on first use, and one-line errors.

A command's module (and what it imports: SQLAlchemy, Celery, FastAPI,
SimPy...) is imported only when that command runs or shows its own help; a
group's help lists its commands from the one-line summaries of
:mod:`.tree`, without importing any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import click

from ..domain.exceptions import InvalidInput, NotFound, SchedulerError, StoreError
from ..domain.text import visible


class Refused(click.ClickException):
    """Input the user can fix, shown as one line (exit code 2), or one per
    problem when the message lists several; whatever it quotes shows its
    invisible characters as escapes (values are quoted with ``repr``, so a
    line break in one cannot start a line of its own)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {visible(self.format_message(), lines=True)}", err=True)


class Failed(Refused):
    """The database failed or is out of reach (exit code 1)."""

    exit_code = 1


def reported(error: SchedulerError) -> Refused:
    """The click exception that reports ``error`` without a traceback."""
    if isinstance(error, StoreError) and not isinstance(error, InvalidInput | NotFound):
        return Failed(str(error))
    if isinstance(error, InvalidInput):
        # the field may quote input (a key of a body): escaped whole, so
        # that only the message's own lines start lines
        where = f"line {error.line}: " if error.line is not None else ""
        return Refused(f"{where}{visible(error.field)}: {error.message}")
    return Refused(str(error))


@dataclass(frozen=True)
class Lazy:
    """A command not loaded yet: ``module:attribute`` under this package's
    ``cli``, and the one line a group's help shows for it."""

    target: str
    summary: str
    hidden: bool = False

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        command = getattr(import_module(f"{__package__}.{module}"), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        if command.short_help is None:
            command.short_help = self.summary
        return command


class SchedulerGroup(click.Group):
    """A group whose commands report :class:`SchedulerError` as one line,
    and whose :class:`Lazy` commands are imported when first asked for."""

    def __init__(
        self,
        *args: Any,
        lazy: Mapping[str, Lazy | click.Command] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, Lazy] = {}
        for name, entry in (lazy or {}).items():
            if isinstance(entry, Lazy):
                self.lazy[name] = entry
            else:
                self.add_command(entry, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SchedulerError as error:
            raise reported(error) from None

    def group(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", SchedulerGroup)
        return super().group(*args, **kwargs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            command = self.lazy[cmd_name].load()
            if self.lazy[cmd_name].hidden:
                command.hidden = True
            self.commands[cmd_name] = command
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their one-line help, importing none of them."""
        rows: list[tuple[str, Lazy | click.Command]] = []
        for name in self.list_commands(ctx):
            entry: Lazy | click.Command | None = self.commands.get(name) or self.lazy.get(name)
            if entry is None or entry.hidden:
                continue
            rows.append((name, entry))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        lines = [
            (name, entry.summary if isinstance(entry, Lazy) else entry.get_short_help_str(limit))
            for name, entry in rows
        ]
        with formatter.section("Commands"):
            formatter.write_dl(lines)


def group(name: str, summary: str, commands: Mapping[str, Lazy | click.Command]) -> SchedulerGroup:
    """A group of lazily loaded commands, whose help is ``summary``."""
    return SchedulerGroup(name, help=summary, lazy=commands)
