"""The runner as a Celery beat scheduler: ``celery -A APP beat -S swh``.

Registered under the alias ``swh`` in the ``celery.beat_schedulers``
entry-point group. Each beat tick is one runner pass; the database comes from
the app setting ``swh_scheduler_db_url`` or ``SWH_SCHEDULER_DB_URL`` (read
here, at the edge, when beat starts the scheduler).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery.beat import Scheduler

from ..config import load_settings
from ..exceptions import SchedulerError
from ..outage import Outage
from ..store import SQLAlchemyStore
from .dispatch import tick
from .interpreter import tune_interpreter
from .loop import utcnow
from .routing import LiveWorkers

logger = logging.getLogger(__name__)

#: seconds between two tries while the database is unreachable
RETRY_INTERVAL = 5.0


class RunnerScheduler(Scheduler):
    """A beat scheduler whose every tick is a runner pass over all task types."""

    #: longest sleep between passes (celery beat's ``beat_max_loop_interval``)
    max_interval = 60.0

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        url = app.conf.get("swh_scheduler_db_url") or os.environ.get("SWH_SCHEDULER_DB_URL")
        self._store = SQLAlchemyStore.from_url(load_settings(db_url=url).db_url)
        self._workers = LiveWorkers(app)
        self._outage = Outage(logger, "beat runner pass")
        tune_interpreter()  # beat owns its process
        super().__init__(app, *args, **kwargs)

    def setup_schedule(self) -> None:
        """No static entries: the schedule lives in the database."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One runner pass; the seconds to sleep before the next. A database
        outage is logged once and retried (beat would die of an exception
        raised here)."""
        try:
            report = tick(self._store, self.app, utcnow(), workers=self._workers)
        except SchedulerError as error:
            self._outage.failed(error)
            return min(RETRY_INTERVAL, float(self.max_interval))
        self._outage.ok()
        return report.sleep_seconds(float(self.max_interval))

    def close(self) -> None:
        self._store.close()
        super().close()

    @property
    def info(self) -> str:
        return f"swh_like_scheduler runner on {self._store.engine.url.render_as_string()}"
