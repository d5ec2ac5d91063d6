"""The soak's checker on small hand-made histories: one per kind of flaw it
must see, and the two kinds of disagreement it must excuse only with a
proof (:mod:`soakcheck`, :mod:`soakproof`). A body that made its side
effect (its fence check passed, it ended well) is a completion whatever
the probe's own register said and whenever it came; only a side effect
refused by ``self.fence.check()`` (or never reached) is not.

Each history is what the soak would read at its end: the probe bodies'
notes, the process journal, the store's tasks and runs. No server is
needed.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from soakcheck import (
    DOUBLED,
    EARLY,
    LOST,
    OVERLAP,
    WRONG,
    Checker,
    Records,
    Verdict,
    failed_on_purpose,
)
from soaklife import CONT, DOWN, KILL, SPAWN, STOP_GROUP, UP, Happening, Life, cut_name
from soakplan import TIMEOUTS, outcome_of

from swh_like_scheduler.domain.model import RunStatus, ScheduleKind, Task, TaskRun, TaskStatus
from swh_like_scheduler.intake.jobs import JobInstant, JobView, idempotency_key

T0 = 1_800_000_000.0
WORK = "soak-work"
#: two workers: main processes 100 and 200, each with pool processes 101, 201
W1, W2 = 100, 200


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def task(task_id: int, *, recurring: bool = False, tid: str = "t") -> Task:
    kind = {"schedule_kind": ScheduleKind.PERIODIC, "period": timedelta(seconds=30)}
    return Task(
        type=WORK,
        next_run=at(0),
        deadline=at(600),
        kwargs={"tid": tid},
        id=task_id,
        status=TaskStatus.WAITING if recurring else TaskStatus.COMPLETED,
        **(kind if recurring else {"schedule_kind": ScheduleKind.ONESHOT}),  # type: ignore[arg-type]
    )


def run(
    backend_id: str,
    task_id: int,
    token: int,
    status: RunStatus,
    *,
    started: float,
    main: int = W1,
    taken: float | None = None,
    stale: str | None = None,
) -> TaskRun:
    history: list[dict[str, Any]] = [
        {"event": "assigned", "at": at(started).isoformat(), "pid": main, "fence": token}
    ]
    if taken is not None:
        history.append({"event": "stolen", "at": at(taken).isoformat()})
    if stale is not None:  # its end came after another copy started
        history.append({"event": "stale_end", "at": at(taken or 0).isoformat(), "status": stale})
    return TaskRun(
        task_id=task_id,
        backend_id=backend_id,
        slot=at(token),
        scheduled=at(started - 0.5),
        status=status,
        started=at(started),
        ended=None if status.is_open else at(started + 1),
        history=tuple(history),
        fence=token,
    )


def body(
    ident: str,
    run_id: str,
    task_id: int,
    token: int,
    start: float,
    *,
    main: int = W1,
    end: float | None = None,
    stopped: float | None = None,
    outcome: str = "eventful",
    accepted: bool | None = True,
    why: str = "RunTaken",
    where: str = "work",
) -> list[dict[str, Any]]:
    """The notes of one execution, in pool process ``main + 1``: its start,
    then its end (a good one after its fence check passed) or its stop
    (``why``, ``where``: while it worked, or refused by its fence check)."""
    base = {
        "exec": ident,
        "tid": f"t{task_id}",
        "task": task_id,
        "token": token,
        "run": run_id,
        "worker": "w@h",
        "pid": main + 1,
        "ppid": main,
    }
    notes = [{**base, "kind": "start", "t": T0 + start}]
    if end is not None:
        ended = {**base, "kind": "end", "t": T0 + end, "outcome": outcome}
        if outcome != "failed":
            ended.update(accepted=accepted, checked=True)
        notes.append(ended)
    if stopped is not None:
        notes.append({**base, "kind": "stopped", "t": T0 + stopped, "why": why, "where": where})
    return notes


def life(*more: tuple[float, int, str]) -> Life:
    spawns = [Happening(T0 - 10, "work-1", W1, SPAWN), Happening(T0 - 10, "work-2", W2, SPAWN)]
    return Life(spawns + [Happening(T0 + t, "w", pid, what) for t, pid, what in more])


def check(
    tasks: list[Task],
    runs: list[TaskRun],
    notes: list[dict[str, Any]],
    journal: Life | None = None,
) -> Verdict:
    records = Records({t.id or 0: t for t in tasks}, runs, {})
    checker = Checker(records, journal or life(), TIMEOUTS, work_type=WORK)
    return checker.check_bodies(notes, {t.id or 0: f"t{t.id}" for t in tasks})


def failures(verdict: Verdict, kind: str) -> list[str]:
    return [f for f in verdict.failures if f.startswith(f"{kind}:")]


def test_two_executions_of_one_run_are_a_double() -> None:
    """The old checker keyed bodies by run id: these two were one to it."""
    verdict = check(
        [task(1)],
        [run("r1", 1, 1, RunStatus.EVENTFUL, started=0)],
        [
            *body("a", "r1", 1, 1, 0.5, end=1.5),
            *body("b", "r1", 1, 1, 3.0, main=W2, end=4.0),
        ],
    )
    assert verdict.executions == 2
    assert any("run r1 executed 2 times" in f for f in failures(verdict, DOUBLED))
    assert any("completed 2 times" in f for f in failures(verdict, DOUBLED))


@pytest.mark.parametrize("recurring", [True, False], ids=["recurring", "one-shot"])
def test_a_run_recorded_good_without_a_body(recurring: bool) -> None:
    runs = [run("r2", 2, 1, RunStatus.EVENTFUL, started=0)]
    notes = body("a", "r2", 2, 1, 0.2, end=1.0)
    if recurring:
        runs.append(run("r3", 2, 2, RunStatus.UNEVENTFUL, started=40))
    else:  # the one-shot's only good run never ran its body
        notes = []
    verdict = check([task(2, recurring=recurring)], runs, notes)
    missing = "r3" if recurring else "r2"
    assert [f for f in failures(verdict, WRONG) if missing in f and ", no body ran" in f]
    assert bool(failures(verdict, LOST)) is not recurring


def test_two_bodies_of_a_task_at_once_are_an_overlap() -> None:
    verdict = check(
        [task(3, recurring=True)],
        [
            run("r4", 3, 1, RunStatus.EVENTFUL, started=0),
            run("r5", 3, 2, RunStatus.UNEVENTFUL, started=5, main=W2),
        ],
        [
            *body("a", "r4", 3, 1, 0.1, end=10.0),
            *body("b", "r5", 3, 2, 5.1, main=W2, end=8.0, outcome="uneventful"),
        ],
    )
    assert len(failures(verdict, OVERLAP)) == 1, verdict.failures
    assert "2.90 s" in failures(verdict, OVERLAP)[0]


def stale_history(
    first: list[dict[str, Any]], *, stopped: bool = True
) -> tuple[list[Task], list[TaskRun], list[dict[str, Any]], Life]:
    """Worker 1's group stopped at 2 with a body of run r6 under way; r6
    taken at 20; r7 started on worker 2 at 21 and completed at 40; worker
    1 resumed at 30 (unless not ``stopped``); ``first``: r6's body."""
    runs = [
        run("r6", 4, 1, RunStatus.LOST, started=0, taken=20),
        run("r7", 4, 2, RunStatus.EVENTFUL, started=21, main=W2),
    ]
    notes = [*first, *body("b", "r7", 4, 2, 21.2, main=W2, end=40)]
    journal = life((2, W1, STOP_GROUP), (30, W1, CONT)) if stopped else life()
    return [task(4)], runs, notes, journal


