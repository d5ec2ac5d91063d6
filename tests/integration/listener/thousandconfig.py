"""Celery settings of the 1,000-task test's worker, read by the production app
module (``celery -A swh_like_scheduler.celery_app`` with
``CELERY_CONFIG_MODULE=thousandconfig``); the broker comes from the test."""

import os

broker_url = os.environ["SWH_TEST_THOUSAND_BROKER"]
broker_connection_timeout = 3
broker_heartbeat = 2
worker_prefetch_multiplier = 8
worker_hijack_root_logger = False
