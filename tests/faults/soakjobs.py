"""The jobs' callbacks, checked from what the receivers got.

The soak's receivers (:class:`soakrun.Receivers`) write down each delivery:
the HTTP receiver each POST (``Idempotency-Key``, the run's id from
``X-Swh-Task-Id``, when it came), the notify consumer each message
(``swh-key``, ``swh-task-id``, ``swh-published-at``, when it came). One
execution of a callback is one POST, or one message as published (the
same message delivered again by the broker, after a lost acknowledgement,
carries the same publication instant: it is the broker's at-least-once,
counted apart, not a second execution).

Each instant still in its job is delivered exactly once; an instant its job
dropped, never; a run recorded good has its delivery. A second execution is
a double unless :func:`soakproof.ran_again` shows the first run's end died
with its worker; a notification never received is lost unless the broker
was emptied between its run's start and end (plus the receiver's lag).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from soakproof import Proof, Unproven, ran_again

from swh_like_scheduler.domain.model import RunStatus, TaskRun, TaskStatus
from swh_like_scheduler.intake.jobs import idempotency_key, task_key

if TYPE_CHECKING:
    from soakcheck import Checker

#: seconds within which the notify consumer reads a message once published
#: (it polls every half second): a broker emptied later did not lose it
RECEIVER_LAG = 5.0


def executions(found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The distinct executions among deliveries (a message delivered again
    counts once) and how many were deliveries again."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    again = 0
    for delivery in sorted(found, key=lambda d: float(d["t"])):
        ident = (str(delivery["run"]), str(delivery.get("published") or delivery["t"]))
        if ident in seen:
            again += 1
        else:
            seen[ident] = delivery
    return list(seen.values()), again


def effect_at(delivery: dict[str, Any]) -> float:
    """When the body did its side effect: the publication, or the POST's arrival."""
    return float(delivery.get("published_t") or delivery["t"])


def check_jobs(checker: Checker, deliveries: dict[str, list[dict[str, Any]]]) -> None:
    from soakcheck import DOUBLED, LOST, WRONG

    verdict = checker.verdict
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for kind in ("http", "notify"):
        for delivery in deliveries.get(kind, []):
            by_key[str(delivery["key"])].append(delivery)
    delivered_runs = {str(d["run"]) for found in by_key.values() for d in found}
    for key, view in checker.records.jobs.items():
        for instant in view.instants:
            notify = instant.task.type == "notify"
            ident = task_key(key, instant.at) if notify else idempotency_key(key, instant.at)
            done, again = executions(by_key.get(ident, []))
            what = f"job {key} at {instant.at.isoformat()}"
            if again:
                verdict.explained["delivered again by the broker (same message)"].append(
                    f"{what}: {again} time(s)"
                )
            if instant.task.status is TaskStatus.CANCELLED:
                if done:
                    verdict.fail(DOUBLED, f"{what}: dropped from its job, delivered {len(done)}")
                continue
            verdict.due += 1
            runs = [checker.runs.get(str(d["run"])) for d in done]
            if any(r is None or r.task_id != instant.task.id for r in runs):
                verdict.fail(WRONG, f"{what}: delivered by a run that is not its task's")
                continue
            if len(done) == 1:
                verdict.delivered += 1
            elif not done:
                lost_by = broker_lost(checker, instant.task.id or 0) if notify else None
                if lost_by is None:
                    verdict.fail(LOST, f"{what}: never delivered ({instant.task.status})")
                else:
                    verdict.output_lost += 1
                    verdict.explain(
                        Proof("published, then lost by the broker", f"{what}: {lost_by}")
                    )
            else:
                twice(checker, what, done, runs)
    for run in checker.records.runs:
        task = checker.records.tasks.get(run.task_id)
        if task is None or task.type not in ("notify", "webhook") or not run.status.is_good:
            continue
        if run.backend_id not in delivered_runs and (
            task.type == "webhook" or broker_lost(checker, run.task_id) is None
        ):
            verdict.fail(
                WRONG, f"{task.type} run {run.backend_id}: recorded good, nothing delivered"
            )


def twice(
    checker: Checker, what: str, done: list[dict[str, Any]], runs: list[TaskRun | None]
) -> None:
    from soakcheck import DOUBLED

    verdict = checker.verdict
    ids = [str(d["run"]) for d in done]
    if len(set(ids)) < len(ids):
        verdict.fail(DOUBLED, f"{what}: one run executed twice ({', '.join(ids)})")
        return
    order = sorted(zip(done, runs, strict=True), key=lambda pair: effect_at(pair[0]))
    proofs = []
    for n, (delivery, run) in enumerate(order[:-1]):
        later = order[n + 1][1]
        entry = _assigned(run)
        try:
            proofs.append(
                ran_again(
                    effect_at(delivery),
                    entry.get("pid") if entry else None,
                    run,
                    later,
                    checker.life,
                    checker.t,
                )
            )
        except Unproven as why:
            verdict.fail(
                DOUBLED, f"{what}: delivered by {len(done)} runs ({', '.join(ids)}): {why}"
            )
            return
    verdict.delivered += 1
    for proof in proofs:
        verdict.explain(Proof(proof.kind, f"{what}: {proof.text}"))


def _assigned(run: TaskRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    from soakproof import assigned

    return assigned(run, run.fence)


def broker_lost(checker: Checker, task_id: int) -> str | None:
    """Why the notification of ``task_id`` never arrived, if the broker
    lost it: its good run published it between its start and its end, and
    the broker was emptied after that start and before the receiver would
    have read it."""
    if not checker.wipes_lose_messages:
        return None
    good = [
        r
        for r in checker.records.runs
        if r.task_id == task_id and r.status is RunStatus.EVENTFUL and r.started and r.ended
    ]
    for run in good:
        assert run.started is not None and run.ended is not None
        start, end = run.started.timestamp(), run.ended.timestamp()
        for wipe in checker.life.wipes.get("broker", []):
            if start <= wipe <= end + RECEIVER_LAG:
                return (
                    f"run {run.backend_id} published it between {start:.1f} and {end:.1f}; "
                    f"the broker was emptied at {wipe:.1f}"
                )
    return None
