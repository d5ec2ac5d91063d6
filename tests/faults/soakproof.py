"""The checker's proofs: when a disagreement between what the bodies did and
what the scheduler recorded is the work of a fault, shown from the records.

Nothing is excused by a window around a fault. Each proof names every link
of its chain — the body's notes, the process journal (:mod:`soaklife`), the
run's history in the store — and fails with the first link that does not
hold. Two kinds:

* :func:`stale_copy`: a copy whose run was taken while its process was
  stopped (or cut from the database: the server down, or that worker's
  connections frozen), that ran beside the newer copy after it resumed.
  Harmless when its token is older than the newer copy's, its run was taken
  before the newer copy started, it made no side effect — it stopped
  (``RunTaken``, ``LeaseLost``: told by its heartbeat, or refused by its
  ``self.fence.check()`` right before the side effect), it failed, or it was
  killed — within one beat (plus :attr:`Timeouts.slack`) of the moment its
  process could hear that its run was taken, and its run is ``lost`` or
  ``superseded``, never good. A stale copy whose check passed made its side
  effect: nothing excuses that, whether or not the probe's own register
  then refused the write.
* :func:`end_unrecorded` (and :func:`ran_again`): a body that ended, whose
  process then died (SIGKILL) or stopped (SIGSTOP of its group) before its
  end was recorded — within the bound the worker gives itself to record an
  end (:attr:`Timeouts.recorded_within`, plus the time it could not reach
  the database) — so that its run was taken after it went silent and the
  task ran again under a larger token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from soaklife import INF, Life
from soakplan import Timeouts

from swh_like_scheduler.domain.model import RunStatus, TaskRun

#: how a run is taken from its copy (the steal step; a worker gone offline)
TAKINGS = ("stolen", "worker_offline")
#: a copy stopped because its run was taken (``RunTaken``), because its
#: process could not renew it within the self-fencing bound (``LeaseLost``),
#: or a lease's ping was refused (``LeaseStopped``)
STOPS = ("RunTaken", "LeaseLost", "LeaseStopped")
_TAKEN_STATUSES = (RunStatus.LOST, RunStatus.SUPERSEDED)


@dataclass
class Execution:
    """One execution of the probe's body: one start in one process."""

    exec: str
    tid: str
    task: int
    token: int
    run: str
    worker: str
    pid: int
    ppid: int
    start: float
    #: when it ended or was stopped (its note), ``inf`` if it did neither
    left: float = INF
    how: str = "running"  # "end", "stopped", or "running" (no note after its start)
    outcome: str | None = None
    #: whether the probe's own register took its write (a larger token had
    #: not started): its side effect was made either way
    accepted: bool | None = None
    why: str | None = None
    #: where it stopped: ``"check"`` when its ``self.fence.check()`` refused
    #: its side effect, ``"work"`` when it was stopped while it worked,
    #: ``"start"`` while it wrote its start note
    where: str | None = None
    #: when its process was killed, for one that left no note
    died: float | None = None

    @property
    def finish(self) -> float:
        """When it stopped executing for sure."""
        if self.left < INF:
            return self.left
        return self.died if self.died is not None else INF

    @property
    def good(self) -> bool:
        """It made its side effect: its fence check passed, then it ended
        well (whatever the probe's register then said)."""
        return self.how == "end" and self.outcome in ("eventful", "uneventful")

    @property
    def refused(self) -> bool:
        """Its ``self.fence.check()`` refused its side effect."""
        return self.how == "stopped" and self.where == "check"

    def name(self) -> str:
        return f"run {self.run} (token {self.token}, process {self.pid})"


def instant(entry: dict[str, Any] | Any) -> float:
    return datetime.fromisoformat(str(entry["at"])).timestamp()


def assigned(run: TaskRun, token: int | None) -> dict[str, Any] | None:
    """The ``assigned`` entry of the start that got ``token``."""
    for entry in run.history:
        if entry.get("event") == "assigned" and entry.get("fence") == token:
            return dict(entry)
    return None


