"""index: the Redis index of waiting tasks against the database claim.

* ``lua_vs_zpopmin``: task ids per second of the index's claim script,
  1,000 at a time until 200,000 ready entries are drained, against the
  ceiling of Redis itself on this machine: ``ZPOPMIN`` of 1,000 from a
  plain sorted set of as many members.
* ``lua_claim_1000``: the claim script alone taking 1,000 ready entries
  among 10k and 10M (quick: 100k) filed straight into Redis.
* ``claim_1000``: one claim of 1,000 ready tasks with 10k and 10M tasks in
  the table (quick: 10k and 100k), by the index (the script, the database
  claim of those ids, the entries settled) and by the database alone, each
  as a ratio to its own cost at the smallest size.
* ``rebuild``: seconds to fill the index of every table size from the
  database (the resync after Redis lost everything).
* ``dispatch``: one runner pass publishing 50,000 ready tasks to Redis
  (quick: 20,000), with the index and without.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

import redis

from swh_like_scheduler.index import IndexedStore, RedisIndex, rebuild
from swh_like_scheduler.index.keeper import IndexKeeper
from swh_like_scheduler.model import TaskStatus
from swh_like_scheduler.runner import tick

from .common import (
    Context,
    bench_type,
    celery_app,
    fill_tasks,
    log,
    purge,
    ratio,
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
        token = index.begin_rebuild("drain")
        assert token is not None and index.finish_rebuild("drain", token)
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
        token = index.begin_rebuild("sized")
        assert token is not None and index.finish_rebuild("sized", token)
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


def claims(
    ctx: Context, index: RedisIndex, count: int
) -> tuple[list[float], list[float], float, float]:
    """Milliseconds of claims by the index and by the database, the
    rebuild's seconds and Redis's bytes per entry, with ``count`` tasks in
    the table."""
    by_index: list[float] = []
    by_db: list[float] = []
    with scratch_store(ctx.postgres, "swh_bench_index") as store:
        bench_type(store, unique_queue("index"), max_queue_length=None)
        now = utcnow()
        due = BATCH * CLAIMS
        fill_tasks(store, count, now=now, due=due, progress=count >= 1_000_000)
        _clear(index)
        memory = int(index.client.info("memory")["used_memory"])
        begin = time.perf_counter()
        filed = rebuild(index, store, "bench")
        rebuilt = time.perf_counter() - begin
        assert filed == count, filed
        per_entry = (int(index.client.info("memory")["used_memory"]) - memory) / count
        log(f"index: {count:,} tasks filed in {rebuilt:.1f}s, {per_entry:.0f} bytes each")
        indexed = IndexedStore(store, index)
        at = now + timedelta(seconds=1)
        for attempt in range(ctx.repeat):
            taken: list[int] = []
            for _ in range(CLAIMS // 2):
                begin = time.perf_counter()
                ids = index.claim("bench", now=at, limit=BATCH) or []
                claimed = store.claim_ready_tasks("bench", now=at, limit=BATCH, among=ids)
                index.remove("bench", [c.task_id for c in claimed])
                by_index.append((time.perf_counter() - begin) * 1000)
                assert len(claimed) == BATCH, len(claimed)
                taken.extend(c.task_id for c in claimed)
            for _ in range(CLAIMS // 2):
                begin = time.perf_counter()
                claimed = indexed.claim_ready_tasks("bench", now=at, limit=BATCH)
                by_db.append((time.perf_counter() - begin) * 1000)
                assert len(claimed) == BATCH, len(claimed)
                taken.extend(c.task_id for c in claimed)
            reset_tasks(store)
            # the reset bypassed the store: file the claimed tasks again
            tasks = store.get_tasks(taken)
            assert all(t.status is TaskStatus.WAITING for t in tasks)
            index.put("bench", tasks)
            log(
                f"index claim {count:,} #{attempt}: index "
                + ", ".join(f"{s:.1f}" for s in by_index[-CLAIMS // 2 :])
                + " ms; database "
                + ", ".join(f"{s:.1f}" for s in by_db[-CLAIMS // 2 :])
                + " ms"
            )
    return by_index, by_db, rebuilt, per_entry


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


def run(ctx: Context) -> None:
    index = _index(ctx)
    try:
        lua_vs_zpopmin(ctx, index)
        sizes = QUICK_SIZES if ctx.quick else SIZES
        lua_by_size(ctx, index, sizes)
        base: dict[str, float] = {}
        for count in sizes:
            by_index, by_db, rebuilt, per_entry = claims(ctx, index, count)
            ctx.measurement("index", "rebuild", "s", [rebuilt], digits=1, tasks=count)
            ctx.measurement("index", "bytes_per_entry", "B", [per_entry], digits=0, tasks=count)
            for way, samples in (("index", by_index), ("database", by_db)):
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
        dispatch(ctx, index, QUICK_DISPATCH if ctx.quick else DISPATCH)
    finally:
        _clear(index)
        index.client.close()
