"""Worlds at the edges of the slot rule, each worked out by hand before it
ran: a wave of runs just under the old 30-minute threshold, one sparse
short task beside a long wave, and the first world split over two types
that share one queue (issue 61). The worlds are the benchmark's
(``benchmarks/simulator/reserve_cost.py``, which measures what the rule
costs in them and in the shipped worlds).

The rule, as reasoned with here: each runner pass, per queue, T is the
time to the earliest deadline (should_start_by) of a waiting task whose
expected run is shorter than that time (at least 1 minute); a run is long
when its expected run is T or more. While the queue has such a shorter task
and more than one slot, ``reserved = max(1, ceil(slots / 4))`` slots are
kept: long runs dispatched or running never exceed ``slots - reserved``.

What every world shares: 4 worker slots (one kept: ``ceil(4 / 4)``, so 3
for long runs), a pass at most every 60 s (at least 30 s apart), the
listener 10 s behind the workers, a condition sample every 10 minutes from
01:00, each standing for the 10 minutes after it (an ERROR-hour is six
samples of one task in ERROR). A periodic ping (period 1 h, cooldown
45 min, 0.1 s) may start 45 minutes after its last run ended, should start
an hour after its last start and is in ERROR (stale) once that hour has
passed; a cron task is in ERROR from its firing plus ``cron_max_duration``
until its run ends. Runs last exactly their median (sigma 0) and never fail.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from swh_like_scheduler.domain.model import DispatchOrder
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.workload import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.simulator.reserve_cost import CLIFF, SHARED_CLIFF, SPARSE_PING


def _run(world: dict[str, Any], keep_slots: bool = True) -> dict[str, Any]:
    return Simulation(parse_workload(world), DispatchOrder.DEADLINE, keep_slots=keep_slots).run()


def _hours(result: dict[str, Any], group: str) -> float:
    return float(result["groups"][group]["error_hours"])


def test_a_wave_just_under_thirty_minutes_leaves_the_pings_a_slot() -> None:
    """:data:`CLIFF`: twelve 27-minute jobs at 02:00 (cron, 2 h to finish:
    in ERROR after 04:00; their expected duration says 27 min) and sixty
    pings, first runs spread over 01:00-01:45, on 4 slots.

    By hand, with the rule: the pings run every 45 minutes or so, each as
    soon as it may, so at any pass the waiting pings' deadlines lie 15 to
    60 minutes ahead, sixty of them over a 45-minute cycle (about one every
    45 s): the earliest is under 20 minutes away, T < 27 min and the jobs
    are long at every pass from 02:00 on. (At the 02:00 pass a ping may be
    a few seconds from its deadline: T is then the 5-minute floor.) So at
    most 3 jobs are in flight: four waves of 3, 02:00-02:27, 02:27-02:54,
    02:54-03:21, 03:21-03:48, each starting a few tens of seconds late (the
    listener's 10 s and the next pass), all ended by about 03:52, before
    their 04:00: 0 ERROR-hours for the jobs. The fourth slot is never a
    job's: every ping finds it free and runs within a pass of falling due,
    long before its hour is up: 0 ERROR-hours for the pings. Each job runs
    once: 12 dispatches, 12 outcomes, nothing queued at the end.

    Without the rule (and with the 30-minute rule before it: 27 minutes was
    short), the 02:00 pass and the next fill the 4 slots and the broker
    queue (8) with the 12 jobs, three waves of 4 (02:00-03:21); a ping
    falling due behind them finds the queue full or waits behind the jobs,
    and no ping runs before 03:21. Each ping's last start before that lies
    in 01:15-02:00, so it is stale from 02:15-03:00 to about 03:22: about
    44 minutes each on average, about 44 ERROR-hours for the sixty (more
    than 30 asserted), and the jobs end by 03:21 (0 ERROR-hours)."""
    kept = _run(CLIFF)
    assert _hours(kept, "hourly pings") == 0
    assert _hours(kept, "nightly jobs") == 0
    assert kept["types"]["fetch"]["queued_at_end"] == 0
    starved = _run(CLIFF, keep_slots=False)
    assert _hours(starved, "hourly pings") > 30
    assert _hours(starved, "nightly jobs") == 0


def test_one_sparse_ping_keeps_its_slot_for_the_whole_wave() -> None:
    """:data:`SPARSE_PING`: twelve dumps of exactly 2 h 5 min at 02:00 (cron,
    7 h to finish: in ERROR after 09:00) and ONE ping whose first run is at
    01:30, on 4 slots.

    By hand, with the rule: the ping runs at 01:30; from then on it waits
    with its deadline at most an hour ahead (30 minutes at 02:00), so T is
    an hour at most and the dumps are long at every pass (a pass never finds
    the ping in flight: it runs 0.1 s on the free slot and the listener
    records it 10 s later, before the next pass, at least 30 s away). At
    most 3 dumps in flight: four waves of 3, 02:00-04:05, 04:05-06:10,
    06:10-08:15, 08:15-10:20, each transition a few tens of seconds late
    (so the last wave ends between 10:20 and 10:30). The ping runs every 45
    minutes on the fourth slot, never stale: 0 ERROR-hours. The last wave
    is past its 09:00 at the samples 09:10 to 10:20 (eight): 3 dumps x 8 /
    6 = 4 ERROR-hours, the price of draining on 3 slots; the others end in
    time. Every dump runs once.

    Without the rule: the 02:00 pass sends 8 dumps (the queue's limit), 4
    start, the next pass queues the last 4 behind; three waves of 4 start
    as the slots free, exactly at 02:00, 04:05 and 06:10, and the last ends
    at 08:15, in time (0 ERROR-hours). The ping falls due at 02:15 with the
    queue full; at 04:05 there is room and it is queued behind the third
    wave, which the slots take at 06:10; it runs at 08:15. Stale from 02:30
    (its hour since 01:30) to 08:15: the samples 02:40 to 08:10, 34 of them:
    34 / 6 = 5.667 ERROR-hours."""
    kept = _run(SPARSE_PING)
    assert _hours(kept, "hourly ping") == 0
    assert _hours(kept, "nightly dumps") == 4.0
    assert kept["types"]["fetch"]["queued_at_end"] == 0
    starved = _run(SPARSE_PING, keep_slots=False)
    assert _hours(starved, "hourly ping") == 5.667
    assert _hours(starved, "nightly dumps") == 0


def test_the_threshold_is_the_queues_when_the_pings_are_another_type() -> None:
    """:data:`SHARED_CLIFF`: the cliff world on one queue of two types, the
    jobs' (3 slots; no expected duration, its type's
    ``max_expected_duration`` is 28 min) and the pings' (1 slot).

    By hand: the jobs' own type has no shorter task waiting (its only
    waiting tasks are jobs, due by 04:00, two hours of slack for 28
    minutes), so counted per type T would be 2 h and nothing kept. Counted
    per queue, the pings' deadlines make T under 20 minutes, as in
    :data:`CLIFF`; a job is long from its type's maximum expected duration
    (28 min) before its first good run: 3 jobs in flight at most on the 4
    slots of the queue, four waves, all ended by about 03:52: 0 ERROR-hours
    for jobs and pings. Each message runs by its own type (the pings' 5
    minutes do not kill a job on the ping slot, which never takes one
    anyway). Without the rule the pings starve as in :data:`CLIFF` (more
    than 30 ERROR-hours)."""
    kept = _run(SHARED_CLIFF)
    assert _hours(kept, "hourly pings") == 0
    assert _hours(kept, "nightly jobs") == 0
    assert kept["types"]["job"]["outcomes"] == {"eventful": 12}
    assert kept["types"]["job"]["queued_at_end"] == 0
    starved = _run(SHARED_CLIFF, keep_slots=False)
    assert _hours(starved, "hourly pings") > 30
