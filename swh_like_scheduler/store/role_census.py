"""The condition ledger and the stored census (schedule health counted
where the data is): :class:`CensusStore`.

The census itself (:mod:`swh_like_scheduler.health`) assesses tasks with
the policy in Python; the store finds which tasks need it, keeps what it
found, and counts it with the database's own grouping."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from .values import CensusRecord, ConditionRow, ProblemEntry, ProblemQuery, StoredForecast


class CensusStore(Protocol):
    """The condition ledger (``task_condition``) and the census rows."""

    def conditions_to_assess(
        self,
        now: datetime,
        type_versions: Mapping[str, str],
        *,
        limit: int = 2000,
        after_id: int | None = None,
        since: datetime | None = None,
        retyped: Sequence[str] = (),
    ) -> list[int]:
        """Up to ``limit`` ids of tasks whose ledger row must be written
        again, in ascending order; each scan stops at ``limit`` (ask again):
        watched tasks (waiting, scheduled, disabled) without a row; rows
        assessed on other values of their task (its ``updated_at``,
        ``owner_started_at`` or status: tasks no longer watched too) or of
        their type (its ``type_versions`` fingerprint); rows whose level
        may have changed with the clock (``holds_until < now``: the level
        holds at that instant).

        With ``since``, the same found through indexes, at a cost that
        follows the changes rather than the table: tasks whose
        ``updated_at`` is at or after ``since``, rows of tasks with a run
        under way, rows due by the clock, and only for the ``retyped``
        types a comparison of fingerprints. A change written with a clock
        earlier than ``since`` is found by :meth:`sweep_conditions`.

        With ``after_id``: only watched tasks without a row and with a
        higher id, the lowest first (a first build goes on from
        :meth:`condition_frontier` at a cost that does not grow with what
        was built)."""
        ...

    def sweep_conditions(
        self, type_versions: Mapping[str, str], *, after_id: int, span: int
    ) -> list[int]:
        """The full comparison of :meth:`conditions_to_assess` (without the
        clock) over task ids in ``(after_id, after_id + span]``, and ledger
        rows of tasks that no longer exist there: a rolling sweep that
        finds what no index shows (a write that kept ``updated_at``)."""
        ...

    def condition_frontier(self) -> int:
        """The highest task id in the ledger (0: it is empty)."""
        ...

    def put_conditions(self, rows: Sequence[ConditionRow], *, now: datetime) -> None:
        """Write these rows (insert or replace, by task id) assessed at
        ``now``; a row of a task that no longer exists is dropped."""
        ...

    def drop_conditions(self, task_ids: Sequence[int]) -> int:
        """Delete the ledger rows of these tasks (no longer watched); how many."""
        ...

    def count_conditions(
        self, *, unwatched: bool = True
    ) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
        """Per type, ledger rows per level; and tasks per type and status:
        the watched ones from the ledger, the others (finished, cancelled)
        from the task table when ``unwatched``."""
        ...

    def save_census(
        self,
        *,
        at: datetime,
        conditions: Mapping[str, Mapping[str, int]],
        tasks: Mapping[tuple[str, str], int],
        assessed: int,
        took: float,
        keep: timedelta,
        versions: Mapping[str, str] | None = None,
        sweep_after: int = 0,
    ) -> CensusRecord:
        """Store a census, with the type fingerprints the ledger was brought
        to and where its sweep stands. Rows older than ``keep`` are deleted,
        and the previous row is replaced when the one before it is less
        than ``keep / 240`` older (the history stays about 240 rows)."""
        ...

    def latest_census(self) -> CensusRecord | None:
        """The latest stored census (``None``: none yet)."""
        ...

    def census_history(self, since: datetime) -> list[CensusRecord]:
        """The stored censuses at or after ``since``, oldest first."""
        ...

    def record_forecast(
        self, body: Mapping[str, Any], *, at: datetime, took: float, keep: int = 24
    ) -> StoredForecast:
        """Store a forecast from ``at`` (its JSON, and the seconds it took);
        only the latest ``keep`` (1 to 1,000) are kept. InvalidInput for a
        naive ``at``, a negative ``took`` or ``keep`` out of range."""
        ...

    def latest_forecast(self) -> StoredForecast | None:
        """The forecast recorded last (``None``: none yet)."""
        ...

    def recorded_forecasts(self, *, limit: int = 24) -> list[StoredForecast]:
        """The forecasts kept, the latest first, up to ``limit`` (1 to
        1,000; InvalidInput otherwise)."""
        ...

    def problem_page(
        self,
        query: ProblemQuery,
        *,
        offset: int = 0,
        limit: int = 50,
        known_total: int | None = None,
    ) -> tuple[list[ProblemEntry], int]:
        """Tasks that are not OK in the ledger matching ``query``, worst
        first (ERROR before WARNING, then the earliest finish-by, a task
        without one last, then by id): ``limit`` of them from ``offset``,
        and how many match in all. With ``known_total`` (how many match, as
        the caller counted them: the census) they are not counted again and
        that figure is returned. A page past the middle is read from the
        end, backwards: what a page costs grows with its distance from the
        nearer end, and the last page costs what the first does."""
        ...
