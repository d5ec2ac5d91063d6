"""The keyed tasks of a ``beat_schedule``: created, updated in place, or left alone.

Used by ``swh scheduler import-beat`` and by ``celery beat -S swh`` at
start. Each entry of :mod:`.beatschedule` stands for one task whose key is
``beat:<entry name>``; an import:

* creates the tasks of new entries: a periodic one first runs one period
  after the import (as beat does after it starts), a cron one at its next
  firing;
* leaves an entry whose task already says what the entry says
  **unchanged**: nothing is written (not even ``updated_at``);
* **updates in place** the task of a changed entry: what the entry decides
  (task type, arguments, schedule kind, period, cron, time zone) is
  rewritten, the rest (status — a disabled task stays disabled —,
  priority, statistics, run history) is kept, and can/should start times
  are computed again by the policy engine when the schedule changed. The
  cooldown is set when the period is (:data:`.beatschedule.COOLDOWN_SHARE`
  of it) and ``cron_max_duration`` when the cron expression or zone is: a
  value changed by hand since stays. A warning names each periodic entry
  whose task's known run time (measured, else expected) makes every run
  start late with that cooldown (:mod:`.policy.cooldown`). A task with a run open is left as it
  is and reported **busy** (the run's outcome rewrites the task when it is
  recorded): import again once it ended — beat retries by itself;
* reports the tasks with a ``beat:`` key whose entry is gone (**stale**);
  with ``prune``, deletes them, or disables one whose run is still open.

Everything is read and checked before the first write: an entry refused (no
task type for its task and queue, a type's retry budget longer than its
period...) refuses the import and nothing is written. The writes are the
store's own (task types, one creation of every new task, one optimistic
update per changed task: an update that loses a race is planned again from
the task as it now is), so the import works through any store, the HTTP one
included; an import cut short by a database failure is finished by
importing again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..domain import validation
from ..domain.exceptions import Conflict, InvalidInput
from ..domain.model import ScheduleKind, Task, TaskStatus, TaskType
from ..policy import (
    cooldown_shortfall,
    default_cron_max_duration,
    prepare_new_task,
    start_times,
    validate_task,
)
from ..policy.times import never_attempted
from ..store.values import TaskFilter
from .report import STALE_ACTIONS, Action, ImportReport, Outcome
from .schedule import COOLDOWN_SHARE, KEY_PREFIX, BeatEntry, span

#: attempts at updating one task that others keep changing meanwhile
UPDATE_ATTEMPTS = 3
#: how a refusal for want of a task type tells the user to create it
CREATE_TYPES_HINT = "import with --create-types"


@dataclass
class _Plan:
    """What to write, found before the first write."""

    types: list[TaskType] = field(default_factory=list)
    creations: list[tuple[BeatEntry, Task]] = field(default_factory=list)
    #: (entry, its task as read, the task to write, ``field: before -> after``)
    updates: list[tuple[BeatEntry, Task, Task, list[str]]] = field(default_factory=list)
    quiet: list[Outcome] = field(default_factory=list)
    stale: list[Task] = field(default_factory=list)
    #: the entries whose task exists, with the task as the import leaves it
    #: (its run time may be known: :func:`_late_warnings`)
    existing: list[tuple[BeatEntry, Task]] = field(default_factory=list)


def _where(entry: BeatEntry) -> str:
    return f"beat_schedule[{entry.name!r}]"


def _has_open_run(store: Any, task: Task) -> bool:
    """A run of ``task`` is dispatched or running (a disabled or cancelled
    task may still have one: disabling leaves it to finish)."""
    if task.status is TaskStatus.SCHEDULED:
        return True
    if task.status is TaskStatus.WAITING or task.id is None:
        return False
    runs = store.get_task_runs(task.id, limit=1)
    return bool(runs) and runs[0].status.is_open


def _shown_status(task: Task) -> str | None:
    return None if task.status.is_live else str(task.status)


class _Types:
    """The task type of each entry: found among the existing ones by Celery
    task and queue, or created when asked."""

    def __init__(self, store: Any, *, create: bool, hint: str) -> None:
        self.known = {t.type: t for t in store.get_task_types()}
        self.create = create
        self.hint = hint
        self.chosen: dict[tuple[str, str], TaskType] = {}
        self.new: list[TaskType] = []

    def of(self, entry: BeatEntry, existing: Task | None) -> TaskType:
        matches = [
            t
            for t in self.known.values()
            if t.backend_name == entry.task and t.effective_queue == entry.queue
        ]
        if existing is not None and existing.type in {t.type for t in matches}:
            return self.known[existing.type]
        pair = (entry.task, entry.queue)
        if pair in self.chosen:
            return self.chosen[pair]
        if len(matches) > 1:
            names = ", ".join(sorted(t.type for t in matches))
            raise InvalidInput(
                f"{_where(entry)}.task",
                f"the task types {names} all run the Celery task {entry.task!r} on queue "
                f"{entry.queue!r}: which one is ambiguous; give the entry another queue "
                "(options={'queue': ...})",
            )
        if matches:
            self.chosen[pair] = matches[0]
            return matches[0]
        if not self.create:
            others = [t for t in self.known.values() if t.backend_name == entry.task]
            seen = "; ".join(
                f"type {t.type} runs it on queue {t.effective_queue!r}" for t in others
            )
            raise InvalidInput(
                f"{_where(entry)}.task",
                f"no task type runs the Celery task {entry.task!r} on queue {entry.queue!r}"
                + (f" ({seen})" if seen else "")
                + f": create one (swh scheduler task-type add TYPE {entry.task} --queue "
                f"{entry.queue}) or {self.hint}",
            )
        name = entry.task if entry.task not in self.known else f"{entry.task}:{entry.queue}"
        if name in self.known:
            raise InvalidInput(
                f"{_where(entry)}.task",
                f"cannot create a task type for {entry.task!r} on queue {entry.queue!r}: "
                f"the name {name!r} is taken by a type that runs another task or queue",
            )
        validation.identifier(f"{_where(entry)}.task", name)
        created = TaskType(
            type=name,
            backend_name=entry.task,
            queue=None if entry.queue == entry.task else entry.queue,
            description=f"Celery task {entry.task} (from beat_schedule)",
        )
        self.known[name] = self.chosen[pair] = created
        self.new.append(created)
        return created


def _new_task(entry: BeatEntry, task_type: TaskType, now: datetime) -> Task:
    """The task of a new entry, its first start times from the policy
    engine; a periodic one first runs one period after ``now``."""
    schedule: dict[str, Any]
    if entry.kind is ScheduleKind.PERIODIC:
        assert entry.period is not None
        first = now + entry.period
        schedule = {"period": entry.period, "cooldown": entry.cooldown}
    else:
        first = now
        gap = default_cron_max_duration({"cron": entry.cron, "tz": entry.tz}, task_type, now)
        schedule = {"cron": entry.cron, "cron_max_duration": gap}
    draft = Task(
        type=task_type.type,
        key=entry.key,
        args=entry.args,
        kwargs=entry.kwargs,
        schedule_kind=entry.kind,
        tz=entry.tz,
        next_run=first,
        deadline=first,
        created_at=now,
        retries_left=task_type.num_retries or 0,
        **schedule,
    )
    prepared = prepare_new_task(draft, task_type, now)
    if prepared.next_run >= first:
        return prepared
    return prepared.updated(next_run=first, deadline=max(prepared.deadline, first))


def _differences(task: Task, entry: BeatEntry, task_type: TaskType) -> list[str]:
    """``field: stored -> entry's`` for each field the entry decides."""
    stored_schedule = _schedule_text(task)
    pairs: list[tuple[str, Any, Any]] = [
        ("type", task.type, task_type.type),
        ("args", list(task.args), list(entry.args)),
        ("kwargs", dict(task.kwargs), dict(entry.kwargs)),
        ("schedule", stored_schedule, entry.describe()),
        ("tz", task.tz, entry.tz),
    ]
    return [f"{name}: {old} -> {new}" for name, old, new in pairs if old != new]