def taken_at(run: TaskRun) -> float | None:
    """When the run was taken from its copy (its last taking), if it was."""
    found = [instant(e) for e in run.history if e.get("event") in TAKINGS]
    return found[-1] if found else None


def started_at(run: TaskRun) -> float | None:
    """When the guard started the run under its token."""
    entry = assigned(run, run.fence)
    return instant(entry) if entry is not None else None


def stale_end(run: TaskRun) -> dict[str, Any] | None:
    for entry in run.history:
        if entry.get("event") == "stale_end":
            return dict(entry)
    return None


@dataclass(frozen=True)
class Proof:
    """A chain shown from the records; :attr:`kind` names it in the table."""

    kind: str
    text: str


class Unproven(Exception):
    """A link of a chain does not hold: the message says which."""


def _hear(a_ppid: int, taken: float, life: Life, t: Timeouts) -> tuple[str, float]:
    """Why a copy was silent when its run was taken, and when its process
    could hear of it again (its group resumed, the database came back, or
    its own connections thawed)."""
    incarnation = life.of(a_ppid)
    if incarnation is not None:
        stop = incarnation.frozen_at(taken)
        if stop is not None:
            return f"its worker's processes stopped {stop[0]:.1f}..{stop[1]:.1f}", stop[1]
    name = incarnation.name if incarnation is not None else None
    away = life.database_away(name, taken - t.silent - t.beat, taken)
    if away is not None:
        what, start, end = away
        return f"{what} {start:.1f}..{end:.1f}", max(end, taken)
    raise Unproven(
        "its process was neither stopped nor cut from the database when its run was taken"
    )


def stale_copy(
    a: Execution,
    b: Execution,
    run_a: TaskRun | None,
    run_b: TaskRun | None,
    life: Life,
    t: Timeouts,
) -> Proof:
    """``a`` (the older copy) ran beside ``b``: prove it harmless (module doc)."""
    if run_a is None or run_b is None:
        raise Unproven("a run is missing from the store")
    if a.token >= b.token:
        raise Unproven(f"its token {a.token} is not older than the other's {b.token}")
    if run_a.status not in _TAKEN_STATUSES:
        raise Unproven(f"its run is {run_a.status}, not lost or superseded")
    taken = taken_at(run_a)
    if taken is None:
        raise Unproven("its run was never taken from it")
    b_started = started_at(run_b)
    if b_started is None or b_started < taken:
        raise Unproven("the newer copy started before the older one's run was taken")
    why, heard = _hear(a.ppid, taken, life, t)
    heard = max(heard, taken)
    incarnation = life.of(a.ppid)
    away = life.database_away(incarnation.name if incarnation else None, heard, heard)
    if away is not None:  # it hears of it from the database
        why, heard = f"{why}, {away[0]} until {away[2]:.1f}", away[2]
    if a.refused and a.why in STOPS:
        how = f"its side effect refused by its fence check ({a.why})"
    elif a.how == "stopped" and a.why in STOPS:
        how = f"stopped ({a.why})"
    elif a.how == "end" and a.outcome == "failed":
        how = "failed (no side effect)"
    elif a.how == "running" and a.died is not None:
        how = "killed before any side effect"
    elif a.how == "stopped":
        raise Unproven(f"it was stopped by {a.why}, not told its run was taken")
    else:
        register = "" if a.accepted is not False else " (the probe's register refused it)"
        raise Unproven(
            f"it ended {a.outcome} after its fence check passed: its side effect was made{register}"
        )
    if a.finish > heard + t.beat + t.slack:
        raise Unproven(
            f"it ran {a.finish - heard:.1f} s after it could hear its run was taken "
            f"(one beat and the slack: {t.beat + t.slack:.1f} s)"
        )
    return Proof(
        "stale copy",
        f"task {a.task}: {a.name()} ran beside {b.name()}: {why}; its run taken at "
        f"{taken:.1f}, the newer copy started at {b_started:.1f}; {how} "
        f"{a.finish - heard:.1f} s after it could hear of it; its run {run_a.status}",
    )


