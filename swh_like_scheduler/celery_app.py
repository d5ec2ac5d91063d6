"""The Celery app module: ``celery -A swh_like_scheduler.celery_app worker -Q QUEUE -E``.

This is the only module that builds an app when imported (and reads the
environment): the platform's settings (:mod:`swh_like_scheduler.celeryconfig`),
then a conventional ``celeryconfig`` module when one can be imported
(``CELERY_CONFIG_MODULE`` names another), then ``SWH_SCHEDULER_BROKER_URL``,
``SWH_SCHEDULER_RESULT_BACKEND`` and ``SWH_SCHEDULER_LEASE_PING``.
"""

import os

from .domain.exceptions import InvalidInput
from .plumbing.celery_factory import make_app

try:
    app = make_app(
        user_module=os.environ.get("CELERY_CONFIG_MODULE", "celeryconfig"), environ=os.environ
    )
except InvalidInput as error:  # one line, not a traceback
    raise SystemExit(f"swh_like_scheduler.celery_app: {error}") from None
app.set_default()