def _schedule_text(task: Task) -> str:
    if task.schedule_kind is ScheduleKind.PERIODIC and task.period is not None:
        return f"every {span(task.period)}"
    if task.schedule_kind is ScheduleKind.CRON:
        return f"cron {task.cron!r} ({task.tz})"
    return str(task.schedule_kind)


def _updated_task(task: Task, entry: BeatEntry, task_type: TaskType, now: datetime) -> Task:
    """``task`` saying what ``entry`` says, its other fields kept; start
    times computed again when the schedule or type changed."""
    changes: dict[str, Any] = {
        "type": task_type.type,
        "args": entry.args,
        "kwargs": entry.kwargs,
        "schedule_kind": entry.kind,
        "tz": entry.tz,
        "current_interval": None,
        "max_delay": None,
        "updated_at": now,
    }
    kind_changed = task.schedule_kind is not entry.kind
    if entry.kind is ScheduleKind.PERIODIC:
        changes.update(cron=None, cron_max_duration=None, period=entry.period)
        if kind_changed or task.period != entry.period:
            changes.update(cooldown=entry.cooldown, cooldown_is_default=False)
    else:
        changes.update(period=None, cooldown=None, cooldown_is_default=False, cron=entry.cron)
        if kind_changed or task.cron != entry.cron or task.tz != entry.tz:
            bound: dict[str, Any] = {
                "cron": entry.cron,
                "tz": entry.tz,
                "max_allowed_duration": task.max_allowed_duration,
            }
            changes["cron_max_duration"] = default_cron_max_duration(bound, task_type, now)
    changed = task.updated(**changes)
    validate_task(changed, task_type)
    if _schedule_text(changed) == _schedule_text(task) and changed.type == task.type:
        return changed  # arguments only: the next run stays where it is
    if entry.kind is ScheduleKind.PERIODIC and never_attempted(changed):
        assert entry.period is not None
        first = now + entry.period
        times = start_times(changed.updated(next_run=first), task_type, now)
        return changed.updated(
            next_run=max(times.can_start_by, first), deadline=max(times.should_start_by, first)
        )
    times = start_times(changed, task_type, now)
    return changed.updated(next_run=times.can_start_by, deadline=times.should_start_by)


