"""Actions on every task a filter matches, in batches."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from .values import BulkAction, BulkFilter, BulkReport


class BulkStore(Protocol):
    """Disable, enable, cancel or delete the tasks a :class:`BulkFilter`
    matches, however many: a call reads a bounded window of them (keyset
    by id), the caller goes on with the report's ``next_after_id``."""

    def preview_bulk(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        *,
        now: datetime,
        after_id: int = 0,
        scan: int = 10_000,
    ) -> BulkReport:
        """What :meth:`apply_bulk` would find, writing nothing: among the
        tasks with ``id > after_id`` (at most ``scan`` of those the
        filter's type, status, key prefix and ids select, by increasing
        id), how many match every criterion (conditions computed at
        ``now``) and are in a status the action applies to (``matched``),
        how many of those it would hold (``held``: delete of a task with an
        open run), the first ids (``sample``), and ``next_after_id``
        (``None`` when the window reached the last task)."""
        ...

    def apply_bulk(
        self,
        action: BulkAction,
        criteria: BulkFilter,
        *,
        now: datetime,
        after_id: int = 0,
        scan: int = 10_000,
        batch_size: int = 1000,
    ) -> BulkReport:
        """Apply ``action`` to the tasks :meth:`preview_bulk` would match,
        ``batch_size`` ids per transaction, each batch checking the whole
        filter again on the rows it locks, so that a task that changed since
        it was read is left as it is (counted in ``held``).

        - ``disable``: waiting or scheduled tasks become ``disabled`` (an
          open run finishes), as :meth:`disable_tasks`;
        - ``enable``: disabled tasks become ``waiting`` with their
          ``next_run``, as :meth:`enable_tasks`; one identical to a live task
          is held (one batch is never refused for one such task);
        - ``cancel``: waiting, scheduled or disabled tasks become
          ``cancelled`` and their dispatched, unstarted runs end
          ``cancelled`` at ``now``, as :meth:`cancel_tasks`; the report's
          ``revoke`` names those runs (their messages may still be queued);
        - ``delete``: tasks and their runs are deleted, except tasks with an
          open run (``scheduled`` or ``started``), which are held: cancel
          them first.

        ``updated_at`` becomes ``now``. ``scan`` is at most
        :data:`BULK_MAX_SCAN` (:class:`InvalidInput` ``scan`` otherwise);
        ``batch_size`` between 1 and 10,000."""
        ...
