"""The Redis index of waiting tasks: keys, entries, the atomic claim.

A task is in the index of its type while it is ``waiting`` in the database:
in ``wait`` scored by its can_start_by (``next_run``), moved by the claim
script to its class's ``ready`` set scored by its should_start_by
(``deadline``) once that has passed, and popped from there into ``claimed``
when a runner takes it. The runner then claims the same ids in the
database (:meth:`~swh_like_scheduler.store.SchedulerStore.claim_ready_tasks`
with ``among``), which checks each is still ready: an entry the database
contradicts is never dispatched, only repaired (:mod:`.sync`).

Keys of a type share the hash tag ``{<prefix>:<type>}``. Scores are POSIX
seconds (float). Nothing here reads the clock: ``now`` is always given.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import redis

from ..domain.exceptions import SchedulerError
from ..domain.model import PRIORITY_ORDER, Priority, Task, TaskStatus
from ..store.values import WaitingEntry
from . import scripts

#: key prefix unless told otherwise
DEFAULT_PREFIX = "swh-index"
#: a claim its runner did not take in the database within this is returned
#: (:meth:`RedisIndex.stuck`), unless the runner says how long its database
#: claim may take (``hold``); ids the database refused although ready are
#: parked in ``claimed`` this long (:meth:`RedisIndex.park`)
CLAIM_TIMEOUT = timedelta(seconds=60)
#: how long a process joining a rebuild holds the cursor, or a page it read,
#: before another process may take it over (reading and filing a page takes
#: about a second)
REBUILD_LEASE = timedelta(minutes=2)
#: a rebuild joined by a process within this is under way
#: (:meth:`RedisIndex.rebuild_activity`)
ACTIVE_WITHIN = timedelta(seconds=10)
#: matured entries one claim script call moves to the ready sets (about
#: 15 ms of Redis time per call at most)
MATURE_SLICE = 10_000
#: script calls one claim makes at most to mature every entry before it pops
MATURE_CALLS = 1000


class IndexUnavailable(SchedulerError):
    """Redis cannot be reached (or refused a command): use the database."""


@dataclass(frozen=True)
class TypeKeys:
    """The Redis keys of one task type's index."""

    state: str
    wait: str
    meta: str
    claimed: str
    ready: tuple[str, ...]
    rebuild: str
    pages: str

    @classmethod
    def of(cls, prefix: str, task_type: str) -> TypeKeys:
        tag = f"{{{prefix}:{task_type}}}"
        ready = tuple(f"{tag}:ready:{p.rank}" for p in PRIORITY_ORDER)
        return cls(
            f"{tag}:state",
            f"{tag}:wait",
            f"{tag}:meta",
            f"{tag}:claimed",
            ready,
            f"{tag}:rebuild",
            f"{tag}:pages",
        )

    def all(self) -> list[str]:
        return [
            self.state,
            self.wait,
            self.meta,
            self.claimed,
            *self.ready,
            self.rebuild,
            self.pages,
        ]


def seconds(moment: datetime) -> float:
    return moment.timestamp()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _ms_of(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)


@dataclass(frozen=True)
class RebuildStep:
    """What a process joining a rebuild does next (:data:`.scripts.JOIN`):
    ``done`` (``token`` set if this step completed the index), ``wait``,
    ``busy``, ``cursor`` (``value``: where to read from) or ``page``
    (``value``: a page to read and file again)."""

    kind: str
    token: str = ""
    value: str = ""


def entry(task: Task) -> tuple[str, float, str] | None:
    """``(id, next_run score, meta)`` of a task the index should hold, or
    ``None`` for one it should not (not waiting)."""
    if task.status is not TaskStatus.WAITING or task.id is None:
        return None
    return str(task.id), seconds(task.next_run), _meta(task.priority, task.deadline)


def _meta(priority: Priority, deadline: datetime) -> str:
    """A ``meta`` value: the class rank and the deadline (the ready score)."""
    return f"{priority.rank} {seconds(deadline)!r}"


