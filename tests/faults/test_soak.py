"""A randomized fault soak: a mixed workload under a seeded schedule of
faults, then a history checker (:mod:`soakcheck`).

The workload (:mod:`soakplan`): adaptive, periodic and cron (Europe/Paris)
probe tasks, some failing, some slow; one-shots at random instants; jobs by
key with ``rabbitmq`` and ``http`` callbacks, some replaced mid-run. The
platform (:mod:`soakrun`): private PostgreSQL and broker, two runners, a
separate monitor, two listeners, workers per type, and a second, small
installation on another database sharing the broker (:mod:`soakother`).
The faults (:mod:`soakfaults`): SIGKILL and SIGTERM of any process,
restarts of PostgreSQL and of the broker, FLUSHALL (Redis), a listener
stopped for a while, a worker paused (SIGSTOP/SIGCONT), a worker's main
process alone or its whole group stopped longer than the monitor's bounds
(with a body under way that has a while to go, or when every body on it has
little left: the stale copies reach their side effect right after they
resume), a probe worker cut off from PostgreSQL alone (its connections'
proxy frozen, its broker reachable) longer than the monitor's bounds, a
runner restarted under libfaketime (its clock ahead or behind) for a while,
a runner stopped longer than a claim may be held, a second worker process
under a live worker's name, bursts of instants due at once. Without
``faketime`` the skewed runner is left out of the plan (said), and under CI
the soak fails instead.

Brokers: Redis as broker **and** result backend (one server, the common
setup) in the quick cut and the full run; RabbitMQ (no result backend) in
the full run. ``SWH_SOAK_SEED`` replays a seed (each run prints its seed
and fault schedule; the quick cut replays seed 4647 unless told otherwise,
``random`` draws one); ``SWH_FAULTS=full`` runs the full scale (30 minutes
of faults each, ``SWH_SOAK_MINUTES`` to change it); ``SWH_SOAK_TABLE=FILE``
appends each run's figures as a JSON line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import services
import soakother
import sqlalchemy as sa
from conftest import FULL, TABLE
from private import PrivatePostgres, PrivateRabbitMQ, PrivateRedis, PrivateServer
from soakcheck import Checker, Verdict, read_records
from soakplan import FULL as FULL_SCALE
from soakplan import QUICK, TIMEOUTS, Scale, make_plan
from soakrun import DAEMONS, LISTENERS, PROCESSES, RUNNERS, WORK_TYPE, WORKERS, Soak, faketime

pytestmark = [pytest.mark.faults, pytest.mark.postgresql, pytest.mark.redis]

#: seconds the platform has, after the last fault and the last instant, to
#: deliver every due instant
SETTLE_BOUND = 300.0


def scale() -> Scale:
    if not FULL:
        return QUICK
    minutes = float(os.environ.get("SWH_SOAK_MINUTES") or FULL_SCALE.seconds / 60)
    return shortened(FULL_SCALE, minutes * 60)


def shortened(full: Scale, seconds: float) -> Scale:
    """``full`` over ``seconds``: one-shots (long ones too) and jobs at the
    same rate (no fewer than the quick cut's: the workers are not to be
    saturated), and faults no sparser than a dozen."""
    if seconds >= full.seconds:
        return dataclasses.replace(full, seconds=seconds)
    share = seconds / full.seconds
    return dataclasses.replace(
        full,
        seconds=seconds,
        mean_gap=min(full.mean_gap, seconds / 12),
        oneshots=max(QUICK.oneshots, round(full.oneshots * share)),
        jobs=max(QUICK.jobs, round(full.jobs * share)),
        other_oneshots=max(QUICK.other_oneshots, round(full.other_oneshots * share)),
        long_oneshots=max(QUICK.long_oneshots, round(full.long_oneshots * share)),
    )


#: the quick cut's seed: the suite replays one known schedule (every
#: full run draws a new one); SWH_SOAK_SEED=N replays N, =random draws one.
#: Over the quick cut's 40 s it holds the kinds seed 5 held over 60 s (kill9,
#: term, flushall, each stall, twin, db_partition, skewed_runner), its
#: stall_resume alone on its worker
QUICK_SEED = 4647


def soak_seed() -> int:
    given = os.environ.get("SWH_SOAK_SEED", "")
    if given.isdigit():
        return int(given)
    if given == "random" or FULL:
        return random.SystemRandom().randrange(2**31)
    return QUICK_SEED


def count(soak: Soak, query: str) -> int:
    """``query``'s count, summed over both installations."""
    stores = [soak.store] + ([soak.other.store] if soak.other else [])
    total = 0
    for store in stores:
        with store.engine.connect() as conn:
            total += int(conn.scalar(sa.text(query)) or 0)
    return total


def live_oneshots(soak: Soak) -> int:
    """One-shot tasks not final yet (waiting, or dispatched)."""
    return count(
        soak,
        "SELECT count(*) FROM task WHERE schedule_kind = 'oneshot' "
        "AND status IN ('waiting', 'scheduled')",
    )


SCALE = scale()


def open_runs(soak: Soak) -> int:
    return count(soak, "SELECT count(*) FROM task_run WHERE status IN ('scheduled', 'started')")


