"""The PostgreSQL claim: pick, mark and create runs in one statement.

Shape of the statement (one round trip whatever the number of classes)::

    WITH picked_high AS (SELECT id, 0 AS rank FROM task WHERE <ready, high>
                         ORDER BY deadline, id LIMIT n FOR UPDATE SKIP LOCKED),
         picked_normal AS (... LIMIT n - (SELECT count(*) FROM picked_high) ...),
         picked_low AS (... LIMIT n - <both counts> ...),
         picked AS (SELECT * FROM picked_high UNION ALL ... ),
         updated AS (UPDATE task SET status = 'scheduled', updated_at = :now
                     FROM picked WHERE task.id = picked.id
                     RETURNING task.id, picked.rank, ..., <md5 of the run's name>),
         claimed AS (SELECT ..., <backend id from the md5> FROM updated),
         runs AS (INSERT INTO task_run (...) SELECT ... FROM claimed)
    SELECT ... FROM claimed ORDER BY rank, deadline, id

The statement is built and compiled once per task type, set of classes,
sparse classes and live nodes (:func:`prepared_claim`); ``now``, the limit
and the bound are parameters, and its rows are read as the driver returns
them. Building and compiling it, then converting its rows, cost more
Python time per claimed task than publishing its message did.

Each class keeps its own index scan (``ix_task_dispatch_order``) and stops
at the rows it needs, so the cost does not grow with the number of ready
tasks. The run's ``backend_id`` is computed by :func:`backend_id_sql`, the
SQL twin of :func:`~swh_like_scheduler.domain.model.run_backend_id`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..domain.model import DUE_MARGIN, DispatchOrder, Priority, RunStatus, ScheduleKind, TaskStatus
from .sql_long import LONG_SECONDS, LONG_SPAN, Seconds, is_short
from .tables import UTCDateTime
from .tables import task as task_t
from .tables import task_run as run_t


def backend_id_sql(
    task_id: sa.ColumnElement[Any],
    slot: sa.ColumnElement[Any],
    namespace: sa.ColumnElement[Any] | None = None,
) -> Any:
    """``run_backend_id(task_id, slot, namespace)`` in PostgreSQL: the
    version-3 UUID (MD5 of the namespace's bytes and ``"<id>@<slot µs since
    epoch>"``); ``namespace`` is the bytes of the installation's namespace
    (default :data:`NAMESPACE`, the statement's parameter)."""
    return uuid3_text(name_digest(task_id, slot, namespace))


def name_digest(
    task_id: sa.ColumnElement[Any],
    slot: sa.ColumnElement[Any],
    namespace: sa.ColumnElement[Any] | None = None,
) -> Any:
    """The MD5 (hex) of a run's UUID name, before the version bits are set."""
    micros = sa.cast(sa.extract("epoch", slot) * 1_000_000, sa.BigInteger)
    name = sa.cast(task_id, sa.Text) + "@" + sa.cast(micros, sa.Text)
    space = NAMESPACE if namespace is None else namespace
    return sa.func.md5(space.op("||")(sa.func.convert_to(name, "UTF8")))


def uuid3_text(digest: Any) -> Any:
    """The UUID text of an MD5 hex digest with the version-3 bits set:
    hex digit 13 is the version (3), digit 17 carries the variant (10xx)."""
    variant_digit = sa.func.substr(
        "89ab",
        sa.cast(sa.literal("x") + sa.func.substr(digest, 17, 1), postgresql.BIT(4))
        .cast(sa.Integer)
        .op("&")(3)
        + 1,
        1,
    )
    hex_text = (
        sa.func.substr(digest, 1, 12)
        + "3"
        + sa.func.substr(digest, 14, 3)
        + variant_digit
        + sa.func.substr(digest, 18)
    )
    return sa.cast(sa.cast(hex_text, postgresql.UUID), sa.Text)


#: A class with fewer ready tasks than this many times a claim's limit is
#: claimed from its ready set (one range of ``ix_task_ready``, then a sort);
#: a class with more, by walking ``ix_task_dispatch_order`` until the limit
#: is reached. Either way a claim reads a bounded number of index entries:
#: walking the dispatch order when few tasks are due would read every task
#: not due yet (seconds on a table of millions).
SPARSE_FACTOR = 10


def claimable(
    dialect_name: str, nodes: Sequence[str] | None, short_only: bool = False
) -> sa.ColumnElement[bool]:
    """Tasks a claim may take besides being ready: runnable on ``nodes``
    (:func:`runnable_on`) and, with ``short_only``, no long run (as long as
    :data:`~.sql_long.LONG_SPAN`, given at each run: the slots left are kept
    for shorter tasks, :mod:`~..dispatch.reserve`)."""
    runnable = runnable_on(dialect_name, nodes)
    return sa.and_(runnable, is_short()) if short_only else runnable


def runnable_on(dialect_name: str, nodes: Sequence[str] | None) -> sa.ColumnElement[bool]:
    """Tasks that may go to one of ``nodes`` (the live workers' nodes).

    Unconstrained tasks always qualify; a task with ``dont_run_on_nodes``
    qualifies only if some live node is not banned — and never when the
    live nodes are unknown (``nodes is None``)."""
    banned = task_t.c.dont_run_on_nodes
    if dialect_name == "postgresql":
        unconstrained = banned == sa.cast(sa.literal("[]"), postgresql.JSONB)
        if not nodes:
            return unconstrained
        everyone = sa.cast(sa.literal(json.dumps(sorted(nodes))), postgresql.JSONB)
        return sa.or_(unconstrained, sa.not_(banned.op("@>", is_comparison=True)(everyone)))
    unconstrained = sa.func.json_array_length(banned) == 0
    if not nodes:
        return unconstrained
    # one term whatever the number of nodes (SQLite holds an expression's
    # depth to 1,000: a term per node failed past some 490 nodes)
    live = sa.func.json_each(sa.literal(json.dumps(sorted(nodes)))).table_valued("value")
    each = sa.func.json_each(banned).table_valued("value")
    allowed = sa.exists().select_from(live).where(live.c.value.not_in(sa.select(each.c.value)))
    return sa.or_(unconstrained, allowed)


#: The parameters of the prepared statements.
NOW = sa.bindparam("claim_now", type_=UTCDateTime)
LIMIT = sa.bindparam("claim_limit", type_=sa.Integer)
BOUND = sa.bindparam("claim_bound", type_=sa.Integer)
IDS = sa.bindparam("claim_ids", type_=postgresql.ARRAY(sa.BigInteger))
#: the dispatch batch of the runs a claim creates
BATCH = sa.bindparam("claim_batch", type_=sa.BigInteger)
#: the task type of a statement built for any
TYPE = sa.bindparam("claim_type", type_=sa.Text)
#: the seed of :attr:`DispatchOrder.RANDOM` (see :func:`random_salt`)
SALT = sa.bindparam("claim_salt", type_=sa.BigInteger)
#: the instant until which a task's deadline makes it due
#: (:attr:`DispatchOrder.TRIAGE`; see :func:`order_values`)
DUE = sa.bindparam("claim_due", type_=UTCDateTime)
#: the bytes of the namespace of the run ids (the installation's, see
#: :func:`~swh_like_scheduler.store.sql_identity.run_namespace_of`)
NAMESPACE = sa.bindparam("claim_namespace", type_=sa.LargeBinary)
#: the parameters given at each run of a prepared statement
PARAMETERS = (NOW, LIMIT, BOUND, IDS, BATCH, SALT, DUE, NAMESPACE, LONG_SPAN, LONG_SECONDS)

#: a prime modulus and a multiplier of full period (Lehmer's): the product of
#: two values below the modulus fits a bigint
_MODULUS, _MULTIPLIER = 2_147_483_647, 48_271


def random_salt(now: datetime) -> int:
    """The seed of a random-order claim at ``now``: the order changes from
    one claim to the next and is the same when a claim is run again at the
    same instant (a simulation is reproducible)."""
    micros = int(now.timestamp() * 1_000_000)
    return (micros * _MULTIPLIER) % _MODULUS


def order_values(now: datetime) -> dict[str, Any]:
    """The values a claim at ``now`` gives the parameters of its order
    (:data:`SALT`, :data:`DUE`)."""
    return {"claim_salt": random_salt(now), "claim_due": now + DUE_MARGIN}


#: the columns :func:`order_keys` reads (of the task table, or of a
#: materialised copy of its ready rows)
ORDER_COLUMNS = ("id", "deadline", "next_run", "schedule_kind", "last_good_end_at", "created_at")
#: what a one-shot task's run buys in the TRIAGE order: it has no next
#: deadline (seconds, more than any interval)
_ONE_SHOT_CYCLE = 1e12


def order_keys(
    order: DispatchOrder, columns: Any
) -> tuple[sa.ColumnElement[Any], sa.ColumnElement[Any], sa.ColumnElement[Any]]:
    """The sort keys of ``order`` (then the id), from a task's
    :data:`ORDER_COLUMNS` (``columns.id``...): the same three in every
    dialect, so that picks of several classes can be unioned and the result
    sorted again by them.

    RANDOM hashes the id with :data:`SALT` (``(a | b) - (a & b)`` is their
    exclusive or, which SQLite has no operator for). TRIAGE puts the tasks
    due by :data:`DUE` first (key 0), those with the longest cycle first
    (the time from their last good end, or creation, to their deadline: for
    an adaptive task twice its interval, for a periodic one about its
    period), then the others (key 1) by deadline."""
    id_, deadline = columns.id, columns.deadline
    if order is DispatchOrder.FIFO:
        return sa.literal(0, sa.BigInteger), columns.next_run, id_
    if order is DispatchOrder.RANDOM:
        mixed = (id_.op("|")(SALT) - id_.op("&")(SALT)) % _MODULUS
        return (mixed * _MULTIPLIER) % _MODULUS, deadline, id_
    if order is DispatchOrder.TRIAGE:
        due = deadline <= DUE
        since = sa.func.coalesce(columns.last_good_end_at, columns.created_at)
        cycle = sa.case(
            (columns.schedule_kind == ScheduleKind.ONESHOT.value, _ONE_SHOT_CYCLE),
            else_=Seconds(deadline, since),
        )
        tier = sa.cast(sa.case((due, 0), else_=1), sa.BigInteger)
        return tier, sa.case((due, -cycle), else_=Seconds(deadline, NOW)), id_
    return sa.literal(0, sa.BigInteger), deadline, id_


@lru_cache(maxsize=256)
def ordered_ids_statement(
    dialect_name: str,
    priority: Priority,
    order: DispatchOrder,
    nodes: tuple[str, ...] | None,
    short_only: bool = False,
) -> sa.Select[Any]:
    """The ids of up to :data:`LIMIT` tasks of type :data:`TYPE` and class
    ``priority`` ready at :data:`NOW` and :func:`claimable` on ``nodes``, in
    ``order`` (the claim where there are no writable CTEs: SQLite)."""
    keys = order_keys(order, task_t.c)
    return (
        sa.select(task_t.c.id)
        .where(*_ready(TYPE, priority), claimable(dialect_name, nodes, short_only))
        .order_by(*keys)
        .limit(LIMIT)
    )


def _ready(task_type: Any, priority: Priority) -> list[sa.ColumnElement[bool]]:
    return [
        task_t.c.type == task_type,
        task_t.c.status == TaskStatus.WAITING.value,
        task_t.c.priority == priority.value,
        task_t.c.next_run <= NOW,
    ]


def probe_statement(task_type: str, classes: Sequence[Priority]) -> sa.Select[Any]:
    """One row: per class, the number of ready tasks at :data:`NOW`,
    counted up to :data:`BOUND`."""
    return sa.select(
        *(
            sa.select(sa.func.count())
            .select_from(
                sa.select(task_t.c.id).where(*_ready(task_type, p)).limit(BOUND).subquery()
            )
            .scalar_subquery()
            for p in classes
        )
    )


def null_if_empty(column: sa.ColumnElement[Any]) -> Any:
    """A JSON array column, NULL when it is empty (most tasks have no banned
    nodes and no blackouts: nothing to decode for them)."""
    empty = sa.cast(sa.literal("[]"), postgresql.JSONB)
    return sa.case((column == empty, sa.null()), else_=column)


def _picks(
    task_type: str,
    classes: Sequence[Priority],
    runnable: sa.ColumnElement[bool],
    sparse: Collection[Priority],
    lock: bool,
    order: DispatchOrder = DispatchOrder.DEADLINE,
) -> list[sa.CTE]:
    """Per class, a CTE of up to :data:`LIMIT` (less what the classes before
    it took) ready tasks ``(id, rank, k0, k1)`` in ``order`` (its keys:
    :func:`order_keys`); locked ``FOR UPDATE SKIP LOCKED`` with ``lock``.

    DEADLINE, TRIAGE (past its due range) and FIFO read an index in their
    order (``ix_task_dispatch_order``, ``ix_task_ready``) and stop at the
    rows they need; TRIAGE sorts the tasks due; RANDOM sorts the class's
    ready tasks (it is there to be compared with, in simulations)."""
    picks: list[sa.CTE] = []
    keys = order_keys(order, task_t.c)
    for rank, priority in enumerate(classes):
        taken = [sa.select(sa.func.count()).select_from(p).scalar_subquery() for p in picks]
        remaining: Any = LIMIT - sum(taken) if taken else LIMIT
        ready = [*_ready(task_type, priority), runnable]
        rank_column = sa.literal(rank, sa.Integer).label("rank")
        pick = sa.select(task_t.c.id, rank_column, keys[0].label("k0"), keys[1].label("k1"))
        if priority in sparse:
            # all of the class's ready tasks (fewer than the bound, the probe
            # said): ordered and limited so that the plan is a bounded range
            # scan of ix_task_ready even when the statistics are stale
            due = (
                sa.select(*(task_t.c[name] for name in ORDER_COLUMNS))
                .where(*ready)
                .order_by(task_t.c.next_run)
                .limit(BOUND)
                .cte(f"due_{priority.value}")
                .prefix_with("MATERIALIZED")
            )
            # the first ids in dispatch order are read from the materialised
            # rows (a sort of at most the bound), and only those are looked up
            # by primary key (``id = ANY(<array computed once>)``): never a
            # join of the whole ready set back to the table, whose plan with
            # stale statistics was a nested loop over both (quadratic: 146 s
            # at 50k). Twice the limit, so a claim racing another still finds
            # tasks past the ones locked by it; the conditions are checked
            # again on the locked rows (another runner may have claimed them)
            first = (
                sa.select(due.c.id)
                .order_by(*order_keys(order, due.c))
                .limit(LIMIT * 2)
                .subquery(f"first_{priority.value}")
            )
            # (an array expression, computed once: ``= ANY(subquery)`` would
            # compare with each row of a subquery instead)
            ids = sa.func.coalesce(
                sa.select(sa.func.array_agg(first.c.id)).scalar_subquery(),
                sa.cast(sa.literal("{}"), postgresql.ARRAY(sa.BigInteger)),
            )
            pick = pick.where(task_t.c.id == sa.any_(ids)).where(*ready).order_by(*keys)
            if lock:
                pick = pick.with_for_update(of=task_t, skip_locked=True)
        elif order is DispatchOrder.TRIAGE:
            # two ranges of ix_task_dispatch_order: the tasks due (their
            # range sorted by the order's keys: under overload, every task
            # due), then the others, read in deadline order
            for part, in_range, by in (
                ("due", task_t.c.deadline <= DUE, keys),
                ("later", task_t.c.deadline > DUE, (task_t.c.deadline, task_t.c.id)),
            ):
                taken = [sa.select(sa.func.count()).select_from(p).scalar_subquery() for p in picks]
                part_pick = pick.where(*ready, in_range).order_by(*by)
                if lock:
                    part_pick = part_pick.with_for_update(skip_locked=True)
                limit: Any = LIMIT - sum(taken) if taken else LIMIT
                picks.append(part_pick.limit(limit).cte(f"picked_{priority.value}_{part}"))
            continue
        else:
            pick = pick.where(*ready).order_by(*keys)
            if lock:
                pick = pick.with_for_update(skip_locked=True)
        picks.append(pick.limit(remaining).cte(f"picked_{priority.value}"))
    return picks


def candidates_statement(
    task_type: str,
    classes: Sequence[Priority],
    runnable: sa.ColumnElement[bool],
    sparse: Collection[Priority] = (),
    order: DispatchOrder = DispatchOrder.DEADLINE,
) -> sa.Select[Any]:
    """The ids of the tasks :func:`claim_statement` would claim (the same
    picks, without locks), in dispatch order: a cheap read that lets
    several claims share out the next tasks by id (:data:`IDS`)."""
    picks = _picks(task_type, classes, runnable, sparse, False, order)
    picked = sa.union_all(*(sa.select(p.c.id, p.c.rank, p.c.k0, p.c.k1) for p in picks)).cte()
    return sa.select(picked.c.id).order_by(picked.c.rank, picked.c.k0, picked.c.k1, picked.c.id)


def _picked_among(
    task_type: str, classes: Sequence[Priority], runnable: sa.ColumnElement[bool]
) -> sa.CTE:
    """The tasks of :data:`IDS` still ready and not locked by another claim,
    locked, with their position in the list as rank."""
    wanted = (
        sa.func.unnest(sa.cast(IDS, postgresql.ARRAY(sa.BigInteger)))
        .table_valued("id", with_ordinality="position")
        .render_derived(name="wanted")
    )
    return (
        sa.select(task_t.c.id, wanted.c.position.label("rank"))
        .join(wanted, wanted.c.id == task_t.c.id)
        .where(
            task_t.c.type == task_type,
            task_t.c.status == TaskStatus.WAITING.value,
            sa.or_(*(task_t.c.priority == p.value for p in classes)),
            task_t.c.next_run <= NOW,
            runnable,
        )
        .order_by(wanted.c.position)
        .limit(LIMIT)
        .with_for_update(of=task_t, skip_locked=True)
        .cte("picked")
    )


def claim_statement(
    task_type: str,
    classes: Sequence[Priority],
    runnable: sa.ColumnElement[bool],
    sparse: Collection[Priority] = (),
    among: bool = False,
    order: DispatchOrder = DispatchOrder.DEADLINE,
) -> sa.Select[Any]:
    """The statement above, claiming up to :data:`LIMIT` tasks ready at
    :data:`NOW`, their runs in dispatch batch :data:`BATCH`: its rows are
    ``(id, next_run, deadline, arguments (JSON text), dont_run_on_nodes,
    backend_id, tz, blackouts)`` in dispatch order (``dont_run_on_nodes``
    and ``blackouts`` decoded, NULL when empty). The
    classes in ``sparse`` (fewer than :data:`BOUND` ready tasks, as counted by
    :func:`probe_statement` with the same bound) are picked from their
    materialised ready set. With ``among``, the tasks are those of
    :data:`IDS` (see :func:`candidates_statement`), in its order; else
    in ``order`` (within each class). The runs' ids are in the namespace
    :data:`NAMESPACE` (a parameter: the installation's)."""
    if among:
        picked = _picked_among(task_type, classes, runnable)
        ranked = [picked.c.rank]
    else:
        picks = _picks(task_type, classes, runnable, sparse, True, order)
        picked = sa.union_all(*(sa.select(p.c.id, p.c.rank, p.c.k0, p.c.k1) for p in picks)).cte(
            "picked"
        )
        ranked = [picked.c.rank, picked.c.k0, picked.c.k1]
    updated = (
        sa.update(task_t)
        .where(task_t.c.id == picked.c.id)
        .values(status=TaskStatus.SCHEDULED.value, updated_at=NOW)
        .returning(
            task_t.c.id,
            *(c.label(f"sort{i}") for i, c in enumerate(ranked)),
            task_t.c.next_run,
            task_t.c.deadline,
            # as text: the runner decodes it where it builds the message
            sa.cast(task_t.c.arguments, sa.Text).label("arguments"),
            null_if_empty(task_t.c.dont_run_on_nodes).label("dont_run_on_nodes"),
            name_digest(task_t.c.id, task_t.c.next_run).label("digest"),
            task_t.c.tz,
            null_if_empty(task_t.c.blackout_periods).label("blackouts"),
        )
        .cte("updated")
    )
    # the digest is computed once per row, its UUID text from the column
    claimed = sa.select(
        *(c for c in updated.c if c.name != "digest"),
        uuid3_text(updated.c.digest).label("backend_id"),
    ).cte("claimed")
    runs = (
        sa.insert(run_t)
        .from_select(
            ["task_id", "backend_id", "slot", "scheduled", "status", "history", "batch_id"],
            sa.select(
                claimed.c.id,
                claimed.c.backend_id,
                claimed.c.next_run,
                NOW,
                sa.literal(RunStatus.SCHEDULED.value),
                sa.cast(sa.literal("[]"), postgresql.JSONB),
                BATCH,
            ),
        )
        .cte("runs")
    )
    return (
        sa.select(
            claimed.c.id,
            claimed.c.next_run,
            claimed.c.deadline,
            claimed.c.arguments,
            claimed.c.dont_run_on_nodes,
            claimed.c.backend_id,
            claimed.c.tz,
            claimed.c.blackouts,
        )
        .add_cte(runs)
        .order_by(*(claimed.c[f"sort{i}"] for i in range(len(ranked))), claimed.c.id)
    )


@dataclass(frozen=True)
class Prepared:
    """A statement compiled once, run many times with new values for its
    parameters; rows come back as the driver reads them (tuples of
    psycopg's values, with no SQLAlchemy type processing)."""

    sql: str
    #: the values compiled into the statement (task type, nodes...)
    fixed: Mapping[str, Any]
    #: name of each parameter given per run -> its bind processor (or None)
    given: Mapping[str, tuple[str, Callable[[Any], Any] | None]]

    @classmethod
    def of(cls, statement: sa.ClauseElement, dialect: sa.Dialect) -> Prepared:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, sa.sql.compiler.SQLCompiler)
        if "POSTCOMPILE" in compiled.string:  # an expanding IN: not for the driver
            raise ValueError("a prepared statement cannot hold an expanding parameter")
        given = {bind.key: bind for bind in PARAMETERS}
        fixed: dict[str, Any] = {}
        processors: dict[str, tuple[str, Callable[[Any], Any] | None]] = {}
        for bind, name in compiled.bind_names.items():
            # (the dialect's own type: an interval is native on PostgreSQL)
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if bind.key in given:
                processors[bind.key] = (name, process)
            else:
                value = bind.effective_value
                fixed[name] = process(value) if process is not None else value
        return cls(compiled.string, fixed, processors)

    def rows(self, conn: sa.Connection, **values: Any) -> Sequence[Sequence[Any]]:
        """Run the statement in ``conn``'s transaction with ``values`` for
        its parameters (by key: ``claim_now``, ...)."""
        params = dict(self.fixed)
        for key, (name, process) in self.given.items():
            value = values[key]
            params[name] = process(value) if process is not None else value
        return conn.exec_driver_sql(self.sql, params).all()


@lru_cache(maxsize=256)
def prepared_probe(dialect: sa.Dialect, task_type: str, classes: tuple[Priority, ...]) -> Prepared:
    """:func:`probe_statement`, compiled for ``dialect``."""
    return Prepared.of(probe_statement(task_type, classes), dialect)


@lru_cache(maxsize=256)
def prepared_claim(
    dialect: sa.Dialect,
    task_type: str,
    classes: tuple[Priority, ...],
    nodes: tuple[str, ...] | None,
    sparse: frozenset[Priority],
    among: bool = False,
    order: DispatchOrder = DispatchOrder.DEADLINE,
    short_only: bool = False,
) -> Prepared:
    """:func:`claim_statement` for tasks :func:`claimable` on ``nodes``,
    compiled for ``dialect``."""
    runnable = claimable(dialect.name, nodes, short_only)
    statement = claim_statement(task_type, classes, runnable, sparse, among, order)
    return Prepared.of(statement, dialect)


@lru_cache(maxsize=256)
def prepared_candidates(
    dialect: sa.Dialect,
    task_type: str,
    classes: tuple[Priority, ...],
    nodes: tuple[str, ...] | None,
    sparse: frozenset[Priority],
    order: DispatchOrder = DispatchOrder.DEADLINE,
    short_only: bool = False,
) -> Prepared:
    """:func:`candidates_statement`, compiled for ``dialect``."""
    runnable = claimable(dialect.name, nodes, short_only)
    return Prepared.of(candidates_statement(task_type, classes, runnable, sparse, order), dialect)
