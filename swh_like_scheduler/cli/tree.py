"""Every command of ``swh scheduler``: where it lives and its one line of help.

Nothing here imports a command's module: :class:`.groups.SchedulerGroup`
loads one when it runs or shows its own help. A test checks that every entry
loads and that each command imports only what it needs.
"""

from __future__ import annotations

from .groups import Lazy, group

DB = group(
    "db",
    "Create and upgrade the scheduler's database schema.",
    {
        "identity": Lazy("db:identity", "Print the installation's id and its event queue."),
        "init": Lazy("db:init", "Create the schema in an empty database."),
        "upgrade": Lazy("db:upgrade", "Upgrade the schema to the latest (or given) revision."),
        "version": Lazy("db:version", "Print the database's schema revision and this code's."),
    },
)

INDEX = group(
    "index",
    "Inspect, check and rebuild the Redis index (--index-url).",
    {
        "check": Lazy("index:check", "Compare waiting tasks with the index and repair it."),
        "rebuild": Lazy("index:rebuild_command", "Fill each type's index anew from the database."),
        "status": Lazy("index:status", "Whether each type's index is complete, and its sizes."),
    },
)

JOB = group(
    "job",
    "Jobs by key: a key, ISO 8601 instants, a callback (a RabbitMQ queue or an "
    "HTTP URL); putting a key again replaces its instants.",
    {
        "delete": Lazy("job:delete", "Cancel the instants of job KEY that have not run."),
        "get": Lazy("job:get", "Every instant of job KEY, its state and latest run."),
        "put": Lazy("job:put", "Create job KEY or replace its instants."),
    },
)

LISTER = group(
    "lister",
    "Listers: one per kind of forge and instance, with the state they resume from.",
    {
        "add": Lazy("origin:lister_add", "Register lister NAME; print its id."),
        "list": Lazy("origin:lister_list", "Every lister, with its last finished listing."),
    },
)

ORIGIN = group(
    "origin",
    "Listed origins and their visit statistics.",
    {
        "grab-next": Lazy("origin:grab_next", "As peek-next, and mark them scheduled."),
        "metrics": Lazy("origin:origin_metrics", "The counts update-metrics stored."),
        "peek-next": Lazy("origin:peek_next", "The next origins a policy would visit."),
        "record": Lazy("origin:origin_record", "Record the listed origins of FILE."),
        "record-visit-status": Lazy(
            "origin:origin_record_visit_status", "Apply the visit statuses of FILE."
        ),
        "schedule-first-visits": Lazy(
            "recurrent:schedule_first_visits_command",
            "Send new listings' first visits to their own queues.",
        ),
        "update-metrics": Lazy(
            "origin:origin_update_metrics", "Count the origins per lister and visit type."
        ),
        "visit-stats": Lazy("origin:origin_visit_stats", "What the visits of URL found."),
    },
)

TASK = group(
    "task",
    "Create, inspect and act on tasks.",
    {
        "add": Lazy("task:add", "Create one task of type TYPE."),
        "cancel": Lazy("task_bulk:cancel", "Cancel tasks: their queued runs never run."),
        "delete": Lazy("task_bulk:delete", "Delete tasks and their runs."),
        "disable": Lazy("task_bulk:disable", "Take tasks out of scheduling."),
        "enable": Lazy("task_bulk:enable", "Put disabled tasks back into scheduling."),
        "explain": Lazy("task_why:explain", "Why is task TASK_ID (not) running?"),
        "list": Lazy("task_list:list_tasks", "List tasks, one line each, by increasing id."),
        "list-pending": Lazy("task_list:list_pending", "Ready tasks of a type, in dispatch order."),
        "respawn": Lazy("task:respawn", "Make tasks runnable again now (or at --next-run)."),
        "runs": Lazy("task_why:runs", "The latest runs of task TASK_ID, newest first."),
        "schedule": Lazy("task:schedule", "Create tasks from FILE (CSV or JSON lines)."),
        "status": Lazy("task_why:status", "How many tasks are OK, WARNING or ERROR, per type."),
        "update": Lazy("edit:update_task", "Change a task in place."),
    },
)

TASK_TYPE = group(
    "task-type",
    "Declare the kinds of work and how their tasks are scheduled.",
    {
        "add": Lazy("task_type:add_type", "Create task type TYPE."),
        "list": Lazy("task_type:list_types", "List the task types."),
        "pause": Lazy("task_type:pause_type", "Stop dispatching the tasks of TYPE."),
        "register": Lazy("task_type:register_types", "Create the types worker packages declare."),
        "resume": Lazy("task_type:resume_type", "Dispatch the tasks of TYPE again."),
        "update": Lazy("edit:update_type", "Change settings of task type TYPE in place."),
    },
)

#: the commands and groups of ``swh scheduler``
SCHEDULER = {
    "backtest": Lazy("backtest:backtest", "Check the recorded forecasts against what happened."),
    "console-link": Lazy("console_link:console_link", "Print a one-time console login link."),
    "db": DB,
    "forecast": Lazy("forecast:forecast", "Forecast the next hours of the live platform."),
    "import-beat": Lazy("beat:import_beat", "One task per entry of a Celery beat_schedule."),
    "index": INDEX,
    "job": JOB,
    "journal-client": Lazy("recurrent:journal_client", "Apply the journal's visit statuses."),
    "lister": LISTER,
    "origin": ORIGIN,
    "rpc-serve": Lazy("api:rpc_serve", "Serve the scheduler over HTTP (API and console)."),
    "schedule-recurrent": Lazy(
        "recurrent:schedule_recurrent", "Send the visits of listed origins, per visit type."
    ),
    "simulate": Lazy("simulate:simulate", "Compare dispatch orders on a simulated fleet."),
    "simulate-visits": Lazy(
        "simulate_visits:simulate_visits", "Compare visit policies on a simulated world."
    ),
    "standalone": Lazy("standalone:standalone", "Run the whole platform on this machine."),
    "start-listener": Lazy("listener:start_listener", "Record what the workers report."),
    "start-monitor": Lazy("monitor:start_monitor", "Do the monitor's duties."),
    "start-runner": Lazy("runner:start_runner", "Claim ready tasks and publish them."),
    "task": TASK,
    "task-type": TASK_TYPE,
}
