"""``journal-client``: visit statuses from the archive's Kafka journal
(topic ``<prefix>.origin_visit_status``) into the visit statistics.

A message's value is msgpack: a map with ``origin``, ``visit``, ``date``,
``type`` (the visit type), ``status``, ``snapshot`` (20 bytes or nil) and
``metadata``. Dates come as msgpack timestamps, or, from older producers,
as ``{"__datetime__": true, "s": "<ISO 8601>"}`` maps; both are read.
Fields this client does not know are ignored (a newer producer adds some).

One step (:func:`journal_step`) takes a batch, applies the statuses with
:meth:`~swh_like_scheduler.store.SchedulerStore.record_visit_statuses` (one
transaction), then commits the batch's offsets: a crash between the two
re-delivers the batch, which changes nothing the second time (a status no
newer than the origin's last visit is ignored); a database failure moves
the consumer back to the batch's first offsets, so the next step reads it
again. A message that cannot be
read (not msgpack, nested deeper than msgpack unpacks, a date no calendar
holds, a field of the wrong type or missing, a status the store refuses) is
logged with its topic, partition and offset, counted, and skipped, and its
offset is committed with the batch: one message never holds the stream back.
When the store refuses a batch as a value (:class:`InvalidInput`), the
batch's statuses are applied one at a time, in date order (what the batch
would have done), and only the refused ones skipped.

The Kafka client's own failures do not stop the client: a batch that
cannot be read (:class:`JournalUnavailable`, a :class:`SchedulerError` the
daemon waits out like a database outage) is read again later; a commit
that fails (the coordinator gone, a rebalance under way) is logged and the
step reports the batch ``uncommitted``: its statuses are applied, the next
commit covers its offsets, and should the consumer restart or lose the
partition first, the batch is read again and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.exceptions import InvalidInput, SchedulerError
from ..visits.feedback import VisitStatusMessage
from ..visits.intake import STATUS_FIELDS, status_from_input

if TYPE_CHECKING:  # the store is a room above: a type only
    from ..store import SchedulerStore

logger = logging.getLogger(__name__)

#: the journal's topic prefix, and the object type this client reads
DEFAULT_PREFIX = "swh.journal.objects"
OBJECT_TYPE = "origin_visit_status"
DEFAULT_GROUP = "swh-scheduler-journal-client"


class JournalUnavailable(SchedulerError):
    """The Kafka client could not read a batch (a broker unreachable, a
    fatal consumer error): nothing was applied, the step can be retried."""


def _kafka_errors() -> tuple[type[Exception], ...]:
    """The Kafka client's exception classes (none without the client)."""
    try:
        from confluent_kafka import KafkaException
    except ImportError:  # pragma: no cover (the journal extra is missing)
        return ()
    return (KafkaException,)


def _nothing_to_commit(exc: Exception) -> bool:
    """``exc`` says there was no offset to commit (every message of the
    batch was an error event): not a failure."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    return getattr(error, "code", lambda: None)() == KafkaError._NO_OFFSET


class JournalMessage(Protocol):
    """What a Kafka client hands over per message (confluent-kafka's ``Message``)."""

    def error(self) -> Any: ...
    def value(self) -> bytes | None: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...


class JournalConsumer(Protocol):
    """The three calls a step makes of a Kafka consumer."""

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]: ...
    def commit(self, *args: Any, **kwargs: Any) -> Any: ...
    def seek(self, partition: Any) -> None: ...
    def close(self) -> None: ...


def _old_datetime(value: dict[Any, Any]) -> Any:
    if value.get("__datetime__") is True and isinstance(value.get("s"), str):
        try:
            return datetime.fromisoformat(value["s"])
        except ValueError:  # left as the map: the date's check names it
            return value
    return value


