"""The Celery app module: ``celery -A swh_like_scheduler.celery_app worker -Q QUEUE -E``.

This is the only module that builds an app when imported. It reads the
conventional ``celeryconfig`` module (``CELERY_CONFIG_MODULE`` names another).
"""

import os

from .plumbing.celery_factory import make_app

app = make_app(config_module=os.environ.get("CELERY_CONFIG_MODULE", "celeryconfig"))
app.set_default()
