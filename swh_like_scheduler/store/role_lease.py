"""The lease and steal protocols (DESIGN.md §4)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.model import RunStatus, TaskRun

if TYPE_CHECKING:
    from ..domain.fencing import LeaseTerms
    from ..domain.records import LeaseGrant, PingReply, Renewal, StealReport


from .values import ApplyOutcome


class LeaseStore(Protocol):
    """The lease and steal protocols (DESIGN.md §4): instants are the
    database's clock; each call is one transaction."""

    def acquire_lease(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None = None,
        pid: int | None = None,
    ) -> LeaseGrant:
        """Claim the run ``backend_id`` and its task's ownership for the
        worker ``name`` on ``node``, under the unique ``tag`` of this copy;
        ``pid``, the worker's main process (noted in the ``assigned`` entry:
        a worker restarted under the same name keeps the runs its new
        process started, :meth:`end_worker_runs`).

        Granted (``ok``): the run becomes ``started`` (its start kept if the
        listener recorded one, else the DB's now), ``worker = name@node``,
        history entry ``assigned``; the task gets ``owner_*`` with
        ``owner_started_at = owner_last_ping_at = now`` and no steal pending.
        Every grant raises the task's fencing counter by one; the grant
        carries the new value (``fence``, with ``task_id``), also written on
        the run (``TaskRun.fence``) and in its ``assigned`` entry: a start
        granted later has a larger token.
        Asking again with the owning tag is granted again, changing nothing.
        Refused, in this order: ``unknown_run``; ``finished_run`` (the run
        ended: a late duplicate); ``already_running`` (another tag owns the
        task); ``cancelled`` / ``disabled`` (task status); ``banned_node``
        (``node`` in ``dont_run_on_nodes``); ``blackout`` (now inside a
        window). With ``apply``, a cancelled/disabled refusal ends the run
        ``cancelled`` and a blackout refusal ends it ``lost`` (the task is
        given back to its schedule); ``already_running`` and ``finished_run``
        add the history entry ``refused_copy``; other refusals write nothing."""
        ...

    def guard_start(
        self,
        backend_id: str,
        *,
        node: str,
        name: str,
        tag: str,
        apply: ApplyOutcome | None = None,
        pid: int | None = None,
    ) -> LeaseGrant:
        """The start guard of every task type: exactly :meth:`acquire_lease`
        (same checks, same refusals, same writes, a fencing token) except
        that ``owner_last_ping_at`` stays null: the process running the body
        renews the run (:meth:`renew_runs`), and the steal step counts its
        silence from ``owner_started_at`` until it does. The ownership is
        released when the run ends, by whatever ends it. A refused second
        copy (``already_running``, ``finished_run``) adds the history entry
        ``refused_copy`` to the run; its body must not run. A grant may
        carry ``db_now``, ``fence`` and ``task_id`` only (``task`` and
        ``run`` ``None``: the common case is decided in one statement)."""
        ...

    def release_start(self, backend_id: str, *, tag: str) -> bool:
        """The body of the run asked Celery for a retry (a new delivery with
        the same id): when ``tag`` owns the task and the run is open, the
        ownership is released (the run stays open and started, history
        ``retrying``) so that the retried delivery passes the guard. True
        then; otherwise nothing is written."""
        ...

    def ping_lease(self, backend_id: str, *, tag: str, progress: float | None = None) -> PingReply:
        """The owner's heartbeat. Stop (``proceed`` false) with ``stolen``
        when ``tag`` no longer owns the task, ``finished`` when the run has
        ended, ``cancelled`` when the task is cancelled or disabled,
        ``blackout`` when now is in a blackout window; nothing is written
        then. Otherwise ``ok``: ``owner_last_ping_at = now``, ``progress``
        stored on the run, and a pending steal cleared (``steal_start_at``
        back to null, history entry ``pinged_late``)."""
        ...

    def renew_runs(self, held: Sequence[tuple[str, str]]) -> dict[str, Renewal]:
        """The heartbeat of a worker process: ``held`` are the ``(backend
        id, tag)`` of the runs whose bodies it runs (or ran, while their end
        is not recorded). For each: ``ok`` when the run is open and ``tag``
        owns its task (``owner_last_ping_at = now``, a pending steal
        cleared); ``taken`` when the run is open under another owner (or
        none), ended ``lost`` (stolen) or unknown: the copy is no longer the
        run's; ``finished`` when the run has ended otherwise. One
        transaction for all; nothing is written but the renewals."""
        ...

    def finish_lease(
        self,
        backend_id: str,
        *,
        tag: str,
        status: RunStatus,
        result: Any = None,
        error: str | None = None,
        apply: ApplyOutcome | None = None,
    ) -> TaskRun | None:
        """The owner's final write: when ``tag`` still owns the task and the
        run is open, end the run exactly as :meth:`end_task_run` (``ended`` =
        the DB's now, ``apply`` in the same transaction) and release the
        ownership (without ``apply``, a ``scheduled`` task goes back to
        ``waiting``). ``timed_out`` adds the history entry ``timed_out``.
        Otherwise (ended, stolen, yielded, unknown) nothing is written and the
        run is returned as stored: calling it twice is harmless."""
        ...

    def yield_lease(
        self, backend_id: str, *, tag: str, apply: ApplyOutcome | None = None
    ) -> TaskRun | None:
        """Warm shutdown: when ``tag`` owns the task and the run is open, the
        run ends ``lost`` (a neutral outcome: no statistic moves) with the
        history entry ``yielded``, the ownership is released, the task's
        fencing token moves on and the task is runnable at once in a new
        slot (``waiting``, ``next_run = max(now, slot + 1 µs)``: the run's
        own slot and backend id are taken; when now
        is in a blackout window, the policy's time past it). Otherwise nothing
        is written."""
        ...

    def steal_expired_leases(
        self,
        *,
        ping_timeout: timedelta,
        grace: timedelta,
        apply: ApplyOutcome | None = None,
        limit: int = 1000,
    ) -> StealReport:
        """The monitor's steal step. Owned tasks whose last ping (or, never
        renewed, whose start) is older than ``ping_timeout`` and with no
        steal pending get ``steal_start_at = now`` (their open run: history
        ``pinged_late``); owned tasks whose
        ``steal_start_at`` is older than ``grace`` lose their run: it ends
        ``lost`` (history ``stolen``, ``apply`` in the same transaction), the
        ownership is released, the task's fencing token moves on (the old
        copy's token is stale at once: :meth:`current_fence`) and the task is
        runnable at once as in :meth:`yield_lease`. A late ping from the old
        owner then answers ``stolen``. Rows another transaction holds are
        skipped (PostgreSQL), at most ``limit`` tasks per step."""
        ...

    def current_fence(self, task_id: int) -> int | None:
        """The task's fencing token now (``None``: no such task). It moves on
        with every start the guard grants (the start's token) and whenever a
        run is taken from its copy (stolen, yielded, given up by a copy that
        fenced itself, ended with its worker): a copy whose token is not the
        current one no longer owns its run. One read by primary key."""
        ...

    def publish_lease_terms(
        self, *, ping_timeout: timedelta, grace: timedelta, holder: str
    ) -> LeaseTerms:
        """The monitor's steal settings, written for the workers (one row;
        written only when they differ from the stored ones), with ``holder``
        and the database's instant; returns what is stored."""
        ...

    def lease_terms(self) -> LeaseTerms | None:
        """The steal settings the monitor published (:meth:`publish_lease_terms`),
        ``None`` when no monitor has yet."""
        ...
