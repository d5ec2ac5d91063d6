"""``swh scheduler schedule-recurrent``: keep each visit type's Celery queue
filled with the visits its policies choose (:mod:`..visits.recurrent`)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import TYPE_CHECKING

import click

from ..domain.exceptions import InvalidInput, SchedulerError
from ..plumbing.outage import Outage
from .base import CliContext, Failed, emit_json, now, pass_cli
from .daemon import app_options, database_only, start_daemon

if TYPE_CHECKING:  # the daemons' modules load when a command runs
    from ..recurrent.first_visits import FirstVisitsPass

logger = logging.getLogger("swh_like_scheduler.recurrent.scheduler")


@click.command("schedule-recurrent")
@click.option(
    "--visit-type",
    "visit_types",
    multiple=True,
    help="Only this visit type (repeatable; default: every type with a load-TYPE task type).",
)
@click.option(
    "--period",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between steps.",
)
@click.option("--once", is_flag=True, help="One step, print what it did, and exit.")
@click.option(
    "--update-metrics-every",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Seconds between two counts of the origins (origin update-metrics); 0: never.",
)
@click.option(
    "--first-visits/--no-first-visits",
    default=True,
    show_default=True,
    help="Each step, first send the first visits of listers with a first-visits queue "
    "prefix to their own queues (origin schedule-first-visits).",
)
@app_options(broker_help="Celery broker the visits are sent to")
@click.option("--json", "as_json", is_flag=True, help="With --once: print JSON.")
@pass_cli
def schedule_recurrent(
    cli: CliContext,
    visit_types: tuple[str, ...],
    period: float,
    once: bool,
    update_metrics_every: float,
    first_visits: bool,
    app_spec: str | None,
    broker_url: str | None,
    as_json: bool,
) -> None:
    """Send the visits of listed origins, per visit type, up to the queue
    limit of task type load-TYPE, by the mix of policies of the
    configuration's [visits] table; mark them scheduled. Each step first
    sends the first visits of new listings (--no-first-visits: not)."""
    from ..broker.port import CeleryBroker
    from ..recurrent.first_visits import schedule_first_visits
    from ..recurrent.scheduler import VisitTypePass, schedule_step, visit_types_of
    from ..visits.model import visit_task_type, visit_type_name

    app = start_daemon(cli, "schedule-recurrent", app_spec=app_spec, broker_url=broker_url).app
    store = cli.sql_store("schedule-recurrent")
    for name in visit_types:
        visit_type_name("visit-type", name)
        if store.get_task_type(visit_task_type(name)) is None:
            raise InvalidInput(
                "visit-type", f"{name!r}: no task type {visit_task_type(name)!r} is registered"
            )
    broker = CeleryBroker(app)  # a connection per step: a restarted broker is found again

    def first() -> list[FirstVisitsPass]:
        """The first visits before the recurrent ones: a new listing's
        origins go to their own queues before a policy of the recurrent
        mix (never visited first...) sends them with the others."""
        if not first_visits:
            return []
        return schedule_first_visits(store, broker, cli.settings.visits, now())

    def step() -> list[VisitTypePass]:
        chosen = list(visit_types) or visit_types_of(store)
        return schedule_step(store, broker, chosen, cli.settings.visits, now())

    if once:
        firsts = first()
        done = step()
        if as_json:
            emit_json([d.to_dict() for d in done])  # (first visits: logged)
        else:
            _echo_first_visits(firsts)
            for d in done:
                outcome = d.skipped or f"{d.waiting} waiting, room {d.room}, sent {d.sent}"
                click.echo(f"{d.visit_type}: {outcome} {d.grabbed or ''}".rstrip())
        if any(d.failed for d in done) or any(f.failed for f in firsts):
            raise click.exceptions.Exit(1)
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    outage = Outage(logger, "schedule-recurrent step")
    counted = Outage(logger, "origin metrics")
    firsts_outage = Outage(logger, "first visits step")
    count_due = time.monotonic()
    while not stop.is_set():
        started, full = time.monotonic(), False
        try:
            firsts = first()
            failed_firsts = [f.skipped for f in firsts if f.failed]
            if failed_firsts:
                raise SchedulerError(str(failed_firsts[0]))
            full = any(f.full for f in firsts)
        except SchedulerError as error:  # the recurrent step goes on
            firsts_outage.failed(error)
        else:
            firsts_outage.ok()
        try:
            done = step()
            failed = [d.skipped for d in done if d.failed]
            if failed:
                raise SchedulerError(str(failed[0]))
            full = full or any(d.full for d in done)  # a large room: the next step at once
        except SchedulerError as error:  # the database or the broker: try again
            outage.failed(error)
        else:
            outage.ok()
        if update_metrics_every and time.monotonic() >= count_due:
            count_due = time.monotonic() + update_metrics_every
            try:
                store.update_metrics(now=now())
            except SchedulerError as error:
                counted.failed(error)
            else:
                counted.ok()
        if not full:
            stop.wait(max(0.0, period - (time.monotonic() - started)))


def _echo_first_visits(done: list[FirstVisitsPass]) -> None:
    for d in done:
        sent = ", ".join(f"{queue} {n}" for queue, n in d.sent.items()) or "nothing"
        outcome = d.skipped or f"sent {sent}" + ("; all scheduled" if d.marked else "")
        click.echo(f"first visits of {d.lister}: {outcome}")


@click.command("schedule-first-visits")
@click.option(
    "--period",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between steps.",
)
@click.option("--once", is_flag=True, help="One step, print what it did, and exit.")
@app_options(broker_help="Celery broker the visits are sent to")
@click.option("--json", "as_json", is_flag=True, help="With --once: print JSON.")
@pass_cli
def schedule_first_visits_command(
    cli: CliContext,
    period: float,
    once: bool,
    app_spec: str | None,
    broker_url: str | None,
    as_json: bool,
) -> None:
    """Send the first visits of each lister with a first-visits queue prefix
    and a finished listing to queues PREFIX:BACKEND-NAME (one per visit
    type), up to each queue's limit; once all its origins were scheduled
    after its last listing, mark the lister (first_visits_scheduled_at).
    schedule-recurrent does this each step too."""
    from ..broker.port import CeleryBroker
    from ..recurrent.first_visits import schedule_first_visits

    name = "schedule-first-visits"
    app = start_daemon(cli, name, app_spec=app_spec, broker_url=broker_url).app
    store = cli.sql_store(name)
    broker = CeleryBroker(app)  # a connection per step: a restarted broker is found again
    if once:
        done = schedule_first_visits(store, broker, cli.settings.visits, now())
        if as_json:
            emit_json([d.to_dict() for d in done])
        else:
            _echo_first_visits(done)
            if not done:
                click.echo("no lister awaits its first visits")
        if any(d.failed for d in done):
            raise click.exceptions.Exit(1)
        return
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    outage = Outage(logger, f"{name} step")
    while not stop.is_set():
        started = time.monotonic()
        full = False
        try:
            done = schedule_first_visits(store, broker, cli.settings.visits, now())
            failed = [d.skipped for d in done if d.failed]
            if failed:
                raise SchedulerError(str(failed[0]))
            full = any(d.full for d in done)  # a large room: the next step at once
        except SchedulerError as error:  # the database or the broker: try again
            outage.failed(error)
        else:
            outage.ok()
        if not full:
            stop.wait(max(0.0, period - (time.monotonic() - started)))


@click.command("journal-client")
@click.option(
    "--broker", "brokers", multiple=True, required=True, help="Kafka bootstrap server (repeatable)."
)
@click.option("--group-id", default="swh-scheduler-journal-client", show_default=True)
@click.option("--prefix", default="swh.journal.objects", show_default=True, help="Topic prefix.")
@click.option(
    "--consumer-setting",
    "consumer_settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A librdkafka setting (security.protocol=SSL...; repeatable).",
)
@click.option("--batch", type=click.IntRange(1, 10_000), default=500, show_default=True)
@click.option(
    "--wait",
    type=click.FloatRange(0.1, 600),
    default=10.0,
    show_default=True,
    help="With --once: the longest wait for a first message, in seconds.",
)
@click.option("--once", is_flag=True, help="One batch, print what it did, and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --once: print JSON.")
@pass_cli
def journal_client(
    cli: CliContext,
    brokers: tuple[str, ...],
    group_id: str,
    prefix: str,
    consumer_settings: tuple[str, ...],
    batch: int,
    wait: float,
    once: bool,
    as_json: bool,
) -> None:
    """Apply the visit statuses of the archive's Kafka journal
    (PREFIX.origin_visit_status) to the visit statistics."""
    from ..recurrent.journal import journal_step, kafka_consumer, unreachable

    database_only(cli, "journal-client")
    logger.info("journal-client: Kafka %s, topic %s.origin_visit_status", ",".join(brokers), prefix)
    settings = {}
    for item in consumer_settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInput("consumer-setting", f"{item!r} is not KEY=VALUE")
        settings[key] = value
    store = cli.sql_store("journal-client")
    consumer = kafka_consumer(brokers, group_id=group_id, prefix=prefix, settings=settings)
    try:
        problem = unreachable(consumer, timeout=wait)
        if problem is not None and once:
            raise Failed(f"journal-client: cannot reach Kafka at {','.join(brokers)}: {problem}")
        if problem is not None:  # a daemon waits for it
            logger.error("cannot reach Kafka at %s yet: %s", ",".join(brokers), problem)
        if once:
            done = journal_step(store, consumer, batch=batch, timeout=wait)
            if as_json:
                emit_json(done.to_dict())
            else:
                click.echo(
                    f"received {done.received}, changed {done.changed}, "
                    f"ignored {done.ignored}, unreadable {done.unreadable}"
                    + (f", offsets not committed {done.uncommitted}" if done.uncommitted else "")
                )
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        outage = Outage(logger, "journal-client step")
        while not stop.is_set():
            try:
                journal_step(store, consumer, batch=batch)
            except SchedulerError as error:  # the database: the batch comes again
                outage.failed(error)
                stop.wait(5.0)
            else:
                outage.ok()
    finally:
        consumer.close()