def _plan_entry(store: Any, entry: BeatEntry, types: _Types, now: datetime, plan: _Plan) -> None:
    existing = store.get_task_by_key(entry.key)
    task_type = types.of(entry, existing)
    if existing is None:
        plan.creations.append((entry, _new_task(entry, task_type, now)))
        return
    differences = _differences(existing, entry, task_type)
    common = {
        "name": entry.name,
        "key": entry.key,
        "task_id": existing.id,
        "task_type": task_type.type,
        "schedule": entry.describe(),
        "status": _shown_status(existing),
    }
    if not differences:
        plan.quiet.append(Outcome(action=Action.UNCHANGED, **common))
        plan.existing.append((entry, existing))
    elif _has_open_run(store, existing):
        plan.quiet.append(Outcome(action=Action.BUSY, changes=tuple(differences), **common))
        plan.existing.append((entry, existing))
    else:
        after = _updated_task(existing, entry, task_type, now)
        plan.updates.append((entry, existing, after, differences))
        plan.existing.append((entry, after))


def _stale(store: Any, keep: set[str]) -> list[Task]:
    """The tasks with a ``beat:`` key that ``keep`` does not hold."""
    found: list[Task] = []
    after = 0
    while True:
        page = store.search_tasks(TaskFilter(key_prefix=KEY_PREFIX), after_id=after, limit=500)
        found += [t for t in page if t.key not in keep]
        if len(page) < 500:
            return found
        after = page[-1].id or after


def plan_import(
    store: Any,
    entries: Sequence[BeatEntry],
    *,
    now: datetime,
    create_types: bool = False,
    keep: Iterable[str] = (),
    hint: str = CREATE_TYPES_HINT,
) -> _Plan:
    """Read and check everything an import of ``entries`` would write;
    one :class:`InvalidInput` listing every entry refused. ``keep``: more
    keys that are not stale (entries left out of this import)."""
    types = _Types(store, create=create_types, hint=hint)
    plan = _Plan()
    refused: list[InvalidInput] = []
    for entry in entries:
        try:
            _plan_entry(store, entry, types, now, plan)
        except InvalidInput as error:
            refused.append(error if "beat_schedule" in error.field else _named(entry, error))
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise InvalidInput(
            "beat_schedule",
            f"{len(refused)} entries refused, nothing imported:\n"
            + "\n".join(f"  {e}" for e in refused),
        )
    plan.types = types.new
    plan.stale = _stale(store, {e.key for e in entries} | set(keep))
    return plan


def _named(entry: BeatEntry, error: InvalidInput) -> InvalidInput:
    """``error`` about a field of the task of ``entry``, naming the entry."""
    return InvalidInput(f"{_where(entry)}: {error.field}", error.message)


def _stale_outcome(task: Task, action: Action) -> Outcome:
    key = task.key or ""
    return Outcome(
        name=key.removeprefix(KEY_PREFIX),
        key=key,
        action=action,
        task_id=task.id,
        task_type=task.type,
        schedule=_schedule_text(task),
        status=_shown_status(task),
    )


def import_entries(
    store: Any,
    entries: Sequence[BeatEntry],
    *,
    now: datetime,
    create_types: bool = False,
    prune: bool = False,
    dry_run: bool = False,
    keep: Iterable[str] = (),
    hint: str = CREATE_TYPES_HINT,
) -> ImportReport:
    """Import ``entries`` into ``store`` (module doc); ``dry_run``: plan only."""
    plan = plan_import(store, entries, now=now, create_types=create_types, keep=keep, hint=hint)
    outcomes: list[Outcome] = list(plan.quiet)
    if not dry_run:
        for task_type in plan.types:
            store.create_task_type(task_type)
    created = (
        [task for _, task in plan.creations]
        if dry_run
        else store.create_tasks([task for _, task in plan.creations], now=now)
    )
    for (entry, _), task in zip(plan.creations, created, strict=True):
        outcomes.append(
            Outcome(
                name=entry.name,
                key=entry.key,
                action=Action.CREATED,
                task_id=task.id,
                task_type=task.type,
                schedule=_created_schedule(entry, task),
                first_run=task.next_run,
            )
        )
    for update in plan.updates:
        outcomes.append(_update(store, update, now, dry_run=dry_run, hint=hint))
    for task in plan.stale:
        if prune and not dry_run:
            outcomes.append(_prune(store, task, now))
        else:
            outcomes.append(_would_prune(store, task, prune))
    order = {e.name: n for n, e in enumerate(entries)}
    outcomes.sort(key=lambda o: (o.action in STALE_ACTIONS, order.get(o.name, 0), o.key))
    warnings = (*(w for e in entries for w in e.warnings), *_late_warnings(plan))
    types = tuple((t.type, t.backend_name, t.effective_queue) for t in plan.types)
    notes = _notes(entries, outcomes)
    return ImportReport(tuple(outcomes), types, warnings, dry_run, notes=notes)