def decode_value(data: bytes) -> Mapping[str, Any]:
    """A journal message's value (:class:`InvalidInput` ``value`` when it is
    not a msgpack map). Timestamps stay msgpack's own: :func:`status_of`
    turns the date into a date-time, refusing one that no calendar holds."""
    import msgpack

    try:
        value = msgpack.unpackb(
            data, raw=False, timestamp=0, strict_map_key=False, object_hook=_old_datetime
        )
    except msgpack.StackError:
        raise InvalidInput("value", "is nested deeper than msgpack unpacks") from None
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError) as exc:
        raise InvalidInput("value", f"is not msgpack ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidInput("value", f"is a {type(value).__name__}, not a map")
    return value


def _timestamp(value: Any) -> datetime:
    """A msgpack timestamp as an aware date-time (``InvalidInput`` ``date``
    when it lies outside the years 1-9999 that a date-time holds)."""
    try:
        return value.to_datetime()
    except (OverflowError, ValueError, OSError):
        raise InvalidInput(
            "date",
            f"the msgpack timestamp {value.seconds} s from 1970 is outside the years 1-9999",
        ) from None


def status_of(value: Mapping[str, Any]) -> VisitStatusMessage:
    """The visit status a decoded journal value holds."""
    import msgpack

    known = {k: v for k, v in value.items() if k in STATUS_FIELDS}
    date = known.get("date")
    if isinstance(date, msgpack.Timestamp):
        date = _timestamp(date)
    if isinstance(date, datetime):  # naive: left for the check to refuse
        known["date"] = (date if date.tzinfo is None else date.astimezone(UTC)).isoformat()
    return status_from_input(known)


@dataclass(frozen=True)
class JournalStep:
    """What one step did: messages received, statuses that moved a row,
    statuses that changed nothing, messages skipped as unreadable."""

    received: int = 0
    changed: int = 0
    ignored: int = 0
    unreadable: int = 0
    #: messages applied whose offsets the Kafka client failed to commit
    uncommitted: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(vars(self))


def _where(message: JournalMessage) -> str:
    return f"{message.topic()}[{message.partition()}]@{message.offset()}"


def read_batch(messages: Sequence[JournalMessage]) -> tuple[list[VisitStatusMessage], int]:
    """The statuses of ``messages``, and how many were unreadable (logged)."""
    read, unreadable = _read(messages)
    return [status for _, status in read], unreadable


def _read(
    messages: Sequence[JournalMessage],
) -> tuple[list[tuple[JournalMessage, VisitStatusMessage]], int]:
    read: list[tuple[JournalMessage, VisitStatusMessage]] = []
    unreadable = 0
    for message in messages:
        error = message.error()
        if error is not None:
            if getattr(error, "code", lambda: None)() == _partition_eof():
                continue
            logger.warning("journal: %s: %s", _where(message), error)
            unreadable += 1
            continue
        data = message.value()
        try:
            if data is None:
                raise InvalidInput("value", "is empty (a tombstone)")
            read.append((message, status_of(decode_value(data))))
        except InvalidInput as refused:
            logger.warning("journal: %s skipped: %s", _where(message), refused)
            unreadable += 1
        except Exception as exc:  # reading is pure: whatever it raises is the message's
            logger.warning("journal: %s skipped: %s: %s", _where(message), type(exc).__name__, exc)
            unreadable += 1
    return read, unreadable


def _apply(
    store: SchedulerStore, read: Sequence[tuple[JournalMessage, VisitStatusMessage]]
) -> tuple[int, int, int]:
    """Apply the statuses of ``read``: ``(changed, ignored, refused)``. A
    batch the store refuses as a value is applied one status at a time in
    date order, each refused one logged and skipped; an outage propagates."""
    if not read:
        return 0, 0, 0
    try:
        changed, ignored = store.record_visit_statuses([status for _, status in read])
        return changed, ignored, 0
    except InvalidInput as refused:
        logger.warning("journal: a batch of %d refused (%s): one at a time", len(read), refused)
    changed = ignored = refused_count = 0
    for message, status in sorted(read, key=lambda pair: pair[1].date):
        try:
            one_changed, one_ignored = store.record_visit_statuses([status])
        except InvalidInput as refused:
            logger.warning("journal: %s skipped: %s", _where(message), refused)
            refused_count += 1
        else:
            changed, ignored = changed + one_changed, ignored + one_ignored
    return changed, ignored, refused_count


def _partition_eof() -> Any:
    try:
        from confluent_kafka import KafkaError
    except ImportError:  # pragma: no cover (the journal extra is missing)
        return None
    return KafkaError._PARTITION_EOF


def journal_step(
    store: SchedulerStore,
    consumer: JournalConsumer,
    *,
    batch: int = 500,
    timeout: float = 1.0,
) -> JournalStep:
    """Read up to ``batch`` messages (waiting at most ``timeout`` s), apply
    their statuses, then commit their offsets (module doc)."""
    try:
        messages = consumer.consume(num_messages=batch, timeout=timeout)
    except _kafka_errors() as exc:
        raise JournalUnavailable(f"journal: reading a batch failed: {exc}") from exc
    if not messages:
        return JournalStep()
    read, unreadable = _read(messages)
    try:
        changed, ignored, refused = _apply(store, read)
    except SchedulerError:
        rewind(consumer, messages)  # the database failed: this batch comes again
        raise
    done = JournalStep(len(messages), changed, ignored, unreadable + refused)
    try:
        consumer.commit(asynchronous=False)
    except _kafka_errors() as exc:
        if _nothing_to_commit(exc):
            return done
        logger.warning(
            "journal: committing the offsets of %d messages failed (%s): their statuses "
            "are applied; the next commit covers them, or they are read again after a "
            "restart or a rebalance and change nothing",
            len(messages),
            exc,
        )
        return replace(done, uncommitted=len(messages))
    return done


def rewind(consumer: JournalConsumer, messages: Sequence[JournalMessage]) -> None:
    """Move ``consumer`` back to the first offset of ``messages`` in each
    partition, so that the next step reads them again."""
    from confluent_kafka import TopicPartition

    first: dict[tuple[str, int], int] = {}
    for message in messages:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None or offset < 0:
            continue
        key = (topic, partition)
        first[key] = min(first.get(key, offset), offset)
    for (topic, partition), offset in sorted(first.items()):
        consumer.seek(TopicPartition(topic, partition, offset))


def unreachable(consumer: Any, *, timeout: float) -> str | None:
    """Why the Kafka brokers of ``consumer`` cannot be reached (the cluster's
    metadata not read within ``timeout`` seconds), or ``None`` when they can."""
    try:
        consumer.list_topics(timeout=timeout)
    except Exception as exc:  # KafkaException: transport failure, timed out
        return str(exc) or type(exc).__name__
    return None


def kafka_consumer(
    brokers: Sequence[str],
    *,
    group_id: str = DEFAULT_GROUP,
    prefix: str = DEFAULT_PREFIX,
    settings: Mapping[str, str] | None = None,
) -> JournalConsumer:
    """A confluent-kafka consumer of ``<prefix>.origin_visit_status``, from
    the earliest offset for a new group, committing only when told."""
    try:
        from confluent_kafka import Consumer
    except ImportError:
        raise InvalidInput(
            "journal-client",
            "needs the Kafka client: pip install 'swh-like-scheduler[journal]'",
        ) from None
    config: dict[str, Any] = {
        "bootstrap.servers": ",".join(brokers),
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        **(settings or {}),
    }
    try:
        consumer = Consumer(config)
    except Exception as exc:  # librdkafka refuses a setting: KafkaException
        raise InvalidInput("consumer-setting", str(exc)) from None
    consumer.subscribe([f"{prefix}.{OBJECT_TYPE}"])
    return consumer