#: how long before a side effect's stamp its sender may have been silenced:
#: what it had already sent still arrives (loopback: milliseconds)
IN_FLIGHT = 0.5


def silenced_after(
    ppid: int | None, since: float, taken: float, life: Life, t: Timeouts
) -> tuple[str, float]:
    """What silenced a worker's incarnation after ``since`` (a body's end)
    and kept it silent until ``taken`` (its run taken): its group killed, or
    stopped until after the taking; and when. It must have come before the
    end would have been recorded (:attr:`Timeouts.recorded_within`, plus
    the time the database was down meanwhile)."""
    incarnation = life.of(ppid)
    if incarnation is None:
        raise Unproven(f"process {ppid} is no worker the soak started")
    found: list[tuple[float, str]] = []
    # ``since`` may be stamped by the receiver of what the body sent: a
    # request already on the wire arrives after the sender was killed or
    # stopped (seen: a webhook delivery stamped 0.6 ms after its kill)
    sent = since - IN_FLIGHT
    if incarnation.killed is not None and sent <= incarnation.killed <= taken:
        found.append((incarnation.killed, "killed (SIGKILL)"))
    for start, end in incarnation.group_stops:
        if sent <= start <= taken <= end:
            found.append((start, "stopped (SIGSTOP of its group)"))
    if not found:
        raise Unproven(
            "its process was neither killed, nor stopped until its run was taken, after it ended"
        )
    at, what = min(found)
    at = max(at, since)
    bound = t.recorded_within + life.away_between(incarnation.name, since, at)
    if at - since > bound:
        raise Unproven(
            f"it was {what} {at - since:.1f} s after it ended: its end should have been "
            f"recorded within {bound:.1f} s"
        )
    return what, at


def end_unrecorded(
    effect: float, ppid: int | None, run: TaskRun | None, life: Life, t: Timeouts
) -> tuple[str, float, float]:
    """A body's side effect (or end) at ``effect`` was never recorded as its
    run's outcome because its process was silenced: (what, when, taken)."""
    if run is None:
        raise Unproven("its run is missing from the store")
    if run.status not in _TAKEN_STATUSES:
        raise Unproven(f"its run is {run.status}, not lost or superseded")
    taken = taken_at(run)
    if taken is None:
        raise Unproven("its run was never taken")
    what, at = silenced_after(ppid, effect, taken, life, t)
    return what, at, taken


def ran_again(
    effect: float,
    ppid: int | None,
    run: TaskRun | None,
    later: TaskRun | None,
    life: Life,
    t: Timeouts,
) -> Proof:
    """The whole chain for a side effect done twice: the first copy's end
    died with its process (:func:`end_unrecorded`), and the task ran again
    under a larger token after its run was taken."""
    what, at, taken = end_unrecorded(effect, ppid, run, life, t)
    assert run is not None
    if later is None or later.fence is None or run.fence is None or later.fence <= run.fence:
        raise Unproven("the later copy's token is not larger")
    later_start = started_at(later)
    if later_start is None or later_start < taken:
        raise Unproven("the later copy started before the first run was taken")
    kind = "ended, then killed before its end was recorded"
    if not what.startswith("killed"):
        kind = f"ended, then {what.split(' (')[0]} before its end was recorded"
    return Proof(
        kind,
        f"run {run.backend_id} (token {run.fence}) did its work at {effect:.1f}; its worker "
        f"was {what} {at - effect:.1f} s later, before its end was recorded; its run was "
        f"taken at {taken:.1f} ({run.status}); run {later.backend_id} (token {later.fence}) "
        f"started at {later_start:.1f} and did it again",
    )


__all__ = [
    "STOPS",
    "TAKINGS",
    "Execution",
    "Proof",
    "Unproven",
    "assigned",
    "end_unrecorded",
    "instant",
    "ran_again",
    "silenced_after",
    "stale_copy",
    "stale_end",
    "started_at",
    "taken_at",
]
