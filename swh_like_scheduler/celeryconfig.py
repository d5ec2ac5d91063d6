"""The platform's Celery settings: what ``celery -A swh_like_scheduler.celery_app``
and the daemons start from when nothing else is given.

Plain values, read by :func:`~swh_like_scheduler.plumbing.celery_factory.make_app`;
nothing here reads the environment (``celery_app`` applies
``SWH_SCHEDULER_BROKER_URL``, ``SWH_SCHEDULER_RESULT_BACKEND`` and
``SWH_SCHEDULER_LEASE_PING`` on top). A ``celeryconfig`` module of your own
(the repository's top-level ``celeryconfig.py`` is an example) overrides any
of them for the workers; a Celery app of your own (``--app``) replaces them
for the daemons.
"""

#: the built-in default broker: a Redis server on this machine. The daemons
#: warn when they fall back on it (nobody chose it).
broker_url = "redis://127.0.0.1:6379/0"
result_backend = None

task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
timezone = "UTC"
enable_utc = True

# the listener needs events from every worker (`celery worker -E` does the
# same; the listener also turns them on where a worker was started without)
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
swh_scheduler_lease_ping = 10.0