def test_a_stale_copy_proven_harmless() -> None:
    """Stopped by RunTaken a second after its process resumed."""
    verdict = check(*stale_history(body("a", "r6", 4, 1, 0.5, stopped=31.0)))
    assert verdict.failures == []
    assert len(verdict.stale) == 1 and "stopped (RunTaken)" in verdict.stale[0]
    assert verdict.stale_seconds == pytest.approx(1.0, abs=0.01)
    assert (verdict.told, verdict.refused) == (1, 0)
    assert verdict.delivered == verdict.due == 1


def test_a_stale_copy_hears_once_the_database_is_back() -> None:
    """Stopped 8 s after its process resumed, but 2 s after PostgreSQL came
    back (it hears of the taking from the database)."""
    tasks, runs, notes, journal = stale_history(body("a", "r6", 4, 1, 0.5, stopped=38.0))
    outage = [Happening(T0 + 29, "postgres", 0, DOWN), Happening(T0 + 36, "postgres", 0, UP)]
    verdict = check(tasks, runs, notes, Life(journal.happenings + outage))
    assert verdict.failures == []
    assert "the database down until" in verdict.stale[0]


@pytest.mark.parametrize("why", ["RunTaken", "LeaseLost"])
@pytest.mark.parametrize("said", [None, "failed"])
def test_a_stale_copy_refused_by_its_fence_check_is_harmless(why: str, said: str | None) -> None:
    """Its ``self.fence.check()`` refused the side effect a second after its
    process resumed (the token moved: RunTaken; its own bound: LeaseLost);
    its end recorded superseded as failed, or never."""
    tasks, runs, notes, journal = stale_history(
        body("a", "r6", 4, 1, 0.5, stopped=30.5, why=why, where="check")
    )
    if said is not None:
        runs[0] = run("r6", 4, 1, RunStatus.SUPERSEDED, started=0, taken=20, stale=said)
    verdict = check(tasks, runs, notes, journal)
    assert verdict.failures == []
    assert "refused by its fence check" in verdict.stale[0]
    assert (verdict.told, verdict.refused, verdict.register_refused) == (0, 1, 0)
    assert verdict.delivered == verdict.due == 1


