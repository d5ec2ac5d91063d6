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
