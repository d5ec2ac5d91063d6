"""What ``celery beat -S swh`` does with the app's ``beat_schedule``.

Beat's own scheduler runs the entries of ``beat_schedule``; ours runs the
database's tasks. So that an entry is never ignored in silence, beat -S swh
reads ``beat_schedule`` when it starts, as ``swh scheduler import-beat``
does (:mod:`..beatimport`), according to the Celery setting
``swh_scheduler_import_beat_schedule``:

* ``True`` (default): import it (idempotent: an entry already imported is
  left unchanged, a changed one is updated in place), logging what it did;
  an entry that cannot be imported stops beat with its reason. A changed
  entry whose task has a run open is imported again at the next ticks
  (every :data:`RETRY_EVERY` seconds) until it is written;
* ``"check"``: write nothing, and stop beat naming the entries that are not
  in the database as they are (manage them with ``swh scheduler
  import-beat``);
* ``False``: stop beat, naming the entries, when ``beat_schedule`` has any
  (beat -S swh would not run them).

An entry beat -S swh cannot take (a ``solar`` schedule, a schedule class
of one's own...) is left out with a warning naming it and why, and the
others are imported; ``swh_scheduler_beat_exclude`` (a list of entry names)
leaves entries out on purpose, as ``import-beat --exclude`` (their tasks,
if any, are kept as they are).

``swh_scheduler_beat_create_types`` (default ``False``) creates the task
type an entry needs, as ``import-beat --create-types``. Tasks of entries
removed from ``beat_schedule`` are named in a warning and kept (``swh
scheduler import-beat --prune`` removes them). A database that cannot be
reached at start is logged, and the import is tried again at the next ticks.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from ..domain.exceptions import Conflict, InvalidInput, StoreError
from .importer import Action, ImportReport, import_entries
from .schedule import BeatEntry, app_entries, entry_key

logger = logging.getLogger(__name__)

#: the Celery setting of what beat does with ``beat_schedule`` (module doc)
IMPORT_SETTING = "swh_scheduler_import_beat_schedule"
#: the Celery setting that lets that import create task types
CREATE_TYPES_SETTING = "swh_scheduler_beat_create_types"
#: the Celery setting naming entries beat -S swh leaves out
EXCLUDE_SETTING = "swh_scheduler_beat_exclude"
#: seconds between two attempts at an import that could not finish
RETRY_EVERY = 10.0
_MODES = {True: "import", False: "off", "check": "check"}


def import_mode(value: Any) -> str:
    """``import``, ``check`` or ``off``: the ``swh_scheduler_import_beat_schedule``
    setting; :class:`InvalidInput` naming it when it is none of its values."""
    if value is None:
        return "import"
    for known, mode in _MODES.items():
        if type(value) is type(known) and value == known:
            return mode
    raise InvalidInput(IMPORT_SETTING, f"must be True, False or 'check', not {value!r}")


class BeatScheduleSync:
    """The import of one beat's ``beat_schedule`` into its store."""

    def __init__(self, app: Any, store: Any, *, retry_every: float = RETRY_EVERY) -> None:
        self.app = app
        self.store = store
        self.retry_every = retry_every
        self.mode = import_mode(app.conf.get(IMPORT_SETTING, True))
        create = app.conf.get(CREATE_TYPES_SETTING, False)
        if not isinstance(create, bool):
            raise InvalidInput(CREATE_TYPES_SETTING, f"must be True or False, not {create!r}")
        self.create_types = create
        self.exclude = excluded(app.conf.get(EXCLUDE_SETTING), app.conf.beat_schedule or {})
        #: an import is still to do (busy tasks, database out of reach)
        self.pending = False
        self._next_try = 0.0
        #: beat_schedule keys whose tasks the import keeps as they are
        self.keep: set[str] = set()

    def start(self, now: datetime) -> None:
        """Import, check or refuse ``beat_schedule`` (module doc);
        :class:`InvalidInput` naming the entries stops beat."""
        names = sorted(map(str, self.app.conf.beat_schedule or {}))
        if self.mode == "off":
            if names:
                raise InvalidInput(
                    "beat_schedule",
                    f"{_entries(names)} but {IMPORT_SETTING} is False: beat -S swh runs the "
                    "tasks of its database only, so these would never run. Import them "
                    "(swh scheduler import-beat) and remove them from beat_schedule, or set "
                    f"{IMPORT_SETTING} to True",
                )
            return
        if not names:
            logger.info("beat_schedule is empty: nothing to import")
            return
        entries = self._entries(warn=True)
        if self.mode == "check":
            self._check(entries, now)
            return
        self._import(entries, now)

    def retry(self, now: datetime) -> None:
        """Import again when one is pending and its time has come."""
        if not self.pending or time.monotonic() < self._next_try:
            return
        try:
            self._import(self._entries(warn=False), now)
        except InvalidInput as error:  # an entry refused now (a type deleted...)
            logger.error("beat_schedule not imported: %s", error)
            self._later()

    def _entries(self, *, warn: bool) -> list[BeatEntry]:
        """The entries beat takes: all but the excluded ones and those it
        cannot take (each named in a warning when ``warn``)."""
        refused: list[InvalidInput] = []
        entries = app_entries(self.app, exclude=self.exclude, refused=refused)
        taken = {e.name for e in entries}
        #: the tasks of entries left out are kept as they are (never "stale")
        self.keep = {
            entry_key(str(name))
            for name in (self.app.conf.beat_schedule or {})
            if str(name) not in taken
        }
        for error in refused if warn else ():
            logger.warning("beat_schedule: left out (beat -S swh cannot run it): %s", error)
        return entries

    def _later(self) -> None:
        self.pending = True
        self._next_try = time.monotonic() + self.retry_every

    def _import(self, entries: list[Any], now: datetime) -> None:
        try:
            report = import_entries(
                self.store,
                entries,
                now=now,
                create_types=self.create_types,
                keep=self.keep,
                hint=f"set {CREATE_TYPES_SETTING} = True",
            )
        except (StoreError, Conflict) as error:  # out of reach; a task kept changing
            logger.warning("beat_schedule not imported yet (tried again shortly): %s", error)
            self._later()
            return
        self.pending = False
        _log(report)
        if report.busy:
            self._later()

    def _check(self, entries: list[Any], now: datetime) -> None:
        report = import_entries(
            self.store,
            entries,
            now=now,
            dry_run=True,
            create_types=self.create_types,
            keep=self.keep,
            hint=f"set {CREATE_TYPES_SETTING} = True",
        )
        differ = [
            f"{o.name!r} ({'not imported' if o.action is Action.CREATED else 'changed'})"
            for o in report.outcomes
            if o.action in (Action.CREATED, Action.UPDATED, Action.BUSY)
        ]
        for outcome in report.outcomes:
            if outcome.action is Action.STALE:
                logger.warning("%s", outcome.line(dry_run=True))
        if differ:
            raise InvalidInput(
                "beat_schedule",
                f"{IMPORT_SETTING} is 'check' and the entries {', '.join(differ)} are not in "
                "the database as beat_schedule says: import them (swh scheduler import-beat) "
                f"or set {IMPORT_SETTING} to True",
            )
        logger.info("beat_schedule checked: %s", report.summary())


def excluded(value: Any, schedule: Any) -> frozenset[str]:
    """The entry names of the ``swh_scheduler_beat_exclude`` setting, each
    in ``beat_schedule``; :class:`InvalidInput` naming the setting otherwise."""
    if value is None:
        return frozenset()
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidInput(EXCLUDE_SETTING, f"must be a list of entry names, not {value!r}")
    names = frozenset(value)
    unknown = sorted(str(n) for n in names if n not in schedule)
    if unknown:
        raise InvalidInput(EXCLUDE_SETTING, f"beat_schedule has no entry {unknown[0]!r}")
    return names


def _entries(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names)
    return f"beat_schedule has {len(names)} entr{'y' if len(names) == 1 else 'ies'} ({shown})"


def _log(report: ImportReport) -> None:
    for line in report.lines():
        if line.startswith("warning: "):
            logger.warning("beat_schedule: %s", line.removeprefix("warning: "))
        elif "no longer in beat_schedule" in line or "busy" in line:
            logger.warning("beat_schedule: %s", line)
        else:
            logger.info("beat_schedule: %s", line)


def utc_now() -> datetime:
    """The instant of beat's import (the one clock read of this module)."""
    return datetime.now(tz=UTC)