@pytest.mark.timeout(int(SCALE.seconds + SETTLE_BOUND + 900))
@pytest.mark.parametrize(
    "broker",
    [
        "redis",
        pytest.param(
            "rabbitmq",
            marks=[
                pytest.mark.rabbitmq,
                pytest.mark.skipif(not FULL, reason="full fault suite only (SWH_FAULTS=full)"),
            ],
        ),
    ],
)
def test_soak(broker: str, private_postgres: PrivatePostgres, counter_url: str, logs: Path) -> None:
    seed = soak_seed()
    server: PrivateServer = PrivateRedis() if broker == "redis" else PrivateRabbitMQ()
    server.start()
    try:
        run(seed, broker, server, private_postgres, counter_url, logs)
    finally:
        server.close()


def run(
    seed: int,
    broker: str,
    server: PrivateServer,
    postgres: PrivatePostgres,
    counter_url: str,
    logs: Path,
) -> None:
    url = server.url  # type: ignore[attr-defined]
    skewable = faketime() is not None
    if not skewable:
        if services.in_ci():
            pytest.fail("no faketime on this machine (apt install faketime; .ci/run does)")
        print("\nno faketime on this machine: no skewed runner in this soak", flush=True)
    plan = make_plan(
        seed,
        SCALE,
        processes=PROCESSES,
        workers=list(WORKERS),
        listeners=LISTENERS,
        runners=RUNNERS,
        flushable=broker == "redis",
        skewable=skewable,
    )
    print(f"\n{plan.describe()}\n(replay: SWH_SOAK_SEED={seed})", flush=True)
    soak = Soak(
        plan,
        {"postgres": postgres, "broker": server},
        db_url=postgres.url,
        broker_url=url,
        result_backend=url if broker == "redis" else None,
        counter_url=counter_url,
        logs=logs,
        other_db_url=soakother.database_url(postgres.url),
    )
    try:
        soak.run(lambda line: print(line, flush=True))
        last_fault = max((end for _, _, end in soak.fault_log), default=soak.start)
        latest_instant = soak.start + max(
            [o.at for o in (*plan.oneshots, *plan.other_oneshots)]
            + [float(t) for j in plan.jobs for t in (*j.instants, *j.replaced_by)]
        )
        settled_from = max(last_fault, time.time())
        deadline = settled_from + SETTLE_BOUND
        while time.time() < deadline:
            if time.time() > latest_instant + 2 and live_oneshots(soak) == 0:
                break
            time.sleep(1.0)  # the platform's own pace: one-shots end in seconds
        recovery = time.time() - settled_from
        # quiesce: no new dispatch; what is under way ends and is recorded
        stopped_at = datetime.now(UTC)
        for name in (*RUNNERS, soakother.RUNNER):
            soak.stop_process(name, signal.SIGTERM)
        soak.held_down.update({*RUNNERS, soakother.RUNNER})
        quiet_by = time.time() + 120
        while open_runs(soak) and time.time() < quiet_by:
            time.sleep(1.0)
        time.sleep(3)  # the notify consumer drains the last messages
        verdicts = check(soak, plan, broker, stopped_at)
        kinds: dict[str, int] = {}
        for fault, _, _ in soak.fault_log:
            kinds[fault.kind] = kinds.get(fault.kind, 0) + 1
        first, other = verdicts
        row = {
            "scenario": f"soak on {broker}",
            "seed": seed,
            "minutes of faults": round(plan.scale.seconds / 60, 1),
            "faults": len(soak.fault_log),
            "fault kinds": kinds,
            **first.table(),
            "second installation": other.table(),
            "recovery_seconds": round(recovery, 1),
            "daemons": DAEMONS,
        }
        TABLE.append(row)
        target = os.environ.get("SWH_SOAK_TABLE")
        if target:
            explained = {k: v for verdict in verdicts for k, v in verdict.explained.items()}
            with Path(target).open("a") as out:
                out.write(json.dumps({**row, "explained": explained}) + "\n")
        failures = [f for verdict in verdicts for f in verdict.failures]
        assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:50])
        assert recovery < SETTLE_BOUND, f"not settled {SETTLE_BOUND} s after the faults"
        for verdict in verdicts:
            # a notification the broker lost after its run published it is
            # the fault's doing, proven by the checker (broker_lost)
            assert verdict.delivered + verdict.output_lost == verdict.due, verdict.table()
    finally:
        soak.close()
        soak.forget()


def check(soak: Soak, plan: Any, broker: str, stopped_at: datetime) -> tuple[Verdict, Verdict]:
    """Both installations' verdicts; what happened written to the logs."""
    life = soak.life()
    records = read_records(soak.store, [j.key for j in plan.jobs])
    history = soak.dump([vars(r) for r in records.runs])
    life.dump(soak.logs / "journal.jsonl")
    print(f"history: {history}")
    first = Checker(
        records, life, TIMEOUTS, work_type=WORK_TYPE, wipes_lose_messages=broker == "redis"
    ).check(soak.notes(), soak.tids, stopped_at, soak.receivers.deliveries())
    assert soak.other is not None
    other = Checker(
        read_records(soak.other.store), life, TIMEOUTS, work_type=soakother.WORK_TYPE, name="other"
    ).check(soak.notes(soak.other.prefix), soak.other.tids, stopped_at)
    for name, verdict in (("", first), ("second installation: ", other)):
        for kind, lines in verdict.explained.items():
            for line in lines:
                print(f"{name}explained ({kind}): {line}")
        for line in verdict.stale:
            print(f"{name}stale copy: {line}")
    return first, other
