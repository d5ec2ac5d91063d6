"""Filling a type's index from the database, shared by every process that
joins the rebuild (seed 001's re-synchronisation with a sync id and owner).

A rebuild reads the type's waiting tasks class by class, high first, and
within a class in dispatch order (earliest deadline first, then id), in
pages of :data:`REBUILD_PAGE` (:meth:`~swh_like_scheduler.store.SchedulerStore.waiting_entries`:
three columns per task). The order of pages lives in Redis (the scripts
``JOIN``, ``ADVANCE`` and ``DONE``):

* the *cursor* says where the next page starts. One process at a time holds
  it, reads the page from it, moves it past the page and takes the page;
  reading is the only part done under the hold, so several processes file
  their pages at once and none reads a page another one has;
* a page taken is held for :data:`~.redis_index.REBUILD_LEASE`. A process
  that dies leaves its page to run out, and whoever joins next reads that
  range again (between its two keys, however many tasks it holds by then);
* the index is complete, and used, when the cursor has passed the last
  class and every page taken is filed.

Writes during the rebuild (the :class:`.store.IndexedStore`) go on filing
what they change, so a page read before a change and filed after it can
leave a stale entry: the database claim refuses it and it is filed again
(:func:`.sync.repair`), as with any stale entry. An ``invalidate`` or an
emptied Redis begins a new rebuild: the processes of the old one see it at
their next script and stop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..domain.model import PRIORITY_ORDER
from ..store import SchedulerStore
from ..store.values import WaitingEntry
from .redis_index import REBUILD_LEASE, RedisIndex

logger = logging.getLogger(__name__)

#: waiting tasks read from the database per page of a rebuild
REBUILD_PAGE = 10_000
#: the cursor once every page is handed out
END = "end"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Key = tuple[datetime, int]


def key_text(key: Key | None) -> str:
    """A (deadline, id) key as text: microseconds since the epoch, id;
    ``-`` for the start of a class."""
    if key is None:
        return "-"
    deadline, task_id = key
    micros = (deadline - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}:{task_id}"


def parse_key(text: str) -> Key | None:
    if text == "-":
        return None
    micros, task_id = text.split(":")
    return _EPOCH + timedelta(microseconds=int(micros)), int(task_id)


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: after ``after`` in the class of ``rank``."""

    rank: int
    after: Key | None = None

    def text(self) -> str:
        return f"{self.rank} {key_text(self.after)}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        rank, after = text.split(" ")
        return cls(int(rank), parse_key(after))


@dataclass(frozen=True)
class Page:
    """The waiting tasks of the class of ``rank`` after ``after`` and up to
    ``until`` (as they were when the page was first read)."""

    rank: int
    after: Key | None
    until: Key

    def text(self) -> str:
        return f"{self.rank} {key_text(self.after)} {key_text(self.until)}"

    @classmethod
    def parse(cls, text: str) -> Page:
        rank, after, until = text.split(" ")
        found = parse_key(until)
        assert found is not None, text
        return cls(int(rank), parse_key(after), found)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def next_cursor(cursor: Cursor, page: list[WaitingEntry], size: int) -> str:
    """The cursor after ``page``, read from ``cursor`` with a limit of
    ``size``: further in the class if the page was full, else the next
    class's start, or :data:`END` after the last class."""
    if len(page) >= size:
        return Cursor(cursor.rank, page[-1].key).text()
    if cursor.rank + 1 < len(PRIORITY_ORDER):
        return Cursor(cursor.rank + 1).text()
    return END


def rebuild(
    index: RedisIndex,
    store: SchedulerStore,
    task_type: str,
    *,
    page: int = REBUILD_PAGE,
    wait: bool = True,
    clock: Callable[[], datetime] = _utcnow,
    lease: timedelta = REBUILD_LEASE,
    poll: float = 0.05,
) -> int | None:
    """Join the type's rebuild (begin one if none is under way and the
    index is not complete) and file pages until none is left to take.

    Returns how many tasks the rebuild filed once the index is complete;
    ``None`` if this process stopped before: with ``wait=False``, when the
    pages left are held by other processes (a runner's background rebuild:
    it joins again at its next pass), or when the rebuild was begun anew
    under it (invalidated, or Redis emptied)."""
    mine = 0
    first = Cursor(0).text()
    while True:
        step = index.rebuild_step(task_type, now=clock(), first=first, lease=lease)
        if step.kind == "done":
            return _completed(index, task_type, mine, here=bool(step.token))
        if step.kind == "wait" and not wait:
            return None
        if step.kind in ("wait", "busy"):
            time.sleep(poll if step.kind == "busy" else max(poll, 0.5))
            continue
        taken: Page | None
        if step.kind == "page":
            taken = Page.parse(step.value)
            entries = _read_range(store, task_type, taken, page)
        else:
            cursor = Cursor.parse(step.value)
            priority = PRIORITY_ORDER[cursor.rank]
            entries = store.waiting_entries(task_type, priority, after=cursor.after, limit=page)
            taken = Page(cursor.rank, cursor.after, entries[-1].key) if entries else None
            moved = index.rebuild_advance(
                task_type,
                step.token,
                now=clock(),
                cursor=step.value,
                next_cursor=next_cursor(cursor, entries, page),
                page=taken.text() if taken else None,
                lease=lease,
            )
            if not moved:
                logger.info("the index rebuild of %s moved on without this process", task_type)
                return None
        if taken is None:
            continue
        index.put_entries(task_type, PRIORITY_ORDER[taken.rank], entries)
        mine += len(entries)
        done = index.rebuild_page_done(task_type, step.token, taken.text(), len(entries))
        if not done:
            logger.info("the rebuild of the index of %s began anew; this process stops", task_type)
            return None
        if done == 2:  # this page completed the index: say so at once
            return _completed(index, task_type, mine, here=True)


def _completed(index: RedisIndex, task_type: str, mine: int, *, here: bool = False) -> int:
    """The rebuild is complete: how many tasks it filed (logged if this
    process filed some of them, or completed it: ``here``)."""
    total = int(index.rebuild_state(task_type).get("filed", 0))
    if mine or here:
        logger.info(
            "index of %s rebuilt: %d waiting tasks (%d by this process)", task_type, total, mine
        )
    return total


def _read_range(
    store: SchedulerStore, task_type: str, taken: Page, page: int
) -> list[WaitingEntry]:
    """Every waiting task of a page's range, however many it holds now."""
    priority = PRIORITY_ORDER[taken.rank]
    found: list[WaitingEntry] = []
    after = taken.after
    while batch := store.waiting_entries(
        task_type, priority, after=after, until=taken.until, limit=page
    ):
        found.extend(batch)
        if len(batch) < page:
            break
        after = batch[-1].key
    return found
