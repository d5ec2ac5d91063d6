"""What an import of a ``beat_schedule`` did, entry by entry
(:mod:`.beatimport`): the lines ``swh scheduler import-beat`` prints and
beat logs, and the same as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..policy.times import fmt_instant

#: the key of the task an entry stands for is this prefix and the entry's
#: name (here, where reading it loads no Celery: ``task update`` checks it)
KEY_PREFIX = "beat:"


class Action(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    #: a changed entry whose task has a run open: not written
    BUSY = "busy"
    #: a task with a ``beat:`` key whose entry is gone: kept
    STALE = "stale"
    #: a stale task deleted (``prune``)
    PRUNED = "pruned"
    #: a stale task with a run open, disabled (``prune``)
    DISABLED = "disabled"


_DONE = {
    Action.CREATED: "created",
    Action.UPDATED: "updated",
    Action.PRUNED: "deleted",
    Action.DISABLED: "disabled",
}
_WOULD = {
    Action.CREATED: "would be created",
    Action.UPDATED: "would be updated",
    Action.PRUNED: "would be deleted",
    Action.DISABLED: "would be disabled",
}


@dataclass(frozen=True)
class Outcome:
    """What the import did (or would do) for one entry or stale task."""

    name: str
    key: str
    action: Action
    task_id: int | None
    task_type: str
    schedule: str
    #: ``field: before -> after`` of an update (or of a busy task's change)
    changes: tuple[str, ...] = ()
    #: the task's status when it is not waiting or scheduled
    status: str | None = None
    #: the first run of a created task
    first_run: datetime | None = None

    def line(self, dry_run: bool) -> str:
        done = (_WOULD if dry_run else _DONE).get(self.action, str(self.action))
        task = f"task {self.task_id}" if self.task_id is not None else "task"
        status = f", {self.status}" if self.status else ""
        changes = "; ".join(self.changes)
        if self.action is Action.CREATED:
            first = f", first run {fmt_instant(self.first_run)}" if self.first_run else ""
            about = f"type {self.task_type}, {self.schedule}{first}"
            return f"entry {self.name!r}: {task} {done} ({about})"
        if self.action is Action.UNCHANGED:
            return f"entry {self.name!r}: unchanged ({task}{status})"
        if self.action is Action.UPDATED:
            return f"entry {self.name!r}: {task} {done}{status} ({changes})"
        if self.action is Action.BUSY:
            return (
                f"entry {self.name!r}: busy, {task} has a run open: not updated ({changes}); "
                "import again once it ended"
            )
        gone = f"{task} (key {self.key}): no longer in beat_schedule"
        if self.action is Action.STALE:
            return f"{gone}; kept (remove it with --prune)"
        if self.action is Action.DISABLED:
            return f"{gone}, a run is open: {done} (prune again to delete it)"
        return f"{gone}: {done}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.name,
            "key": self.key,
            "action": str(self.action),
            "task_id": self.task_id,
            "task_type": self.task_type,
            "schedule": self.schedule,
            "changes": list(self.changes),
            "status": self.status,
            "first_run": self.first_run.isoformat() if self.first_run else None,
        }


@dataclass(frozen=True)
class ImportReport:
    """What one import did (``dry_run``: would do)."""

    outcomes: tuple[Outcome, ...]
    #: ``(type, Celery task, queue)`` of each task type created
    types_created: tuple[tuple[str, str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    dry_run: bool = False
    #: what differs from beat without being wrong (printed as ``note: ...``)
    notes: tuple[str, ...] = ()

    def count(self, action: Action) -> int:
        return sum(1 for o in self.outcomes if o.action is action)

    @property
    def busy(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.action is Action.BUSY]

    @property
    def wrote(self) -> bool:
        """Something was (or would be) written."""
        quiet = (Action.UNCHANGED, Action.BUSY, Action.STALE)
        return bool(self.types_created) or any(o.action not in quiet for o in self.outcomes)

    def summary(self) -> str:
        entries = [o for o in self.outcomes if o.action not in STALE_ACTIONS]
        parts = [
            f"{self.count(a)} {a}"
            for a in (Action.CREATED, Action.UPDATED, Action.UNCHANGED, Action.BUSY)
            if self.count(a)
        ]
        text = f"{len(entries)} beat_schedule entr{'y' if len(entries) == 1 else 'ies'}"
        text += ": " + ", ".join(parts) if parts else ""
        stale = [o for o in self.outcomes if o.action in STALE_ACTIONS]
        if stale:
            gone = ", ".join(
                f"{self.count(a)} {_DONE.get(a, 'kept')}" for a in STALE_ACTIONS if self.count(a)
            )
            text += f"; {len(stale)} stale task(s) ({gone})"
        if self.types_created:
            text += f"; {len(self.types_created)} task type(s) created"
        if self.dry_run:
            text = f"Dry run, nothing written: {text}"
        return text

    def lines(self) -> list[str]:
        would = "would be created" if self.dry_run else "created"
        out = [
            f"task type {name} {would} (Celery task {task}, queue {queue})"
            for name, task, queue in self.types_created
        ]
        out += [o.line(self.dry_run) for o in self.outcomes]
        out += [f"warning: {w}" for w in self.warnings]
        out += [f"note: {n}" for n in self.notes]
        out.append(self.summary())
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "entries": [o.to_dict() for o in self.outcomes if o.action not in STALE_ACTIONS],
            "stale": [o.to_dict() for o in self.outcomes if o.action in STALE_ACTIONS],
            "types_created": [
                {"type": n, "backend_name": t, "queue": q} for n, t, q in self.types_created
            ],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "summary": self.summary(),
        }


#: what the import did (or would do) to a task whose entry is gone
STALE_ACTIONS = (Action.STALE, Action.PRUNED, Action.DISABLED)