class RedisIndex:
    """The index of every task type on one Redis server (or database).

    The caller owns ``client`` (a ``redis.Redis``). Every Redis failure is
    raised as :class:`IndexUnavailable`; callers then use the database.
    """

    def __init__(self, client: redis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._claim = client.register_script(scripts.CLAIM)
        self._upsert = client.register_script(scripts.UPSERT)
        self._remove = client.register_script(scripts.REMOVE)
        self._stuck = client.register_script(scripts.STUCK)
        self._join = client.register_script(scripts.JOIN)
        self._advance = client.register_script(scripts.ADVANCE)
        self._done = client.register_script(scripts.DONE)
        self._lacking = client.register_script(scripts.LACKING)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = DEFAULT_PREFIX) -> RedisIndex:
        """An index on the Redis server at ``url`` (``redis://host:port/db``)."""
        client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        return cls(client, prefix=prefix)

    def keys(self, task_type: str) -> TypeKeys:
        return TypeKeys.of(self.prefix, task_type)

    def _call(self, script: Any, task_type: str, args: Sequence[Any]) -> Any:
        try:
            return script(keys=self.keys(task_type).all(), args=list(args))
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc

    # -- entries --------------------------------------------------------------

    def put(self, task_type: str, tasks: Iterable[Task], *, chunk: int = 1000) -> int:
        """Bring the entries of ``tasks`` (all of ``task_type``) in line with
        them: a waiting task is (re)filed at its times, any other one taken
        out. Returns how many entries were written or removed."""
        keep: list[Any] = []
        drop: list[str] = []
        for task in tasks:
            found = entry(task)
            if found is not None:
                keep.extend(found)
            elif task.id is not None:
                drop.append(str(task.id))
        done = self._upsert_values(task_type, keep, chunk)
        for i in range(0, len(drop), chunk):
            done += int(self._call(self._remove, task_type, drop[i : i + chunk]))
        return done

    def put_entries(
        self,
        task_type: str,
        priority: Priority,
        entries: Sequence[WaitingEntry],
        *,
        chunk: int = 1000,
    ) -> int:
        """File waiting tasks of class ``priority`` read as
        :class:`~swh_like_scheduler.store.WaitingEntry` (a rebuild's pages)."""
        values: list[Any] = []
        for item in entries:
            values.extend((str(item.id), seconds(item.next_run), _meta(priority, item.deadline)))
        return self._upsert_values(task_type, values, chunk)

    def _upsert_values(self, task_type: str, values: list[Any], chunk: int) -> int:
        """Run :data:`.scripts.UPSERT` over ``(id, score, meta)`` triples,
        ``chunk`` tasks a call."""
        done = 0
        for i in range(0, len(values), 3 * chunk):
            done += int(self._call(self._upsert, task_type, values[i : i + 3 * chunk]))
        return done

    def remove(self, task_type: str, ids: Iterable[int], *, chunk: int = 1000) -> None:
        """Take these tasks out of the index (they are no longer waiting)."""
        values = [str(i) for i in ids]
        for i in range(0, len(values), chunk):
            self._call(self._remove, task_type, values[i : i + chunk])

    # -- claims ---------------------------------------------------------------

    def claim(
        self,
        task_type: str,
        *,
        now: datetime,
        limit: int,
        priorities: Sequence[Priority] | None = None,
        moves: int = MATURE_SLICE,
        hold: timedelta = CLAIM_TIMEOUT,
    ) -> list[int] | None:
        """Up to ``limit`` ready task ids in dispatch order (class, then
        deadline), taken out of the ready sets into ``claimed`` until
        ``now + hold`` (then :meth:`stuck`: the caller's database claim of
        them must be over by then); ``None`` while the type's index is not
        complete (never built, being rebuilt, or emptied).

        Every entry whose can_start_by is ``now`` or earlier is moved to
        its ready set before anything is popped, ``moves`` entries per
        script call (each call is bounded; a backlog of a million matured
        entries takes a hundred calls once, then each claim moves only what
        matured since the last one), so the ids come in the database's
        order: class first, then deadline. After :data:`MATURE_CALLS`
        calls (writers filing ready entries faster than they are moved)
        the last call pops anyway."""
        if limit <= 0:
            return []
        wanted = set(priorities) if priorities else set(PRIORITY_ORDER)
        ranks = "".join(str(p.rank) for p in PRIORITY_ORDER if p in wanted)
        for call in range(MATURE_CALLS):
            args = [
                repr(seconds(now)),
                limit,
                repr(seconds(now + hold)),
                moves,
                ranks,
                "1" if call == MATURE_CALLS - 1 else "0",
            ]
            found = self._call(self._claim, task_type, args)
            if found is None:
                return None
            more, ids = found
            if not more:
                return [int(i) for i in ids]
        raise AssertionError("the last call pops")  # pragma: no cover

    def lacking(self, task_type: str, ids: Sequence[int], *, now: datetime) -> list[int] | None:
        """Of ``ids`` (tasks the database holds ready at ``now``), those the
        index would not hand out (:data:`.scripts.LACKING`); ``None`` while
        the type's index is not complete."""
        if not ids:
            return []
        found = self._call(self._lacking, task_type, [repr(seconds(now)), *ids])
        if found is None:
            return None
        return [int(i) for i in found]

    def park(self, task_type: str, ids: Sequence[int], *, until: datetime) -> None:
        """Keep these claimed ids in ``claimed`` until ``until`` (those no
        longer there are left out): the database refused them although
        they are ready, for a reason of the moment."""
        if not ids:
            return
        try:
            self.client.zadd(
                self.keys(task_type).claimed, {str(i): seconds(until) for i in ids}, xx=True
            )
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc

    def stuck(self, task_type: str, *, now: datetime, limit: int = 10_000) -> list[int]:
        """Ids claimed from the index whose claim ran out (its runner died or
        lost Redis before settling them), taken out of ``claimed``: the caller
        files them again from the database (:func:`.sync.repair`)."""
        found = self._call(self._stuck, task_type, [repr(seconds(now)), limit])
        return [int(i) for i in found]

    # -- completeness ---------------------------------------------------------

    def is_complete(self, task_type: str) -> bool:
        try:
            return self.client.hget(self.keys(task_type).state, "synced") == b"1"
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc

    def invalidate(self, task_type: str) -> None:
        """Stop using the type's index until it is rebuilt (after writes too
        many to file one by one, such as an import); a rebuild under way
        then starts over."""
        try:
            self.client.hdel(self.keys(task_type).state, "synced", "building")
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc

    # -- the shared rebuild (driven by :mod:`.rebuild`) --------------------------

    def rebuild_step(
        self, task_type: str, *, now: datetime, first: str, lease: timedelta = REBUILD_LEASE
    ) -> RebuildStep:
        """Join the type's rebuild (begun, emptying the index, if none is
        under way: from cursor ``first``) and take the next step of it
        (:data:`.scripts.JOIN`)."""
        token = secrets.token_hex(8)
        found = self._call(self._join, task_type, [token, _ms(now), _ms_of(lease), first])
        kind, *rest = (_text(v) for v in found)
        return RebuildStep(kind, *rest)

    def rebuild_advance(
        self,
        task_type: str,
        token: str,
        *,
        now: datetime,
        cursor: str,
        next_cursor: str,
        page: str | None,
        lease: timedelta = REBUILD_LEASE,
    ) -> bool:
        """Move the cursor from ``cursor`` to ``next_cursor`` and hand
        ``page`` (read between them) to the caller; False if the rebuild is
        no longer the caller's."""
        args = [token, _ms(now), _ms_of(lease), cursor, next_cursor, page or ""]
        return bool(self._call(self._advance, task_type, args))

    def rebuild_page_done(self, task_type: str, token: str, page: str, filed: int) -> int:
        """``page`` is filed (``filed`` tasks): 2 if that completed the
        index, 1 if pages remain, 0 if the rebuild is no longer ``token``."""
        return int(self._call(self._done, task_type, [token, page, filed]))

    def rebuild_state(self, task_type: str) -> dict[str, str]:
        """The fields of the type's last rebuild (``filed``, ``cursor``...)."""
        try:
            found = self.client.hgetall(self.keys(task_type).rebuild)
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc
        return {_text(k): _text(v) for k, v in found.items()}

    def reset(self, task_type: str, *, now: datetime) -> None:
        """Empty the type's index and mark it complete, as a rebuild that
        found no waiting task would (a type whose entries are then filed by
        hand)."""
        self.invalidate(task_type)
        step = self.rebuild_step(task_type, now=now, first="end")
        if step.kind != "done":
            raise IndexUnavailable(f"the index of {task_type} could not be reset ({step.kind})")

    def rebuild_activity(self, task_type: str, *, now: datetime) -> str:
        """What the type's rebuild is doing at ``now``: ``complete`` (the
        index is in use), ``under way`` (a process holds its cursor or a
        page, or joined it within :data:`ACTIVE_WITHIN`), ``stalled`` (begun,
        but its processes stopped: whoever joins next resumes it) or
        ``none`` (emptied, invalidated or never built: the next runner pass
        of the type, or ``index rebuild``, begins one)."""
        keys = self.keys(task_type)
        at = _ms(now)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(keys.state, ["synced", "building"])
            pipe.hmget(keys.rebuild, ["token", "held_until", "seen"])
            pipe.zrangebyscore(keys.pages, at, "+inf", start=0, num=1)
            (synced, building), (token, held, seen), leased = pipe.execute()
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc
        if synced == b"1":
            return "complete"
        if building is None or building != token:
            return "none"
        if leased or int(held or 0) > at or int(seen or 0) > at - _ms_of(ACTIVE_WITHIN):
            return "under way"
        return "stalled"

    # -- the drift sweep's cursor, shared by every runner -------------------------

    def sweep_cursor(self, task_type: str) -> int:
        """The last task id the drift sweep of the type checked (0: start)."""
        try:
            found = self.client.hget(self.keys(task_type).state, "swept")
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc
        return int(found or 0)

    def set_sweep_cursor(self, task_type: str, last_id: int) -> None:
        try:
            self.client.hset(self.keys(task_type).state, "swept", last_id)
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc

    def scan_entries(self, task_type: str, cursor: int, *, count: int) -> tuple[int, list[int]]:
        """A slice of the ids the type's index holds (``HSCAN`` of ``meta``,
        about ``count`` a call, from ``cursor``; 0: the start, and the
        next cursor is 0 after the last slice). An id may come twice."""
        try:
            # (the values too: NOVALUES needs Redis 7.4)
            after, found = self.client.hscan(self.keys(task_type).meta, cursor, count=count)
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc
        return int(after), [int(i) for i in found]

    def sizes(self, task_type: str) -> dict[str, int]:
        """How many entries each set of the type holds (for metrics and drift)."""
        keys = self.keys(task_type)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.zcard(keys.wait)
            for key in keys.ready:
                pipe.zcard(key)
            pipe.zcard(keys.claimed)
            wait, *ready, claimed = pipe.execute()
        except redis.RedisError as exc:
            raise IndexUnavailable(f"the Redis index cannot be used: {exc}") from exc
        return {"wait": wait, "ready": sum(ready), "claimed": claimed}
