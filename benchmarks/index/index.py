"""index: the Redis index of waiting tasks against the database claim.

* ``lua_vs_zpopmin``: task ids per second of the index's claim script,
  1,000 at a time until 200,000 ready entries are drained, against the
  ceiling of Redis itself on this machine: ``ZPOPMIN`` of 1,000 from a
  plain sorted set of as many members.
* ``lua_claim_1000``: the claim script alone taking 1,000 ready entries
  among 10k and 10M (quick: 100k) filed straight into Redis.
* ``claim_1000``: one claim of 1,000 ready tasks with 10k and 10M tasks in
  the table (quick: 10k and 100k), by the index (the script, the database
  claim of those ids, the entries settled), by the index again on the same
  1,000 tasks put back to waiting (their pages just written:
  ``index_same_tasks``) and by the database alone, each as a ratio to its
  own cost at the smallest size; ``wal_per_claim``, the bytes of WAL each
  claim through the index wrote (pages written for the first time since a
  checkpoint are logged whole).
* ``rebuild``: seconds to fill the index of every table size from the
  database (the resync after Redis lost everything) by one process;
  ``rebuild_by_two``, by two processes sharing it.
* ``dispatch``: one runner pass publishing 50,000 ready tasks to Redis
  (quick: 20,000), with the index and without.
* ``drift``: 1M waiting tasks (quick: 100k), 10,000 of them ready, filed
  in the index; then 1,000 tasks written by a process without the index,
  first with the earliest deadlines of all, then with deadlines behind the
  10,000: runner passes of room for 2,000 (the queue emptied between
  passes) until every one of them is published — the passes it took,
  against the README's bound (a ready task with r ready tasks ahead goes
  out within r / 1,000 + 1 claim rounds).
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import redis

from swh_like_scheduler.dispatch import tick
from swh_like_scheduler.domain.model import TaskStatus
from swh_like_scheduler.index import IndexedStore, RedisIndex, rebuild
from swh_like_scheduler.index.keeper import IndexKeeper
from swh_like_scheduler.store import SQLAlchemyStore

from ..common import (
    Context,
    bench_type,
    celery_app,
    fill_tasks,
    log,
    purge,
    ratio,
    raw,
    reset_tasks,
    scratch_store,
    unique_queue,
    utcnow,
)

SIZES = (10_000, 10_000_000)
QUICK_SIZES = (10_000, 100_000)
BATCH = 1000
CLAIMS = 8
DRAIN = 200_000
DISPATCH, QUICK_DISPATCH = 50_000, 20_000
PREFIX = "swh-bench-index"
#: seconds Redis is left alone after a large fill
SETTLE = 20.0


def _index(ctx: Context) -> RedisIndex:
    client = redis.Redis.from_url(ctx.redis)
    index = RedisIndex(client, prefix=PREFIX)
    _clear(index)
    return index


def _clear(index: RedisIndex) -> None:
    for key in index.client.scan_iter(match=f"{{{PREFIX}:*", count=1000):
        index.client.unlink(key)


def lua_vs_zpopmin(ctx: Context, index: RedisIndex) -> None:
    client = index.client
    rates: list[float] = []
    ceiling: list[float] = []
    for _ in range(ctx.repeat):
        _clear(index)
        keys = index.keys("drain")
        index.reset("drain", now=utcnow())
        pipe = client.pipeline(transaction=False)
        for n in range(DRAIN):
            pipe.zadd(keys.wait, {str(n): 1.0})
            pipe.hset(keys.meta, str(n), f"1 {n}.0")
            if n % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()
        # the first claim moves every entry to the ready set: the drain counts it
        begin, drained = time.perf_counter(), 0
        while batch := index.claim("drain", now=utcnow(), limit=BATCH, moves=DRAIN):
            drained += len(batch)
        rates.append(drained / (time.perf_counter() - begin))
        assert drained == DRAIN, drained
        plain = f"{{{PREFIX}:plain}}"
        for start in range(0, DRAIN, 10_000):
            client.zadd(plain, {str(n): float(n) for n in range(start, start + 10_000)})
        begin, drained = time.perf_counter(), 0
        while popped := client.zpopmin(plain, BATCH):
            drained += len(popped)
        ceiling.append(drained / (time.perf_counter() - begin))
        log(f"index: Lua claim {rates[-1]:,.0f} ids/s, ZPOPMIN {ceiling[-1]:,.0f} ids/s")
    ctx.measurement(
        "index",
        "lua_claim_ids_per_s",
        "ids/s",
        rates,
        ratios={"vs_zpopmin": ratio(statistics.median(rates), statistics.median(ceiling))},
        digits=0,
        batch=BATCH,
        entries=DRAIN,
    )
    ctx.measurement("index", "zpopmin_ids_per_s", "ids/s", ceiling, digits=0, batch=BATCH)


def lua_by_size(ctx: Context, index: RedisIndex, sizes: tuple[int, ...]) -> None:
    """Milliseconds of the claim script alone (1,000 ready of ``count``
    entries, the rest not yet ready), filled straight into Redis."""
    base: float | None = None
    for count in sizes:
        _clear(index)
        keys = index.keys("sized")
        index.reset("sized", now=utcnow())
        now = utcnow().timestamp()
        pipe = index.client.pipeline(transaction=False)
        for start in range(0, count, 10_000):
            members = range(start, min(count, start + 10_000))
            # BATCH * CLAIMS due, the others due within the next day
            pipe.zadd(
                keys.wait,
                {str(n): now - 60 if n < BATCH * CLAIMS else now + 1 + n % 86_400 for n in members},
            )
            pipe.hset(keys.meta, mapping={str(n): f"1 {now + n % 3600}" for n in members})
            pipe.execute()
        # let Redis finish growing its hash tables (incremental rehashing
        # costs every command meanwhile): a long-lived index has done so
        time.sleep(SETTLE)
        samples: list[float] = []
        for _ in range(ctx.repeat):
            for _ in range(CLAIMS):
                begin = time.perf_counter()
                ids = index.claim("sized", now=utcnow(), limit=BATCH)
                samples.append((time.perf_counter() - begin) * 1000)
                assert ids is not None and len(ids) == BATCH, ids
            # the same entries ready again for the next repetition
            stuck = index.stuck("sized", now=utcnow() + timedelta(hours=1), limit=BATCH * CLAIMS)
            pipe.zadd(keys.wait, {str(n): now - 60 for n in stuck})
            pipe.execute()
        median = statistics.median(samples)
        base = median if base is None else base
        log(f"index: Lua claim of {BATCH} among {count:,} entries: {median:.2f} ms")
        ctx.measurement(
            "index",
            "lua_claim_1000",
            "ms",
            samples,
            ratios={f"vs_{sizes[0]}": ratio(median, base)},
            digits=2,
            entries=count,
        )
    _clear(index)


@dataclass
class Claims:
    """What :func:`claims` measured with one table size."""

    #: ms of claims through the index / from the database, each of other tasks
    by_index: list[float] = field(default_factory=list)
    by_db: list[float] = field(default_factory=list)
    #: ms of claims through the index of the same 1,000 tasks again
    by_index_warm: list[float] = field(default_factory=list)
    #: WAL bytes written per claim through the index (cold, warm)
    wal: list[float] = field(default_factory=list)
    wal_warm: list[float] = field(default_factory=list)
    #: seconds to rebuild by one process, and by two at once
    rebuilt: float = 0.0
    rebuilt_by_two: float = 0.0
    per_entry: float = 0.0


def _wal(store: SQLAlchemyStore) -> int:
    return int(raw(store, "SELECT pg_current_wal_lsn() - '0/0'")[0][0])


def _join_rebuild(db_url: str, redis_url: str) -> int | None:
    """One process's share of a rebuild (run in a process of its own)."""
    store = SQLAlchemyStore.from_url(db_url)
    client = redis.Redis.from_url(redis_url, socket_timeout=60)
    try:
        return rebuild(RedisIndex(client, prefix=PREFIX), store, "bench", poll=0.01)
    finally:
        store.close()
        client.close()


