"""Jobs by key (seed 004, :mod:`..jobs`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..intake.jobs import Job, JobView


class JobStore(Protocol):
    """Jobs by key (seed 004, :mod:`..jobs`)."""

    def put_job(self, job: Job, *, now: datetime) -> JobView:
        """Create the job ``job.key`` or replace its instants, in one
        transaction: instants given again are kept (one that already ran
        does not run again; one cancelled before is scheduled again; one not
        run yet takes the new callback, unless its message is already
        queued), new ones get a one-shot task, and those no longer given that
        have not started are cancelled (one whose run the start guard has
        started goes on, as ``running``). Raises :class:`InvalidInput`
        (``callback.type``) when the callback's task type is not registered;
        nothing is written then."""
        ...

    def get_job(self, key: str) -> JobView | None:
        """Every instant the job ever had, with its task and latest run; ``None``
        for an unknown key."""
        ...

    def delete_job(self, key: str, *, now: datetime) -> JobView | None:
        """Cancel the job's instants that have not run (one running goes on);
        ``None`` for an unknown key. The instants stay, as history."""
        ...
