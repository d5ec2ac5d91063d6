"""The worker's half of the scheduler, in the worker processes.

* :mod:`.result_event` — :class:`ResultEventTask`: the ``task-result`` event
  carrying a run's real return value;
* :mod:`.guard` — :class:`SchedulerTask`: the start guard, the base class
  every task type uses (one copy of a run at a time, refused duplicates,
  a fencing token per start: :class:`Fence`);
* :mod:`.heartbeat` — the process running a body renews its run, and
  records its end when the listener did not;
* :mod:`.ownership` and :mod:`.fencing` — whether that process still owns
  its runs: self-fencing (:class:`LeaseLost`), stalls, ``self.fence.check()``;
* the lease (:mod:`swh_like_scheduler.domain.lease`) builds on the guard for long
  tasks: pings, steals, stops.
"""

from .fencing import LeaseLost, RunTaken
from .guard import Fence, SchedulerTask, StartRefused, is_run_id
from .result_event import RESULT_EVENT, ResultEventTask, event_result

__all__ = [
    "RESULT_EVENT",
    "Fence",
    "LeaseLost",
    "ResultEventTask",
    "RunTaken",
    "SchedulerTask",
    "StartRefused",
    "event_result",
    "is_run_id",
]
