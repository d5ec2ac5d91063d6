"""Conventional Celery configuration module, read by ``swh_like_scheduler.celery_app``.

Every value can be set from the environment; the defaults work on one machine
with a local Redis.
"""

import os

broker_url = os.environ.get("SWH_SCHEDULER_BROKER_URL", "redis://127.0.0.1:6379/0")
result_backend = os.environ.get("SWH_SCHEDULER_RESULT_BACKEND") or None

task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
timezone = "UTC"
enable_utc = True

# the listener needs events from every worker (`celery worker -E` does the same)
worker_send_task_events = True
task_send_sent_event = False
# one message at a time per process: long tasks must not hold others back
worker_prefetch_multiplier = 1
task_acks_late = True
task_reject_on_worker_lost = True
# each worker also consumes "<hostname>.dq2": the runner sends a task that must
# not run on some nodes straight to an allowed worker
worker_direct = True
broker_connection_retry_on_startup = True
# each worker process renews the runs it executes this often (seconds); keep
# it at most half the monitor's --ping-timeout
try:
    swh_scheduler_lease_ping = float(os.environ.get("SWH_SCHEDULER_LEASE_PING") or 10)
except ValueError:
    raise SystemExit(
        "SWH_SCHEDULER_LEASE_PING: "
        f"{os.environ['SWH_SCHEDULER_LEASE_PING']!r} is not a number of seconds"
    ) from None
