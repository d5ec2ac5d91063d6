"""bulk: disable every task of a type (N tasks, PostgreSQL) while another
connection keeps writing single tasks (as the listener records outcomes)
and reading them. ``batched`` is the product's way
(``store.apply_bulk``: windows of 20,000 ids, 1,000 per transaction, the
filter checked again on each batch); the baseline is one
``UPDATE … WHERE type = 'bench'`` in one transaction. A single-task write
that meets a row the bulk action holds waits for that transaction: one
batch, or the whole update."""

from __future__ import annotations

import random
import statistics
import threading
import time

import psycopg

from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.store.values import BulkAction, BulkFilter

from ..common import Context, bench_type, fill_tasks, log, ratio, raw, scratch_store, unique_queue
from ..common import utcnow as now

SIZES = (100_000, 1_000_000)
QUICK_SIZES = (100_000,)
WINDOW = 20_000


class Traffic:
    """Another connection: one task written, then one read, by random id,
    each timed, until stopped."""

    def __init__(self, url: str, count: int) -> None:
        self.url, self.count = url, count
        self.writes: list[float] = []
        self.reads: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                task_id = rng.randint(1, self.count)
                begin = time.perf_counter()
                conn.execute("UPDATE task SET updated_at = now() WHERE id = %s", (task_id,))
                middle = time.perf_counter()
                conn.execute("SELECT status FROM task WHERE id = %s", (task_id,)).fetchall()
                self.writes.append(middle - begin)
                self.reads.append(time.perf_counter() - middle)

    def __enter__(self) -> Traffic:
        self._thread.start()
        while len(self.writes) < 20:  # under way before the bulk action starts
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def batched(store: SQLAlchemyStore) -> int:
    changed, after = 0, 0
    criteria = BulkFilter(type="bench")
    while True:
        report = store.apply_bulk(
            BulkAction.DISABLE, criteria, now=now(), after_id=after, scan=WINDOW
        )
        changed += report.changed
        if report.next_after_id is None:
            return changed
        after = report.next_after_id


def single_transaction(url: str) -> int:
    with psycopg.connect(url) as conn:
        cursor = conn.execute(
            "UPDATE task SET status = 'disabled', updated_at = now()"
            " WHERE type = 'bench' AND status IN ('waiting', 'scheduled')"
        )
        conn.commit()
        return cursor.rowcount


def run(ctx: Context) -> None:
    for count in QUICK_SIZES if ctx.quick else SIZES:
        seconds: dict[str, list[float]] = {"batched": [], "single_transaction": []}
        write_max: dict[str, list[float]] = {"batched": [], "single_transaction": []}
        write_p99: dict[str, list[float]] = {"batched": [], "single_transaction": []}
        read_max: dict[str, list[float]] = {"batched": [], "single_transaction": []}
        with scratch_store(ctx.postgres, "swh_bench_bulk") as store:
            bench_type(store, unique_queue("bulk"), max_queue_length=None)
            fill_tasks(store, count, now=now(), progress=count > 100_000)
            url = store.engine.url.set(drivername="postgresql").render_as_string(
                hide_password=False
            )
            for attempt in range(ctx.repeat):
                for name in ("batched", "single_transaction"):
                    raw(store, "UPDATE task SET status = 'waiting'")
                    raw(store, "VACUUM ANALYZE task")
                    with Traffic(url, count) as traffic:
                        begin = time.perf_counter()
                        changed = batched(store) if name == "batched" else single_transaction(url)
                        took = time.perf_counter() - begin
                    assert changed == count, f"{name} changed {changed} of {count}"
                    seconds[name].append(took)
                    write_max[name].append(max(traffic.writes) * 1000)
                    write_p99[name].append(statistics.quantiles(traffic.writes, n=100)[98] * 1000)
                    read_max[name].append(max(traffic.reads) * 1000)
                    log(
                        f"bulk {count:,} {name} #{attempt}: {took:.2f}s, other writes: "
                        f"{len(traffic.writes)}, longest {write_max[name][-1]:.1f} ms"
                    )
        base = statistics.median(write_max["single_transaction"])
        base_s = statistics.median(seconds["single_transaction"])
        for name in seconds:
            ctx.measurement(
                "bulk",
                f"{name}_longest_other_write",
                "ms",
                write_max[name],
                ratios={"vs_single_transaction": ratio(statistics.median(write_max[name]), base)},
                digits=1,
                tasks=count,
                other_write_p99_ms=round(statistics.median(write_p99[name]), 1),
                other_read_max_ms=round(statistics.median(read_max[name]), 1),
            )
            ctx.measurement(
                "bulk",
                f"{name}_duration",
                "s",
                seconds[name],
                ratios={"vs_single_transaction": ratio(statistics.median(seconds[name]), base_s)},
                digits=2,
                tasks=count,
            )