def test_a_stale_copy_fenced_by_its_own_bound_is_harmless() -> None:
    """LeaseLost while it worked: its heartbeat found no renewal for the
    bound as soon as it resumed (the quick soak at f6aa8aa failed on one:
    the checker knew RunTaken only)."""
    verdict = check(*stale_history(body("a", "r6", 4, 1, 0.5, stopped=30.2, why="LeaseLost")))
    assert verdict.failures == []
    assert "stopped (LeaseLost)" in verdict.stale[0]
    assert (verdict.told, verdict.refused) == (1, 0)


@pytest.mark.parametrize("newer", [21.0, 31.0], ids=["register refused", "register accepted"])
def test_a_stale_copy_that_completed_after_resuming_is_a_double(newer: float) -> None:
    """Worker 1 stopped at 2 with r6's body 0.3 s from its end; r6 taken at
    20; worker 1 resumed at 30 and the stale copy's fence check passed: it
    made its side effect at 30.3. Whether the newer copy r7 had started
    before (the probe's register refused the write) or only after (the
    register took it), the one-shot completed twice: a double, which no
    proof excuses (its process was stopped before its end, not after)."""
    stale = body("a", "r6", 4, 1, 0.5, end=30.3, accepted=newer > 30.3)
    runs = [
        run("r6", 4, 1, RunStatus.SUPERSEDED, started=0, taken=20, stale="eventful"),
        run("r7", 4, 2, RunStatus.EVENTFUL, started=newer, main=W2),
    ]
    notes = [*stale, *body("b", "r7", 4, 2, newer + 0.2, main=W2, end=newer + 19)]
    verdict = check([task(4)], runs, notes, life((2, W1, STOP_GROUP), (30, W1, CONT)))
    doubled = failures(verdict, DOUBLED)
    assert len(doubled) == 1 and "completed 2 times" in doubled[0], verdict.failures
    assert verdict.delivered == 0
    assert verdict.register_refused == (1 if newer < 30.3 else 0)
    if newer < 30.3:  # beside the newer copy: not harmless either
        found = failures(verdict, OVERLAP)
        assert len(found) == 1 and "its side effect was made" in found[0]


