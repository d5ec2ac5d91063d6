"""The runner as a Celery beat scheduler: ``celery -A APP beat -S swh``.

Registered under the alias ``swh`` in the ``celery.beat_schedulers``
entry-point group. Beat drives the same :class:`~.loop.RunnerLoop` as
``swh scheduler start-runner``: each tick is one runner pass over all task
types plus, when its turn comes, the monitor's duties (the monitor lock is
shared with runners and ``start-monitor``: exactly one process does them);
then the tick sleeps until the next task is ready, at most beat's
``max_interval`` (``--max-interval``, default 60 s), woken early on
PostgreSQL when a task is created, enabled, respawned or rescheduled soon.
A database outage is logged once and retried; beat never dies of it.

Settings (Celery configuration, read when beat starts the scheduler):

* ``swh_scheduler_db_url`` (else ``SWH_SCHEDULER_DB_URL``, else the
  scheduler's configuration file and its default, with a warning); the
  first line beat logs names the database and the broker and where each
  came from, and beat stops on a database without the scheduler's schema
  (run ``swh scheduler db init``);
* ``swh_scheduler_monitor``: ``True`` (default: the monitor's default
  settings), ``False`` (no monitor duties in beat: run ``swh scheduler
  start-monitor`` beside it), or a mapping of :class:`MonitorSettings`
  fields, durations in seconds, e.g. ``{"republish_after": 120, "period":
  5}`` (``republish_after: None`` disables re-publishing);
* ``swh_scheduler_index_url`` (else ``SWH_SCHEDULER_INDEX_URL``): the Redis
  index of waiting tasks, used and kept in line as ``start-runner`` does;
* ``swh_scheduler_import_beat_schedule`` (``True``, ``'check'``, ``False``)
  and ``swh_scheduler_beat_create_types``: what beat does at start with the
  app's ``beat_schedule`` (:mod:`.beatsync`): by default its entries are
  imported as keyed tasks, as ``swh scheduler import-beat`` does.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
from collections.abc import Mapping
from datetime import timedelta
from types import FrameType
from typing import Any, cast

from celery.beat import Scheduler

from ..config.settings import load_settings
from ..config.sources import CELERY_DEFAULT_BROKER, Chosen, choose_database, first_line
from ..dispatch.routing import LiveWorkers
from ..domain.exceptions import InvalidInput, SchedulerError
from ..monitor.duties import MonitorSettings
from ..runner.interpreter import tune_interpreter
from ..runner.loop import RunnerLoop
from ..runner.wakeup import Waker, waker_for
from ..store import SchedulerStore, SQLAlchemyStore, migrations, missing_sqlite_file
from ..store.clock import DatabaseClock
from ..store.session import daemon_pool
from .sync import BeatScheduleSync

logger = logging.getLogger(__name__)

#: the Celery setting of the monitor's duties in beat (module doc)
MONITOR_SETTING = "swh_scheduler_monitor"
#: what stops beat (:meth:`RunnerScheduler._on_signal`)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_COUNTS = frozenset({"retention_limit", "batch_size"})
_DAYS = frozenset({"keep_runs", "keep_finished_oneshots"})


def monitor_settings(value: Any) -> MonitorSettings | None:
    """The :class:`MonitorSettings` of the ``swh_scheduler_monitor`` setting
    (module doc); :class:`InvalidInput` naming the field when it is wrong."""
    if value is None or value is True:
        return MonitorSettings()
    if value is False:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(MONITOR_SETTING, f"must be true, false or a mapping, not {value!r}")
    known = {f.name for f in dataclasses.fields(MonitorSettings)}
    chosen: dict[str, Any] = {}
    for key, item in value.items():
        field = f"{MONITOR_SETTING}.{key}"
        if key not in known:
            raise InvalidInput(field, f"unknown; one of {', '.join(sorted(known))}")
        if key == "holder" or (item is None and key in ("republish_after", "worker_timeout")):
            chosen[key] = item
        elif isinstance(item, bool) or not isinstance(item, int | float):
            raise InvalidInput(field, f"must be a number, not {item!r}")
        elif key in _COUNTS:
            chosen[key] = int(item)
        else:
            chosen[key] = timedelta(days=item) if key in _DAYS else timedelta(seconds=item)
    try:
        return MonitorSettings(**chosen)
    except InvalidInput as error:
        raise InvalidInput(f"{MONITOR_SETTING}.{error.field}", error.message) from error


#: what to give beat to choose the database and the broker
BEAT_HINTS = {
    "database": "the app's swh_scheduler_db_url setting or SWH_SCHEDULER_DB_URL",
    "broker": "the app's broker_url setting",
}


def beat_broker(app: Any) -> Chosen:
    """The broker beat's app names, and where it came from."""
    own = app.conf.get("broker_url")
    where = f"the app {app.main or 'of beat'}"
    if isinstance(own, str) and own:
        return Chosen(own, f"the broker_url of {where}")
    return Chosen(CELERY_DEFAULT_BROKER, f"Celery's default: {where} sets no broker_url", True)


