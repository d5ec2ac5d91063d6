"""Two task types on one Celery queue: a simulated worker runs each message
as a real one does, by the message's own type (issue 61, part 4).

A real runner puts each type's time limits in the message it sends
(:func:`~swh_like_scheduler.broker.message.time_limits`), and the listener
applies the retries of the task's own type; a worker that takes a message
of another type from a shared queue does not impose its own limit on it."""

from __future__ import annotations

from swh_like_scheduler.domain.model import DispatchOrder
from swh_like_scheduler.simulator.engine import Simulation
from swh_like_scheduler.simulator.workload import parse_workload

#: Worked by hand. Two types on the queue ``shared``: ``dump`` (1 worker
#: slot, runs allowed 3 h) and ``ping`` (2 slots, runs allowed 5 min). Two
#: one-shot dumps due at the start, each run exactly 2 h; twenty one-shot
#: pings spread over the first 2 h, each run 0.1 s. The three slots take
#: from the one queue in the order they asked, whatever their type: at the
#: start the runner sends both dumps, the dump slot (started first) takes
#: one and a ping slot the other. Each dump runs its 2 h within its own 3 h
#: limit and ends eventful at 2 h (with the ping type's 5 min limit, the
#: dump on a ping slot would end timed_out at 5 min and be retried, and its
#: outcome would be counted as a ping's). The other ping slot is free: each
#: ping runs once, 0.1 s, as it falls due, and none is late. So each type
#: has as many outcomes as dispatches (2 and 20), all eventful, no retry,
#: nothing queued at the end (6 h), no ERROR.
SHARED = {
    "start": "2026-03-02T00:00:00Z",
    "days": 0.25,
    "seed": 7,
    "runner": {"min_sleep": "5 s", "listener_delay": "1 s", "sample_every": "30 min"},
    "types": {
        "dump": {
            "workers": 1,
            "queue": "shared",
            "max_queue_length": 30,
            "max_allowed_duration": "3 h",
            "num_retries": 2,
            "retry_delay": "1 min",
        },
        "ping": {
            "workers": 2,
            "queue": "shared",
            "max_queue_length": 30,
            "max_allowed_duration": "5 min",
            "num_retries": 2,
            "retry_delay": "1 min",
        },
    },
    "tasks": [
        {
            "name": "dumps",
            "type": "dump",
            "count": 2,
            "kind": "oneshot",
            "max_delay": "6 h",
            "duration": {"median": "2 h", "sigma": 0},
        },
        {
            "name": "pings",
            "type": "ping",
            "count": 20,
            "kind": "oneshot",
            "max_delay": "10 min",
            "spread": ["0 s", "2 h"],
            "duration": {"median": "0.1 s", "sigma": 0},
        },
    ],
}


def test_each_message_runs_by_its_own_type_on_a_shared_queue() -> None:
    result = Simulation(parse_workload(SHARED), DispatchOrder.DEADLINE).run()
    types = result["types"]
    # nothing that ran within its own type's limit was killed
    assert types["dump"]["outcomes"] == {"eventful": 2}
    assert types["ping"]["outcomes"] == {"eventful": 20}
    assert result["retries"] == 0
    # each type's dispatches are its own outcomes, charged to it
    for name in ("dump", "ping"):
        assert types[name]["dispatches"] == sum(types[name]["outcomes"].values())
        assert types[name]["queued_at_end"] == 0
    assert result["error_hours"] == 0


#: Issue 61: two-hour dumps and pings of a tenth of a second on one queue of
#: 8 slots (4 workers of each type), from 01:00 to 04:00. Worked by hand:
#: at 02:00 the 30 dumps fall due; the pings' type has no long task, the
#: dumps' type no short one. Counted per type, nothing was kept: 8 dumps
#: took the 8 slots at 02:00 and held them past 04:00, so no ping ran after
#: 02:00 and every one went stale (384 ERROR-hours here). Counted per queue,
#: 2 of the 8 slots (ceil(8 x 0.25)) are kept while pings are due: 6 dumps
#: run, and the 300 pings an hour (30 s of work an hour) never wait for a
#: slot: 0 ERROR-hours.
WAVE = {
    "start": "2026-03-02T01:00:00Z",
    "days": 0.125,
    "seed": 3,
    "runner": {
        "period": "60 s",
        "min_sleep": "30 s",
        "listener_delay": "10 s",
        "sample_every": "10 min",
    },
    "types": {
        name: {
            "workers": 4,
            "queue": "shared",
            "max_queue_length": 8,
            "max_allowed_duration": limit,
            "num_retries": 0,
            "retry_delay": "2 min",
        }
        for name, limit in (("dump", "4 h"), ("ping", "5 min"))
    },
    "tasks": [
        {
            "name": "nightly dumps",
            "type": "dump",
            "count": 30,
            "kind": "cron",
            "cron": "0 2 * * *",
            "cron_max_duration": "6 h",
            "expected_duration": "2 h",
            "duration": {"median": "2 h", "sigma": 0},
        },
        {
            "name": "hourly pings",
            "type": "ping",
            "count": 300,
            "kind": "periodic",
            "period": "1 h",
            "cooldown": "45 min",
            "spread": ["0 s", "1 h"],
            "duration": {"median": "0.1 s", "sigma": 0},
        },
    ],
}


def test_slots_are_kept_for_the_pings_of_another_type_on_the_queue() -> None:
    starved = Simulation(parse_workload(WAVE), DispatchOrder.DEADLINE, keep_slots=False).run()
    kept = Simulation(parse_workload(WAVE), DispatchOrder.DEADLINE).run()
    assert starved["groups"]["hourly pings"]["error_hours"] > 100
    assert kept["groups"]["hourly pings"]["error_hours"] == 0
    # the dumps: six ran at 02:00, none of them late yet
    assert kept["groups"]["nightly dumps"]["error_hours"] == 0
    assert kept["types"]["dump"]["dispatches"] == 6