def test_a_recurring_tasks_side_effect_after_its_run_was_taken_is_a_double() -> None:
    """A recurring task's stale copy that made its side effect after its
    run was taken, before the run dispatched again started: no overlap, but
    the instant is served twice."""
    runs = [
        run("r6", 4, 1, RunStatus.SUPERSEDED, started=0, taken=20, stale="eventful"),
        run("r7", 4, 2, RunStatus.EVENTFUL, started=31, main=W2),
    ]
    notes = [
        *body("a", "r6", 4, 1, 0.5, end=30.3),
        *body("b", "r7", 4, 2, 31.2, main=W2, end=32),
    ]
    journal = life((2, W1, STOP_GROUP), (30, W1, CONT))
    verdict = check([task(4, recurring=True)], runs, notes, journal)
    doubled = failures(verdict, DOUBLED)
    assert len(doubled) == 1 and "after its run was taken at" in doubled[0], verdict.failures
    assert failures(verdict, OVERLAP) == []


@pytest.mark.parametrize("cut", [True, False], ids=["cut off", "not cut off"])
def test_a_copy_cut_off_from_the_database_hears_once_it_is_back(cut: bool) -> None:
    """Worker 1's connections to PostgreSQL frozen 2..30 (its broker
    reachable, its processes running): its run taken at 20, the newer copy
    started at 21 on worker 2; the old copy told at 31, a second after the
    thaw. Harmless with the cut in the journal; without it, nothing shows
    why that copy was silent."""
    spawns = [Happening(T0 - 10, "work-1", W1, SPAWN), Happening(T0 - 10, "work-2", W2, SPAWN)]
    outage = [
        Happening(T0 + 2, cut_name("work-1"), 0, DOWN),
        Happening(T0 + 30, cut_name("work-1"), 0, UP),
    ]
    tasks, runs, notes, _ = stale_history(body("a", "r6", 4, 1, 0.5, stopped=31.0))
    verdict = check(tasks, runs, notes, Life(spawns + (outage if cut else [])))
    if cut:
        assert verdict.failures == []
        assert f"work-1 cut off from the database {T0 + 2:.1f}..{T0 + 30:.1f}" in verdict.stale[0]
    else:
        found = failures(verdict, OVERLAP)
        assert len(found) == 1 and "neither stopped nor cut" in found[0]


def test_a_body_started_before_its_run_was_due_is_early() -> None:
    """A run whose slot (the instant its task was due, on the database's
    clock) is 60 s after its body started: a runner whose clock is ahead
    claimed it; the journal names the runner that ran skewed then."""
    due = run("r14", 9, 1, RunStatus.EVENTFUL, started=0)
    due = dataclasses.replace(due, slot=at(60))
    journal = Life(
        [
            *life().happenings,
            Happening(T0 - 5, "runner-1", 300, SPAWN, "faketime +90s"),
        ]
    )
    verdict = check([task(9)], [due], body("a", "r14", 9, 1, 0.5, end=1.0), journal)
    found = failures(verdict, EARLY)
    assert len(found) == 1 and "59.5 s before its run was due" in found[0], verdict.failures
    assert "runner-1 with its clock +90 s" in found[0]
    on_time = dataclasses.replace(due, slot=at(0))
    assert check([task(9)], [on_time], body("a", "r14", 9, 1, 0.5, end=1.0)).failures == []


@pytest.mark.parametrize(
    ("first", "stopped", "why"),
    [
        (body("a", "r6", 4, 1, 0.5, stopped=38.0), True, "ran 8.0 s after it could hear"),
        (body("a", "r6", 4, 1, 0.5, end=31.0), True, "its side effect was made"),
        (body("a", "r6", 4, 1, 0.5, stopped=22.0), False, "neither stopped nor cut"),
        (body("a", "r6", 4, 1, 0.5, stopped=30.5, why="KeyError"), True, "stopped by KeyError"),
    ],
    ids=["too late", "side effect made", "never stopped", "stopped otherwise"],
)
def test_an_unproven_stale_copy_is_an_overlap(
    first: list[dict[str, Any]], stopped: bool, why: str
) -> None:
    verdict = check(*stale_history(first, stopped=stopped))
    found = failures(verdict, OVERLAP)
    assert len(found) == 1 and why in found[0], verdict.failures
    assert verdict.stale == []