def _notes(entries: Sequence[BeatEntry], outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """How the periodic entries created or updated run here, against beat
    (one note naming them)."""
    written = {o.name for o in outcomes if o.action in (Action.CREATED, Action.UPDATED)}
    periodic = [e.name for e in entries if e.kind is ScheduleKind.PERIODIC and e.name in written]
    if not periodic:
        return ()
    cooldown = round(COOLDOWN_SHARE * 100)
    more = round((1 / COOLDOWN_SHARE - 1) * 100)
    shown = ", ".join(repr(n) for n in periodic[:5]) + (" ..." if len(periodic) > 5 else "")
    return (
        f"{len(periodic)} periodic entr{'y' if len(periodic) == 1 else 'ies'} ({shown}): "
        "beat starts one exactly every period; here a run may start once a cooldown of "
        f"{cooldown} % of the period has passed since the last one ended (and should by one "
        f"period after the last start), so an idle platform runs a short task up to {more} % "
        "more often than beat; a busy one keeps to once per period. A crontab entry fires "
        "at beat's instants",
    )


def _late_warnings(plan: _Plan) -> list[str]:
    """One warning per periodic entry whose task's known run time (its
    measured average, else its expected duration; a new task has none, and
    beat gives none) makes each run start late with the cooldown the import
    leaves it (:func:`.policy.cooldown_shortfall`)."""
    warnings: list[str] = []
    for entry, task in plan.existing:
        shortfall = cooldown_shortfall(task)
        if entry.kind is ScheduleKind.PERIODIC and shortfall is not None:
            warnings.append(f"entry {entry.name!r} (task {task.id}): {shortfall.detail()}")
    return warnings


def _created_schedule(entry: BeatEntry, task: Task) -> str:
    if task.cooldown is not None:
        return f"{entry.describe()}, cooldown {span(task.cooldown)}"
    return entry.describe()


def _update(
    store: Any,
    update: tuple[BeatEntry, Task, Task, list[str]],
    now: datetime,
    *,
    dry_run: bool,
    hint: str,
) -> Outcome:
    """Write the planned task if the one read is still what is stored; else
    plan the entry again from the task as it now is (a claim or an outcome
    came first)."""
    entry, before, after, differences = update
    for _ in range(UPDATE_ATTEMPTS):
        if not dry_run:
            try:
                after = store.update_task(after, expected_updated_at=before.updated_at)
            except Conflict:
                plan = _Plan()
                _plan_entry(store, entry, _Types(store, create=False, hint=hint), now, plan)
                if plan.quiet:  # unchanged now, or busy
                    return plan.quiet[0]
                if not plan.updates:  # deleted meanwhile
                    break
                entry, before, after, differences = plan.updates[0]
                continue
        return Outcome(
            name=entry.name,
            key=entry.key,
            action=Action.UPDATED,
            task_id=after.id,
            task_type=after.type,
            schedule=entry.describe(),
            changes=tuple(differences),
            status=_shown_status(after),
        )
    raise Conflict(
        f"the task of beat_schedule entry {entry.name!r} ({entry.key}) kept changing while "
        "it was updated; import again"
    )


def _would_prune(store: Any, task: Task, prune: bool) -> Outcome:
    if not prune:
        return _stale_outcome(task, Action.STALE)
    open_run = _has_open_run(store, task)
    return _stale_outcome(task, Action.DISABLED if open_run else Action.PRUNED)


def _prune(store: Any, task: Task, now: datetime) -> Outcome:
    """Delete a stale task, or disable it while a run of it is open."""
    assert task.id is not None
    if _has_open_run(store, task):
        if task.status is not TaskStatus.DISABLED:
            store.disable_tasks([task.id], now=now)
        fresh = store.get_tasks([task.id])
        return _stale_outcome(fresh[0] if fresh else task, Action.DISABLED)
    store.delete_tasks([task.id])
    return _stale_outcome(task, Action.PRUNED)
