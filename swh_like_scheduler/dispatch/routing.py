"""Routing tasks with ``dont_run_on_nodes`` to allowed workers only.

Workers run with ``worker_direct = True`` (set in ``celeryconfig``), so each
consumes a queue of its own, ``<hostname>.dq2``. The runner learns which
workers are alive and which queues they consume with one broadcast
(``inspect active_queues``), refreshed every ``ttl`` seconds, and sends a
constrained task to the direct queue of a live worker of its type's queue
whose node is not banned. A node is the part of a worker's hostname after
``@`` (``celery@crawler-3`` runs on node ``crawler-3``).

The same object tells how many worker slots serve a queue (the sum of its
live workers' pool sizes, from ``inspect stats``, asked of the workers it
has not heard of yet and again every ``stats_ttl`` seconds): the runner
keeps some of them from long runs (:mod:`.reserve`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from celery import Celery
from celery.utils.nodenames import worker_direct

from ..plumbing.quietlog import QuietLog

logger = logging.getLogger(__name__)
_quiet = QuietLog(logger, logging.WARNING)


def node_of(hostname: str) -> str:
    return hostname.rpartition("@")[2]


def pool_size(stats: Any) -> int | None:
    """A worker's slots from its ``inspect stats`` reply (``pool``'s
    ``max-concurrency``); ``None`` when the reply does not say."""
    pool = stats.get("pool") if isinstance(stats, dict) else None
    size = pool.get("max-concurrency") if isinstance(pool, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


@dataclass
class LiveWorkers:
    """The live workers of each queue, from a broadcast, cached for ``ttl`` s."""

    app: Celery
    ttl: float = 30.0
    timeout: float = 1.0
    _by_queue: dict[str, list[str]] = field(default_factory=dict)
    _fetched_at: float | None = None
    _turns: dict[str, Iterator[str]] = field(default_factory=dict)
    #: how often the pool sizes are asked again (they change only when a
    #: worker is restarted or autoscales)
    stats_ttl: float = 300.0
    _pool_sizes: dict[str, int] = field(default_factory=dict)
    #: the workers asked since the last full answer
    _asked: set[str] = field(default_factory=set)
    _stats_at: float | None = None

    def refresh(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and self._fetched_at is not None and now - self._fetched_at < self.ttl:
            return
        replies: dict[str, Any] = {}
        try:
            replies = self.app.control.inspect(timeout=self.timeout).active_queues() or {}
        except Exception as error:
            _quiet.log("cannot list live workers (%s); constrained tasks wait", error)
        by_queue: dict[str, list[str]] = {}
        for hostname, queues in replies.items():
            for queue in queues or ():
                by_queue.setdefault(queue["name"], []).append(hostname)
        self._by_queue = {q: sorted(hosts) for q, hosts in by_queue.items()}
        self._turns = {}
        self._fetched_at = now
        self._refresh_pool_sizes(set(replies), now)

    def _refresh_pool_sizes(self, hostnames: set[str], now: float) -> None:
        """Ask the live workers their pool sizes: those not asked yet, or
        all of them when the last full answer is ``stats_ttl`` old (a worker
        that does not answer is asked again only then); forget those gone."""
        stale = self._stats_at is None or now - self._stats_at >= self.stats_ttl
        asking = hostnames if stale else hostnames - self._asked
        if asking:
            try:
                replies = self.app.control.inspect(
                    destination=sorted(asking), timeout=self.timeout
                ).stats()
            except Exception as error:
                _quiet.log("cannot read the workers' pool sizes (%s); no slot kept", error)
            else:
                if stale:
                    self._pool_sizes, self._asked, self._stats_at = {}, set(), now
                self._asked |= asking
                for hostname, stats in (replies or {}).items():
                    size = pool_size(stats)
                    if size is not None:
                        self._pool_sizes[hostname] = size
        self._pool_sizes = {h: n for h, n in self._pool_sizes.items() if h in hostnames}

    def slots(self, queue: str) -> int | None:
        """The worker slots consuming ``queue`` (the sum of its live
        workers' pool sizes); ``None`` when a live worker's is unknown, or
        no worker is known to consume it."""
        hosts = self.hostnames(queue)
        if not hosts or any(h not in self._pool_sizes for h in hosts):
            return None
        return sum(self._pool_sizes[h] for h in hosts)

    def hostnames(self, queue: str) -> list[str]:
        return self._by_queue.get(queue, [])

    def nodes(self, queue: str) -> list[str]:
        """Nodes of the live workers consuming ``queue``."""
        return sorted({node_of(h) for h in self.hostnames(queue)})

    def pick(self, queue: str, banned: Iterable[str]) -> str | None:
        """A live worker of ``queue`` on an allowed node (round robin), or None."""
        excluded = set(banned)
        allowed = [h for h in self.hostnames(queue) if node_of(h) not in excluded]
        if not allowed:
            return None
        turn = self._turns.setdefault(queue, itertools.cycle(self.hostnames(queue)))
        return next(candidate for candidate in turn if candidate in allowed)

    def direct_queue(self, hostname: str) -> str:
        """The worker's own queue, declared on the app as the worker declares it."""
        queue = worker_direct(hostname)
        if queue.name not in self.app.amqp.queues:
            self.app.amqp.queues.add(queue)
        return str(queue.name)