def killed_history(kill: float) -> tuple[list[Task], list[TaskRun], list[dict[str, Any]], Life]:
    """Run r8's body completed at 2; worker 1 killed at ``kill``; r8 taken
    17 s later; r9 started on worker 2 a second after and completed."""
    runs = [
        run("r8", 5, 1, RunStatus.LOST, started=0, taken=kill + 17),
        run("r9", 5, 2, RunStatus.EVENTFUL, started=kill + 18, main=W2),
    ]
    notes = [
        *body("a", "r8", 5, 1, 0.5, end=2.0),
        *body("b", "r9", 5, 2, kill + 18.2, main=W2, end=kill + 19),
    ]
    return [task(5)], runs, notes, life((kill, W1, KILL))


def test_an_end_that_died_with_its_worker_is_shown_and_counted_apart() -> None:
    verdict = check(*killed_history(kill=3.0))
    assert verdict.failures == []
    assert verdict.delivered == verdict.due == 1
    assert len(verdict.explained["ended, then killed before its end was recorded"]) == 1
    assert len(verdict.explained["end lost with its process (killed)"]) == 1


def test_a_kill_long_after_an_end_excuses_nothing() -> None:
    """The worker records an end itself within 3 beats: a kill 28 s after
    the end is no reason for it to be missing."""
    verdict = check(*killed_history(kill=30.0))
    assert [f for f in failures(verdict, DOUBLED) if "should have been recorded" in f]
    assert [f for f in failures(verdict, WRONG) if "r8" in f]
    assert not verdict.explained


def test_a_oneshot_that_never_completed_is_lost() -> None:
    verdict = check(
        [task(6)],
        [run("r10", 6, 1, RunStatus.LOST, started=0, taken=20)],
        body("a", "r10", 6, 1, 0.5, stopped=25, outcome=""),
        life((2, W1, STOP_GROUP), (24, W1, CONT)),
    )
    assert len(failures(verdict, LOST)) == 1
    assert failures(verdict, WRONG) == []


def test_a_callback_posted_twice_by_one_run_is_a_double() -> None:
    from soakjobs import check_jobs

    hook = Task(type="webhook", next_run=at(0), deadline=at(60), id=7, status=TaskStatus.COMPLETED)
    key = idempotency_key("job-0", at(0))
    runs = [
        run("r11", 7, 1, RunStatus.EVENTFUL, started=0),
        run("r12", 7, 2, RunStatus.EVENTFUL, started=9),
    ]
    records = Records({7: hook}, runs, {}, {"job-0": JobView("job-0", (JobInstant(at(0), hook),))})
    checker = Checker(records, life(), TIMEOUTS, work_type=WORK)
    posts = [{"key": key, "run": "r11", "t": T0 + t} for t in (0.5, 0.7)]
    check_jobs(checker, {"http": posts, "notify": []})
    assert [f for f in failures(checker.verdict, DOUBLED) if "one run executed twice" in f]
    # a run recorded good whose callback never arrived
    assert [f for f in failures(checker.verdict, WRONG) if "r12" in f and "nothing delivered" in f]


def test_a_notification_the_broker_lost_after_its_run_is_output_lost_not_lost() -> None:
    """A notify instant whose good run published its message, which an
    emptied broker then lost, counts as the fault's doing (with its proof);
    the same history without the wipe is a loss."""
    from soakjobs import check_jobs
    from soaklife import WIPED

    note = Task(type="notify", next_run=at(0), deadline=at(60), id=8, status=TaskStatus.COMPLETED)
    good = run("r13", 8, 1, RunStatus.EVENTFUL, started=0)
    good = TaskRun(**{**good.__dict__, "ended": at(2)})
    jobs = {"job-1": JobView("job-1", (JobInstant(at(0), note),))}
    for wiped, expected_lost in ((True, 0), (False, 1)):
        journal = life()
        if wiped:
            journal = Life([*journal.happenings, Happening(T0 + 1.5, "broker", 0, WIPED)])
        records = Records({8: note}, [good], {}, jobs)
        checker = Checker(records, journal, TIMEOUTS, work_type=WORK, wipes_lose_messages=True)
        check_jobs(checker, {"http": [], "notify": []})
        verdict = checker.verdict
        assert (verdict.due, verdict.delivered) == (1, 0)
        assert verdict.output_lost == 1 - expected_lost
        assert len(failures(verdict, LOST)) == expected_lost, verdict.failures
        assert bool(verdict.explained) is wiped