class RunnerScheduler(Scheduler):
    """A beat scheduler whose every tick is a step of the runner's loop."""

    #: longest sleep between passes (celery beat's ``beat_max_loop_interval``)
    max_interval = 60.0

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        env_url = os.environ.get("SWH_SCHEDULER_DB_URL") or None
        settings = load_settings(db_url=env_url, db_source="SWH_SCHEDULER_DB_URL")
        database = choose_database(settings, app=app, app_spec=app.main or "of beat")
        url = database.url
        warn, line = first_line("celery beat -S swh", database, beat_broker(app), hints=BEAT_HINTS)
        logger.log(logging.WARNING if warn else logging.INFO, "%s", line)
        try:
            monitor = monitor_settings(app.conf.get(MONITOR_SETTING, True))
        except InvalidInput as error:  # one line naming the setting, not a traceback
            logger.critical("beat -S swh cannot start: %s", error)
            raise SystemExit(1) from None
        missing = missing_sqlite_file(url)
        if missing is not None:  # opening it would create it: refused as empty
            logger.critical(
                "beat -S swh cannot start: no SQLite database at %s (create it with "
                "`swh scheduler db init`)",
                missing,
            )
            raise SystemExit(1)
        self._store = SQLAlchemyStore.from_url(url, role="beat", pool=daemon_pool("beat"))
        try:
            migrations.check(self._store.engine)
        except SchedulerError as error:
            # one line, not a traceback: beat stops (exit code 1)
            logger.critical("beat -S swh cannot start: %s", error)
            self._store.close()
            raise SystemExit(1) from None
        self._stop = threading.Event()
        self._waker: Waker = waker_for(self._store.engine, self._stop)
        tune_interpreter()  # beat owns its process
        #: a step is running (close() may be called from a signal handler then)
        self._stepping = False
        self._closed = False
        #: SIGTERM or SIGINT came (:meth:`_on_signal`)
        self._signalled = 0
        self._previous_handlers: dict[signal.Signals, Any] = {}
        super().__init__(app, *args, **kwargs)
        index_url = app.conf.get("swh_scheduler_index_url") or os.environ.get(
            "SWH_SCHEDULER_INDEX_URL"
        )
        store: SchedulerStore = self._store
        keeper = None
        if index_url:
            from ..index import IndexedStore, RedisIndex
            from ..index.keeper import IndexKeeper

            checked = load_settings(db_url=url, index_url=index_url).index_url
            index = RedisIndex.from_url(str(checked))
            store = cast(SchedulerStore, IndexedStore(self._store, index))
            keeper = IndexKeeper(index, store)
        #: the database's clock, which decides (this host's may be off)
        self._clock = DatabaseClock(self._store, role="beat")
        self._loop = RunnerLoop(
            store,
            app,
            period=float(self.max_interval),
            workers=LiveWorkers(app),
            monitor=monitor,
            index=keeper,
            clock=self._clock.now,
        )
        #: the app's beat_schedule, imported (or checked) before the first tick
        self._beat_schedule = BeatScheduleSync(app, store)
        if not kwargs.get("lazy"):
            if threading.current_thread() is threading.main_thread():
                self._previous_handlers = {
                    sig: signal.signal(sig, self._on_signal) for sig in _STOP_SIGNALS
                }
            try:
                self._beat_schedule.start(self._clock.now())
            except InvalidInput as error:
                # one line, not a traceback: beat stops (exit code 1)
                logger.critical("beat -S swh cannot start: %s", error)
                self.close()
                raise SystemExit(1) from None
            except BaseException:
                self.close()  # beat stops: the monitor lock and the database go
                raise

    def setup_schedule(self) -> None:
        """No static entries: the schedule lives in the database."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One step of the runner's loop, then the wait it asks for, which a
        wake-up cuts short; beat then ticks again at once (0 returned: its
        own sleep cannot be woken). SIGTERM/SIGINT end the wait, or the
        step under way (:meth:`_on_signal`)."""
        self._stepping = True
        try:
            self._beat_schedule.retry(self._clock.now())
            wait = self._loop.step()
        finally:
            self._stepping = False
        if self._signalled:
            raise SystemExit()  # came during the step: beat stops now
        self._waker.wait(wait)
        return 0.0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGTERM/SIGINT in beat's own process (installed in place of
        Celery's, which closes the scheduler and raises ``SystemExit``
        wherever the main thread is). Beat stops as ``start-runner`` does:
        the wait between steps ends at once, a step under way ends first.
        Stopped anywhere, a pass cut between its claim and its publish left
        claimed tasks unpublished until the monitor published them again,
        and a transaction cut in the middle could leave SQLite's write lock
        held, so that closing (which writes to give the monitor's lock back)
        waited 30 s for it. A second signal during the same step stops at
        once."""
        self._signalled += 1
        if not self._stepping or self._signalled > 1:
            raise SystemExit()
        logger.info("beat: stopping after the step under way (again to stop at once)")

    def close(self) -> None:
        """Release the monitor lock and the database. Celery calls this when
        beat stops, and from its own SIGTERM/SIGINT handler where ours is not
        installed (beat in a thread of another process), which may interrupt
        a step inside a transaction (on SQLite, a second write would wait for
        that one's lock): then only the wait is cut short, and the call Celery
        makes once the step has unwound does the rest."""
        self._stop.set()
        if self._stepping or self._closed:
            return
        self._closed = True
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers = {}
        try:
            self._loop.close()
        finally:
            self._waker.close()
            self._store.close()
            super().close()

    @property
    def info(self) -> str:
        monitor = "off" if self._loop.monitor is None else "on"
        url = self._store.engine.url.render_as_string()
        return f"swh_like_scheduler runner on {url} (monitor duties {monitor})"
