"""A Celery app whose one task counts, in Redis, how many runs of each kind
(``long`` or ``short``) run at once: what a worker really did while a runner
kept slots from long runs.

Configured from the environment when imported by ``celery -A reserveapp``:
``RESERVE_TEST_BROKER`` and ``RESERVE_TEST_REDIS``. The task
``tests.reserve.work(kind, seconds, key, n)`` (``n`` tells tasks apart)
runs ``seconds`` and records, under ``key``: ``<key>:running:<kind>`` (runs of that kind now),
``<key>:peak:<kind>`` (the most at once) and ``<key>:order`` (the kinds, in
the order they ended).
"""

from __future__ import annotations

import os
import time

import redis

from swh_like_scheduler.plumbing.celery_factory import make_app

TASK_NAME = "tests.reserve.work"

app = make_app(
    config_module=None,
    broker_url=os.environ.get("RESERVE_TEST_BROKER", "memory://"),
    load_workers=False,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
)
_PEAK = """
local now = redis.call('INCR', KEYS[1])
local peak = tonumber(redis.call('GET', KEYS[2]) or '0')
if now > peak then redis.call('SET', KEYS[2], now) end
return now
"""


@app.task(name=TASK_NAME, shared=False)
def work(kind: str, seconds: float, key: str, n: int) -> dict[str, str]:
    client = redis.Redis.from_url(os.environ["RESERVE_TEST_REDIS"])
    running = f"{key}:running:{kind}"
    client.eval(_PEAK, 2, running, f"{key}:peak:{kind}")
    try:
        time.sleep(seconds)
    finally:
        client.decr(running)
        client.rpush(f"{key}:order", kind)
    return {"status": "eventful"}