def drawn(outcome: str, rate: float, count: int) -> list[str]:
    """``count`` run ids whose probe body's outcome at ``rate`` is ``outcome``."""
    found = (f"r-{n}" for n in range(10_000))
    return [i for i in found if outcome_of(i, rate) == outcome][:count]


def test_an_error_its_bodies_failing_on_purpose_explain() -> None:
    """A recurring task in ERROR after a streak of failures (its fail rate
    drew them) is the body's doing when every run since the last good one
    failed on purpose and the first was dispatched before the freshness it
    missed ran out; any broken link leaves the ERROR unexplained."""
    rate = 0.3
    recurring = Task(
        type=WORK,
        next_run=at(0),
        deadline=at(600),
        kwargs={"tid": "a1", "fail_rate": rate},
        id=5,
        schedule_kind=ScheduleKind.PERIODIC,
        period=timedelta(seconds=30),
    )
    good = run(drawn("eventful", rate, 1)[0], 5, 1, RunStatus.EVENTFUL, started=0)
    streak = [
        run(ident, 5, 2 + n, RunStatus.FAILED, started=10 + 5 * n)
        for n, ident in enumerate(drawn("failed", rate, 3))
    ]
    promised = at(40)
    proof = failed_on_purpose(recurring, [good, *streak], promised)
    assert proof is not None and "the 3 runs since its last good one" in proof.text
    # a run recorded failed whose body would have succeeded
    wrong = run(drawn("uneventful", rate, 1)[0], 5, 9, RunStatus.FAILED, started=30)
    assert failed_on_purpose(recurring, [good, *streak, wrong], promised) is None
    # the first failure dispatched only after the freshness ran out: the platform's delay
    assert failed_on_purpose(recurring, [good, *streak], at(5)) is None
    # the last run was good: nothing since it to explain an ERROR
    later = run(drawn("eventful", rate, 2)[1], 5, 9, RunStatus.EVENTFUL, started=60)
    assert failed_on_purpose(recurring, [good, *streak, later], promised) is None
    # a task that never fails on purpose, and a one-shot
    steady = dataclasses.replace(recurring, kwargs={"tid": "a1"})
    assert failed_on_purpose(steady, [good, *streak], promised) is None
    assert failed_on_purpose(task(5), [good, *streak], promised) is None


@pytest.mark.parametrize("seed", [5, 11, 12, 4647])
@pytest.mark.parametrize("skewable", [True, False], ids=["faketime", "no faketime"])
def test_every_plan_holds_the_self_fencing_and_clock_faults(seed: int, skewable: bool) -> None:
    """The quick cut and the full run each hold a whole worker stopped when
    its bodies have little left, a probe worker cut off from the database
    longer than the monitor's bounds, and (with libfaketime) a runner whose
    clock is moved; each aimed where it tests something."""
    from soakplan import FULL, QUICK, REQUIRED, make_plan
    from soakrun import LISTENERS, PROBES, PROCESSES, RUNNERS, WORKERS

    for scale in (QUICK, FULL):
        plan = make_plan(
            seed,
            scale,
            processes=PROCESSES,
            workers=list(WORKERS),
            listeners=LISTENERS,
            runners=RUNNERS,
            flushable=True,
            skewable=skewable,
        )
        kinds = {f.kind for f in plan.faults}
        expected = set(REQUIRED) - {"runner_pause"} - (set() if skewable else {"skewed_runner"})
        assert expected <= kinds, (scale, kinds)
        assert ("skewed_runner" in kinds) is skewable
        for fault in plan.faults:
            if fault.kind in ("stall_resume", "db_partition"):
                assert fault.target in PROBES
                assert fault.seconds > TIMEOUTS.silent
            if fault.kind == "skewed_runner":
                assert fault.target in RUNNERS and 30 <= abs(fault.offset) <= 120
                assert "its clock" in fault.describe()
