"""Helpers of the listener tests: apps, task types, tasks, a listener thread."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import services
import sqlalchemy as sa
from celery import Celery
from waiting import wait_until

import swh_like_workers.sleep  # noqa: F401 - registers the shared sleep task
from swh_like_scheduler.domain.model import ScheduleKind, Task, TaskRun, TaskType
from swh_like_scheduler.listener import Listener, ListenerOptions
from swh_like_scheduler.plumbing.celery_factory import make_app
from swh_like_scheduler.store import SQLAlchemyStore

H = timedelta(hours=1)
SLEEP_TASK = "swh_like_workers.sleep.sleep"

#: (failure_rate, eventful_rate) -> the run status the sleep task then gives
KINDS: dict[tuple[float, float], str] = {
    (0.0, 1.0): "eventful",
    (0.0, 0.0): "uneventful",
    (1.0, 1.0): "failed",
}


def db_url_of(store: SQLAlchemyStore) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def make_test_app(broker_url: str, *, store: SQLAlchemyStore | None = None, **conf: Any) -> Celery:
    """A product-configured app; with ``store``, its workers' start guard
    uses that database (as ``swh_scheduler_db_url`` in production)."""
    if store is not None:
        conf["swh_scheduler_db_url"] = db_url_of(store)
    return make_app(
        config_module=None,
        broker_url=broker_url,
        load_workers=False,
        broker_connection_timeout=3,
        broker_heartbeat=2,
        worker_hijack_root_logger=False,
        worker_send_task_events=True,
        task_send_sent_event=False,
        **conf,
    )


def new_sleep_type(store: SQLAlchemyStore) -> TaskType:
    name = f"l{uuid.uuid4().hex[:8]}"
    return store.create_task_type(
        TaskType(
            type=name,
            backend_name=SLEEP_TASK,
            queue=f"swh-test-{name}",
            default_interval=H,
            min_interval=timedelta(minutes=10),
            max_interval=timedelta(days=1),
            backoff_factor=2.0,
            num_retries=3,
        )
    )


def sleep_tasks(task_type: TaskType, per_kind: int, now: datetime) -> list[Task]:
    """``per_kind`` ready adaptive tasks for each entry of :data:`KINDS`,
    last visited one interval before ``now`` (a first good run would leave
    the interval as it is)."""
    tasks = []
    for (failure_rate, eventful_rate), _ in KINDS.items():
        for n in range(per_kind):
            tasks.append(
                Task(
                    type=task_type.type,
                    kwargs={
                        "duration": 0.01,
                        "failure_rate": failure_rate,
                        "eventful_rate": eventful_rate,
                        "seed": n,
                    },
                    schedule_kind=ScheduleKind.ADAPTIVE,
                    current_interval=H,
                    last_good_start_at=now - H,
                    next_run=now - H,
                    deadline=now + timedelta(seconds=n),
                )
            )
    return tasks


def expected_status(task: Task) -> str:
    return KINDS[(task.kwargs["failure_rate"], task.kwargs["eventful_rate"])]


def all_runs(store: SQLAlchemyStore) -> list[TaskRun]:
    from swh_like_scheduler.store import rows
    from swh_like_scheduler.store.tables import task_run

    with store.engine.connect() as conn:
        return [rows.run_from_row(r._mapping) for r in conn.execute(sa.select(task_run))]


def open_run_count(store: SQLAlchemyStore) -> int:
    with store.engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM task_run WHERE status IN ('scheduled', 'started')"
            ).scalar_one()
        )


def snapshot(store: SQLAlchemyStore) -> tuple[list[Any], list[Any]]:
    """Every task and run row, to compare the database before and after."""
    with store.engine.connect() as conn:
        tasks = [tuple(r) for r in conn.exec_driver_sql("SELECT * FROM task ORDER BY id")]
        runs = [tuple(r) for r in conn.exec_driver_sql("SELECT * FROM task_run ORDER BY id")]
    return tasks, runs


class Recorder:
    """Wraps a handler's ``handle_batch`` to keep every raw event it was given."""

    def __init__(self, listener: Listener) -> None:
        self.events: list[dict[str, Any]] = []
        handler = listener.handler
        real = handler.handle_batch

        def recording(events: Any, **kwargs: Any) -> Any:
            self.events.extend(dict(e) for e in events)
            return real(events, **kwargs)

        handler.handle_batch = recording  # type: ignore[method-assign]


@dataclass
class Running:
    listener: Listener
    thread: threading.Thread
    errors: list[BaseException]


@contextlib.contextmanager
def listener_thread(listener: Listener, *, ready_timeout: float = 15) -> Iterator[Running]:
    """Run ``listener`` in a thread until the block ends (then stop and join it)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            listener.run()
        except BaseException as exc:  # pragma: no cover - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=target, name="listener", daemon=True)
    thread.start()
    try:
        wait_until(lambda: listener.ready.is_set() or bool(errors), ready_timeout, "listener")
        assert not errors, errors
        yield Running(listener, thread, errors)
    finally:
        listener.stop.set()
        thread.join(timeout=20)
        assert not thread.is_alive(), "the listener did not stop"


def unique_queue_name() -> str:
    return f"celeryev.swh-test-listener-{uuid.uuid4().hex[:8]}"


def options(queue_name: str, **changes: Any) -> ListenerOptions:
    values: dict[str, Any] = {
        "queue_name": queue_name,
        "batch_size": 200,
        "batch_wait": 0.05,
        "poll_interval": 0.1,
        "idle_timeout": 1.0,
        "retry_delay": 0.5,
        "wakeup_workers": False,
    }
    values.update(changes)
    return ListenerOptions(**values)


def broker(name: str) -> str:
    resolver = services.RESOLVERS[name]
    return services.require(name, resolver)
