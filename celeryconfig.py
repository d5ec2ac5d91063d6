"""An example ``celeryconfig`` for the workers of a checkout.

``celery -A swh_like_scheduler.celery_app worker`` starts from the platform's
settings (``swh_like_scheduler/celeryconfig.py``, installed with the
package), then reads a module named ``celeryconfig`` when one can be
imported from the directory it starts in (``CELERY_CONFIG_MODULE`` names
another), then ``SWH_SCHEDULER_BROKER_URL``, ``SWH_SCHEDULER_RESULT_BACKEND``
and ``SWH_SCHEDULER_LEASE_PING`` from the environment. This file is that
module for a checkout: it is not installed (the wheel holds no top-level
module but the package), so copy it beside your workers to change a setting.
"""

# the broker and the result backend of your installation
broker_url = "redis://127.0.0.1:6379/0"
result_backend = None

# seconds between two renewals of a guarded run (at most half the monitor's
# --ping-timeout)
swh_scheduler_lease_ping = 10.0