def _rebuild_by_two(ctx: Context, store: SQLAlchemyStore, index: RedisIndex, count: int) -> float:
    _clear(index)
    url = store.engine.url.render_as_string(hide_password=False)
    begin = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        filed = pool.starmap(_join_rebuild, [(url, ctx.redis)] * 2)
    took = time.perf_counter() - begin
    assert filed == [count, count], filed
    return took


def claims(ctx: Context, index: RedisIndex, count: int) -> Claims:
    """Claims by the index and by the database, the rebuild's seconds and
    Redis's bytes per entry, with ``count`` tasks in the table."""
    found = Claims()
    with scratch_store(ctx.postgres, "swh_bench_index") as store:
        bench_type(store, unique_queue("index"), max_queue_length=None)
        now = utcnow()
        due = BATCH * CLAIMS
        fill_tasks(store, count, now=now, due=due, progress=count >= 1_000_000)
        _clear(index)
        memory = int(index.client.info("memory")["used_memory"])
        begin = time.perf_counter()
        filed = rebuild(index, store, "bench")
        found.rebuilt = time.perf_counter() - begin
        assert filed == count, filed
        found.per_entry = (int(index.client.info("memory")["used_memory"]) - memory) / count
        found.rebuilt_by_two = _rebuild_by_two(ctx, store, index, count)
        log(
            f"index: {count:,} tasks filed in {found.rebuilt:.1f}s by one process,"
            f" {found.rebuilt_by_two:.1f}s by two; {found.per_entry:.0f} bytes each"
        )
        if count >= 1_000_000:
            time.sleep(SETTLE)
        indexed = IndexedStore(store, index)
        at = now + timedelta(seconds=1)
        for attempt in range(ctx.repeat):
            taken: list[int] = []
            last: list[int] = []
            for _ in range(CLAIMS // 2):
                last = _index_claim(store, index, at, found.by_index, found.wal)
                assert len(last) == BATCH, len(last)
                taken.extend(last)
            # the same tasks again: their pages were just written
            for _ in range(CLAIMS // 2):
                _wait_again(store, index, last)
                again = _index_claim(store, index, at, found.by_index_warm, found.wal_warm)
                assert sorted(again) == sorted(last)
            for _ in range(CLAIMS // 2):
                begin = time.perf_counter()
                claimed = indexed.claim_ready_tasks("bench", now=at, limit=BATCH)
                found.by_db.append((time.perf_counter() - begin) * 1000)
                assert len(claimed) == BATCH, len(claimed)
                taken.extend(c.task_id for c in claimed)
            reset_tasks(store)
            # the reset bypassed the store: file the claimed tasks again
            tasks = store.get_tasks(taken)
            assert all(t.status is TaskStatus.WAITING for t in tasks)
            index.put("bench", tasks)
            log(
                f"index claim {count:,} #{attempt}: index "
                + ", ".join(f"{s:.1f}" for s in found.by_index[-CLAIMS // 2 :])
                + " ms (same tasks again: "
                + ", ".join(f"{s:.1f}" for s in found.by_index_warm[-CLAIMS // 2 :])
                + " ms); database "
                + ", ".join(f"{s:.1f}" for s in found.by_db[-CLAIMS // 2 :])
                + " ms"
            )
    return found


def _index_claim(
    store: SQLAlchemyStore, index: RedisIndex, at: datetime, ms: list[float], wal: list[float]
) -> list[int]:
    """One claim of ``BATCH`` through the index, timed (``ms``), with the
    WAL bytes it wrote (``wal``); the ids claimed."""
    before = _wal(store)
    begin = time.perf_counter()
    ids = index.claim("bench", now=at, limit=BATCH) or []
    claimed = store.claim_ready_tasks("bench", now=at, limit=BATCH, among=ids)
    index.remove("bench", [c.task_id for c in claimed])
    ms.append((time.perf_counter() - begin) * 1000)
    wal.append(_wal(store) - before)
    return [c.task_id for c in claimed]


def _wait_again(store: SQLAlchemyStore, index: RedisIndex, ids: list[int]) -> None:
    """Put claimed tasks back to waiting (no run) and file them again."""
    raw(store, "DELETE FROM task_run WHERE task_id = ANY(%s)", (ids,))
    raw(store, "UPDATE task SET status = 'waiting' WHERE id = ANY(%s)", (ids,))
    index.put("bench", store.get_tasks(ids))


def dispatch(ctx: Context, index: RedisIndex, count: int) -> None:
    app = celery_app(ctx.redis)
    seconds: dict[str, list[float]] = {"database": [], "index": []}
    with scratch_store(ctx.postgres, "swh_bench_index_dispatch") as store:
        queue = unique_queue("index-dispatch")
        bench_type(store, queue, max_queue_length=count)  # one pass takes them all
        now = utcnow()
        fill_tasks(store, count, now=now)
        indexed = IndexedStore(store, index)
        keeper = IndexKeeper(index, indexed, background=False)  # type: ignore[arg-type]
        try:
            for attempt in range(ctx.repeat):
                for way in ("database", "index"):
                    reset_tasks(store)
                    purge(app, queue, delete=False)
                    _clear(index)
                    if way == "index":
                        assert rebuild(index, store, "bench") == count
                    at = utcnow()
                    begin = time.perf_counter()
                    if way == "index":
                        report = tick(indexed, app, at, index=keeper)  # type: ignore[arg-type]
                    else:
                        report = tick(store, app, at)
                    seconds[way].append(time.perf_counter() - begin)
                    assert report.published == count, (way, report.published)
                    log(f"index dispatch {count:,} {way} #{attempt}: {seconds[way][-1]:.2f}s")
        finally:
            purge(app, queue)
    base = statistics.median(seconds["database"])
    for way, samples in seconds.items():
        ctx.measurement(
            "index",
            "dispatch",
            "s",
            samples,
            ratios={"vs_database": ratio(statistics.median(samples), base)},
            digits=2,
            tasks=count,
            way=way,
        )


DRIFT_READY, DRIFT_UNSEEN, DRIFT_ROOM = 10_000, 1_000, 2_000


def _unseen(store: SQLAlchemyStore, first: int, deadline: datetime, now: datetime) -> list[int]:
    """``DRIFT_UNSEEN`` ready tasks written straight to the database."""
    from swh_like_scheduler.domain.model import ScheduleKind, Task

    tasks = [
        Task(
            type="bench",
            args=(first + n,),
            schedule_kind=ScheduleKind.ADAPTIVE,
            current_interval=timedelta(days=1),
            next_run=now - timedelta(minutes=5),
            deadline=deadline,
        )
        for n in range(DRIFT_UNSEEN)
    ]
    return [t.id or 0 for t in store.create_tasks(tasks, now=now)]


def drift(ctx: Context, index: RedisIndex, count: int) -> None:
    app = celery_app(ctx.redis)
    with scratch_store(ctx.postgres, "swh_bench_index_drift") as store:
        queue = unique_queue("index-drift")
        bench_type(store, queue, max_queue_length=DRIFT_ROOM)
        now = utcnow()
        log(f"index drift: filling {count:,} waiting tasks, {DRIFT_READY:,} ready")
        fill_tasks(store, count, now=now, due=DRIFT_READY)
        raw(store, "ANALYZE task")
        indexed = IndexedStore(store, index)
        keeper = IndexKeeper(index, indexed, background=False)  # type: ignore[arg-type]
        try:
            for name, deadline in (
                ("earliest", now - timedelta(days=2)),
                ("behind_backlog", now + timedelta(days=2)),
            ):
                reset_tasks(store)
                purge(app, queue, delete=False)
                _clear(index)
                begin = time.perf_counter()
                rebuild(index, store, "bench")
                rebuilt = time.perf_counter() - begin
                ids = _unseen(store, 10_000_000 + len(name), deadline, now)
                passes, began = 0, time.perf_counter()
                while passes < 100:
                    passes += 1
                    at = utcnow()
                    tick(indexed, app, at, index=keeper)  # type: ignore[arg-type]
                    purge(app, queue, delete=False)  # room again for the next pass
                    left = [t for t in store.get_tasks(ids) if t.status is TaskStatus.WAITING]
                    if not left:
                        break
                ctx.emit(
                    {
                        "scenario": "index",
                        "measurement": f"drift_{name}",
                        "tasks": count,
                        "ready_ahead": 0 if name == "earliest" else DRIFT_READY,
                        "unseen": DRIFT_UNSEEN,
                        "room_per_pass": DRIFT_ROOM,
                        "unit": "passes",
                        "passes": passes,
                        "seconds": round(time.perf_counter() - began, 2),
                        "rebuild_s": round(rebuilt, 1),
                        "left": len(left),
                        "ratios": {},
                    }
                )
        finally:
            purge(app, queue)


def run(ctx: Context) -> None:
    index = _index(ctx)
    try:
        lua_vs_zpopmin(ctx, index)
        sizes = QUICK_SIZES if ctx.quick else SIZES
        lua_by_size(ctx, index, sizes)
        base: dict[str, float] = {}
        for count in sizes:
            found = claims(ctx, index, count)
            ctx.measurement("index", "rebuild", "s", [found.rebuilt], digits=1, tasks=count)
            ctx.measurement(
                "index",
                "rebuild_by_two",
                "s",
                [found.rebuilt_by_two],
                ratios={"vs_one": ratio(found.rebuilt_by_two, found.rebuilt)},
                digits=1,
                tasks=count,
            )
            if count >= 100_000:  # (below, other keys freed meanwhile blur it)
                ctx.measurement(
                    "index", "bytes_per_entry", "B", [found.per_entry], digits=0, tasks=count
                )
            for way, samples in (
                ("index", found.by_index),
                ("index_same_tasks", found.by_index_warm),
                ("database", found.by_db),
            ):
                median = statistics.median(samples)
                base.setdefault(way, median)
                ctx.measurement(
                    "index",
                    "claim_1000",
                    "ms",
                    samples,
                    ratios={f"vs_{sizes[0]}": ratio(median, base[way])},
                    digits=1,
                    tasks=count,
                    way=way,
                )
            for way, samples in (("index", found.wal), ("index_same_tasks", found.wal_warm)):
                ctx.measurement(
                    "index", "wal_per_claim", "B", samples, digits=0, tasks=count, way=way
                )
        dispatch(ctx, index, QUICK_DISPATCH if ctx.quick else DISPATCH)
        drift(ctx, index, 100_000 if ctx.quick else 1_000_000)
    finally:
        _clear(index)
        index.client.close()
