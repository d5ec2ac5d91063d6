"""Listers, listed origins and visit statistics (:mod:`..visits`): the
origin-visit scheduler's half of the store, with the reference design's
method names (a lister written against it calls the same methods)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..visits.feedback import VisitStatusMessage
    from ..visits.model import (
        ListedOrigin,
        ListedOriginPage,
        Lister,
        OriginMetrics,
        OriginVisitStats,
    )
    from ..visits.policy import Cooldowns, VisitPolicy


class OriginStore(Protocol):
    """Listers, the origins they list, and what visits of them found."""

    def get_or_create_lister(
        self,
        name: str,
        instance_name: str = "",
        first_visits_queue_prefix: str | None = None,
        *,
        now: datetime | None = None,
    ) -> Lister:
        """The lister ``name``/``instance_name``, created (with an empty state)
        if there is none; two first callers get the same one."""
        ...

    def get_listers(self, with_first_visits_to_schedule: bool = False) -> list[Lister]:
        """Every lister, by name and instance; ``with_first_visits_to_schedule``:
        only those that finished a listing, have a queue for their first
        visits (``first_visits_queue_prefix``) and have not had them
        scheduled yet (``first_visits_scheduled_at`` unset)."""
        ...

    def get_lister(self, name: str, instance_name: str | None = None) -> Lister | None:
        """The lister ``name``/``instance_name`` (``None``: the empty
        instance), ``None`` when there is none; nothing is created."""
        ...

    def get_listers_by_id(self, lister_ids: Sequence[str]) -> list[Lister]:
        """The listers of these ids that exist, by name and instance (an
        unknown id is left out)."""
        ...

    def get_visit_types_for_listed_origins(self, lister_id: str) -> list[str]:
        """The visit types of the origins lister ``lister_id`` listed, each
        once, in order (none for an unknown lister)."""
        ...

    def update_lister(self, lister: Lister, *, now: datetime | None = None) -> Lister:
        """Store ``lister``'s state, listing end and first-visit fields; the
        stored lister with its new ``updated`` token. Raises
        :class:`~swh_like_scheduler.domain.exceptions.StaleUpdate` (``updated``)
        when ``lister.updated`` is not the stored one (another process wrote
        since this one read), :class:`NotFound` for an unknown id; nothing
        is written then."""
        ...

    def mark_first_visits_scheduled(
        self, lister_id: str, *, now: datetime | None = None
    ) -> Lister | None:
        """Set lister ``lister_id``'s ``first_visits_scheduled_at`` to ``now``
        once every origin it lists (enabled) was scheduled at or after its
        ``last_listing_finished_at`` (``last_scheduled``), so that
        ``get_listers(with_first_visits_to_schedule=True)`` no longer gives
        it; checked and written in one transaction, the lister's row locked.
        The lister as stored, with a new ``updated`` token (a copy read
        before is stale: :meth:`update_lister` refuses it rather than write
        the mark back to null); ``None`` when nothing was written: some
        origin still waits, or the lister awaits no first visits (no
        ``first_visits_queue_prefix``, no finished listing, or marked
        already). Raises :class:`NotFound` for an unknown id,
        :class:`InvalidInput` (``lister_id``) for a value that is no id."""
        ...

    def record_listed_origins(
        self, origins: Sequence[ListedOrigin], *, now: datetime | None = None
    ) -> list[ListedOrigin]:
        """Insert or update ``origins`` in one transaction (idempotent: the
        same origins again change only ``last_seen``); each as stored, in
        the order given (an origin given twice: the last one counts).
        ``first_seen`` is kept, ``last_seen`` is ``now``; the other fields
        are the ones given. Raises :class:`InvalidInput` naming
        ``lister_id`` (no such lister), ``visit_type`` (no task type
        ``load-<visit type>`` registered) or ``origins[n].url`` (a scheme
        not in the setting ``[visits] origin_schemes``); nothing is
        written then."""
        ...

    def get_listed_origins(
        self,
        lister_id: str | None = None,
        url: str | None = None,
        urls: Sequence[str] | None = None,
        enabled: bool | None = True,
        limit: int = 1000,
        page_token: str | None = None,
    ) -> ListedOriginPage:
        """Listed origins by lister, url and visit type, at most ``limit``,
        filtered by ``lister_id``, ``url`` or ``urls``, and ``enabled``
        (``None``: both); the page's ``next_page_token`` reads the next page
        (``None``: this was the last). Pages see rows added meanwhile that
        sort after the token."""
        ...

    def origin_visit_stats_upsert(self, stats: Sequence[OriginVisitStats]) -> None:
        """Insert or update visit statistics in one transaction; a field given
        as ``None`` keeps the stored value (several writers can each set
        their own fields)."""
        ...

    def origin_visit_stats_get(self, ids: Sequence[tuple[str, str]]) -> list[OriginVisitStats]:
        """The statistics of the ``(url, visit_type)`` pairs that have any, in
        the order asked."""
        ...

    def record_visit_statuses(self, messages: Sequence[VisitStatusMessage]) -> tuple[int, int]:
        """Apply visit statuses to the statistics
        (:func:`~swh_like_scheduler.visits.feedback.apply_status`) in one
        transaction, each origin's row locked while it changes, so that two
        feeds at once (the listener and the journal client) lose neither's
        status; ``(changed, ignored)``: the messages that moved a row, and
        those that did not (unfinished, older than the last visit, repeated).
        A message that changes nothing writes nothing: an origin whose
        statuses are all unfinished (``created``, ``ongoing``) gets no row
        and no lock. A finished status of an origin no lister listed makes
        its row, as the reference's journal client does (a lister listing it
        later finds its visits: it is not taken for never visited)."""
        ...

    def peek_next_visits(
        self,
        visit_type: str,
        count: int,
        policy: VisitPolicy | str,
        *,
        now: datetime | None = None,
        lister_id: str | None = None,
        enabled: bool = True,
        cooldowns: Cooldowns | None = None,
        lister_name: str | None = None,
        lister_instance_name: str | None = None,
    ) -> list[ListedOrigin]:
        """The next ``count`` origins of ``visit_type`` that ``policy``
        (:mod:`~swh_like_scheduler.visits.policy`) would visit, out of every
        cooldown, in its order; nothing is written. ``lister_id``: that
        lister's origins only (required by ``first_visits_after_listing``);
        ``enabled=False``: disabled origins too; ``lister_name`` (and
        ``lister_instance_name``): the one lister they name (none: no
        origins; several instances of a name: refused naming
        ``lister_instance_name``). At most 10,000."""
        ...

    def grab_next_visits(
        self,
        visit_type: str,
        count: int,
        policy: VisitPolicy | str,
        *,
        now: datetime | None = None,
        lister_id: str | None = None,
        enabled: bool = True,
        cooldowns: Cooldowns | None = None,
        lister_name: str | None = None,
        lister_instance_name: str | None = None,
    ) -> list[ListedOrigin]:
        """As :meth:`peek_next_visits`, and mark them scheduled (``last_scheduled
        = now``) in the same transaction, one grab of a visit type at a time
        (several schedulers never send one origin twice within the cooldown).
        ``origins_without_last_update`` moves the visit type's queue to the
        furthest position it took."""
        ...

    def visit_scheduler_queue_position_get(self) -> dict[str, datetime]:
        """Per visit type, the position of its queue of origins without a
        forge date (an instant: an origin is due once the queue passed its
        own ``next_visit_queue_position``)."""
        ...

    def visit_scheduler_queue_position_set(self, visit_type: str, position: datetime) -> None:
        """Set the queue position of ``visit_type`` to ``position`` (back or
        forth: the operator's word; grabs then move it forth from there)."""
        ...

    def update_metrics(
        self, lister_id: str | None = None, *, now: datetime | None = None
    ) -> list[OriginMetrics]:
        """Count, per lister and visit type, the origins known, enabled, never
        visited (enabled, no successful visit: the reference's count) and
        with pending changes (a forge date after the last
        success), store the counts and return them; ``lister_id``: that
        lister only."""
        ...

    def get_metrics(
        self, lister_id: str | None = None, visit_type: str | None = None
    ) -> list[OriginMetrics]:
        """The counts the last :meth:`update_metrics` stored."""
        ...
