"""A runner's use of the Redis index: claims, settling, stuck claims and
rebuilds, with the database as the fallback whenever the index cannot
answer (Redis down, emptied, or being rebuilt)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..domain.exceptions import SchedulerError
from ..domain.model import Priority
from ..plumbing.outage import Outage
from ..store import SchedulerStore
from .rebuild import rebuild
from .redis_index import CLAIM_TIMEOUT, IndexUnavailable, RedisIndex
from .sync import drift, repair

logger = logging.getLogger(__name__)

#: waiting tasks a runner's pass checks against the index (per due type)
SWEEP_PAGE = 500
#: ready tasks each index claim round reads from the database first
#: (:meth:`IndexKeeper.file_lacking`)
READY_CHECK = 1000


#: added to the store's claim time limit (:func:`hold_of`)
HOLD_MARGIN = timedelta(seconds=5)


def hold_of(store: object) -> timedelta:
    """How long a runner's ids stay in ``claimed`` before any process files
    them again: the time limit of the database claim that follows the
    Redis claim (``claim_timeout``: PostgreSQL cancels a claim running
    longer, and nothing is written) and a margin, at most
    :data:`.redis_index.CLAIM_TIMEOUT`. Past it, that claim either
    committed (and took the entries out) or never will: a runner killed
    between the two halves leaves its round for 35 s (the default limit
    of 30 s), not 60. Filed again early, an id still being claimed is at
    worst offered to another claim, which the database refuses."""
    limit = getattr(store, "claim_timeout", None)
    if not isinstance(limit, timedelta):
        return CLAIM_TIMEOUT
    return min(CLAIM_TIMEOUT, limit + HOLD_MARGIN)


class IndexKeeper:
    """The index of one runner process.

    :meth:`claim` answers ``None`` whenever the runner must claim from the
    database instead: Redis cannot be reached (one log line per outage), or
    the type's index is not complete, in which case a rebuild is started in
    a background thread (``background=False``: at once, in the caller's
    thread, as ``--once`` and tests want) while the runners carry on from
    the database."""

    def __init__(
        self, index: RedisIndex, store: SchedulerStore, *, background: bool = True
    ) -> None:
        self.index = index
        self.store = store
        self.background = background
        self.outage = Outage(logger, "Redis index")
        self._rebuilding: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        #: entries the database contradicted and that were filed again
        self.repaired = 0
        #: waiting tasks the sweep found missing from the index, or filed wrong
        self.drifted = 0
        #: how long the ids of a claim stay in ``claimed`` before they come
        #: back as stuck (:func:`hold_of`)
        self.hold = hold_of(store)

    def claim(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None,
        nodes: Sequence[str] | None = None,
    ) -> list[int] | None:
        """Up to ``limit`` ids from the index, after :meth:`file_lacking`
        (the database's first ``min(limit, READY_CHECK)`` ready tasks)."""
        self.file_lacking(
            task_type,
            now=now,
            limit=min(limit, READY_CHECK),
            priorities=priorities,
            nodes=nodes,
        )
        try:
            ids = self.index.claim(
                task_type, now=now, limit=limit, priorities=priorities, hold=self.hold
            )
        except IndexUnavailable as exc:
            self.outage.failed(exc)
            return None
        self.outage.ok()
        if ids is None:
            self.request_rebuild(task_type)
        return ids

    def file_lacking(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None,
        nodes: Sequence[str] | None = None,
    ) -> int:
        """File the tasks among the database's first ``limit`` ready ones
        (class, then deadline) that the index would not hand out; how many.

        Why each claim round asks the database, rather than a sweep alone:
        the index lacks a task only when a write did not reach it (a process
        not given the URL, a Redis write that failed, SQL behind its back),
        and such a task may have the earliest deadline of all. A sweep
        through the waiting tasks finds it after a number of passes that
        grows with the table (at 500 a pass, a million waiting tasks take
        2,000 passes); this read finds it as soon as it is among the first
        ``limit`` ready tasks of the database's own order, however large
        the table. So, with the claim's full maturation
        (:meth:`.redis_index.RedisIndex.claim`), each round dispatches the
        database's first ``limit`` ready tasks, and a ready task with ``r``
        ready tasks ahead of it (class, then deadline) goes out within
        ``r // READY_CHECK + 1`` rounds of its type, whether the index
        holds it or not. The read is one ordered scan of the ready index
        that stops after ``limit`` ids (the rounds of a pass take up to
        twenty times as many ids from Redis), plus one script call; tasks
        in ``claimed`` count as held (another runner is claiming them, or
        their claim comes back as stuck)."""
        try:
            ready = self.store.ready_task_ids(
                task_type, now=now, limit=limit, priorities=priorities, nodes=nodes
            )
            lacking = self.index.lacking(task_type, ready, now=now)
            if not lacking:  # ``None``: not complete; the round uses the database
                return 0
            tasks = self.store.get_tasks(lacking)
            self.index.put(task_type, tasks)
        except IndexUnavailable as exc:
            self.outage.failed(exc)
            return 0
        except SchedulerError as exc:  # the round's claim then says it too
            logger.debug("could not read the ready tasks of %s: %s", task_type, exc)
            return 0
        self.drifted += len(lacking)
        logger.info(
            "index of %s lacked %d ready tasks (written without it); filed", task_type, len(lacking)
        )
        return len(lacking)

    def settle(
        self, task_type: str, offered: Sequence[int], claimed: set[int], *, now: datetime
    ) -> None:
        """The database claimed ``claimed`` among the ``offered`` ids. The
        claim itself took their entries out (the runner's store is an
        :class:`.store.IndexedStore`); the others are filed again as the
        database holds them, except those still ready there: the database
        refused them for a reason of the moment (no live worker on a node
        they may run on, or another runner claiming them right now). Those
        stay in ``claimed`` until their claim times out
        (:data:`.redis_index.CLAIM_TIMEOUT`), then come back as stuck
        claims: offered again at each pass, they would take the front of
        the ready set from tasks that can run."""
        stale = [i for i in offered if i not in claimed]
        try:
            self.repaired += repair(
                self.index,
                self.store,
                task_type,
                stale,
                parked_at=now,
                park_until=now + CLAIM_TIMEOUT,
            )
        except (IndexUnavailable, SchedulerError) as exc:
            # what is left in ``claimed`` comes back as a stuck claim
            logger.warning("could not file %d index entries of %s: %s", len(stale), task_type, exc)

    def return_stuck(self, task_type: str, *, now: datetime) -> int:
        """File again the claims of runners that died before settling them."""
        try:
            ids = self.index.stuck(task_type, now=now)
            if ids:
                logger.info("%d stuck index claims of %s filed again", len(ids), task_type)
            return repair(self.index, self.store, task_type, ids)
        except (IndexUnavailable, SchedulerError) as exc:
            self.outage.failed(exc)
            return 0

    def sweep(self, task_type: str, *, page: int = SWEEP_PAGE) -> None:
        """Check the next ``page`` waiting tasks of the type against the
        index and repair what differs (:func:`.sync.drift`), going round the
        table one page per call from a cursor every runner shares (in
        Redis): what no write filed, at any time, is filed within one round
        of the table by all the runners together. Ready tasks the index
        lacks do not wait for it (:meth:`file_lacking`). Nothing is checked
        while the index is not complete."""
        try:
            after = self.index.sweep_cursor(task_type)
            found = drift(self.index, self.store, task_type, after_id=after, limit=page)
            if not found.complete:
                return
            self.index.set_sweep_cursor(task_type, found.last_id)  # 0 at the end: start over
        except (IndexUnavailable, SchedulerError) as exc:
            self.outage.failed(exc)
            return
        if found.missing or found.wrong:
            self.drifted += found.missing + found.wrong
            logger.info(
                "index of %s: %d waiting tasks were missing and %d filed wrong; repaired",
                task_type,
                found.missing,
                found.wrong,
            )

    def request_rebuild(self, task_type: str) -> None:
        if not self.background:
            self._rebuild(task_type)
            return
        with self._lock:
            running = self._rebuilding.get(task_type)
            if running is not None and running.is_alive():
                return
            thread = threading.Thread(
                target=self._rebuild,
                args=(task_type,),
                name=f"index-rebuild-{task_type}",
                daemon=True,
            )
            self._rebuilding[task_type] = thread
            thread.start()

    def _rebuild(self, task_type: str) -> None:
        try:
            # its share: the pages left to other runners are theirs (or come
            # back to whoever joins after their lease)
            rebuild(self.index, self.store, task_type, wait=False)
        except (IndexUnavailable, SchedulerError) as exc:
            logger.warning(
                "index rebuild of %s stopped (the database serves meanwhile): %s", task_type, exc
            )

    def join(self, timeout: float | None = None) -> None:
        """Wait for the rebuilds under way (tests, shutdown)."""
        with self._lock:
            threads = list(self._rebuilding.values())
        for thread in threads:
            thread.join(timeout)
