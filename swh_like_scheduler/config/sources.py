"""Which database and which broker a daemon uses, and where each came from.

Strongest first: the command's flag (``--db-url``, ``--broker-url``), the
Celery app the command was given (``--app``: its ``swh_scheduler_db_url``
and ``broker_url`` settings), the environment (``SWH_SCHEDULER_DB_URL``,
``SWH_SCHEDULER_BROKER_URL``), the configuration file, and last the
built-in default, which nobody chose: a daemon says so as a warning. The
app counts as given on the command line: an app of your own names its
broker, and that is the broker its workers use.

Pure: the caller reads the app and the settings and gives them here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .settings import BUILT_IN, Settings

#: what a flag given on the command line is called in a source
FLAG = "flag"
#: ``user:secret@`` in what may be a URL, and a password given as a parameter
_SECRET_IN_NETLOC = re.compile(r"(://[^/@:]*:)[^/@]*@")
_SECRET_IN_QUERY = re.compile(r"((?:^|&)(?:password|passwd|pass|secret|token)=)[^&]*", re.I)
#: what Celery connects to when an app sets no broker at all
CELERY_DEFAULT_BROKER = "amqp://guest@localhost:5672//"


@dataclass(frozen=True)
class Chosen:
    """A URL and where it came from, in words ("--db-url", "the app proj:app
    (broker_url)", "the built-in default"...)."""

    url: str
    source: str
    #: nobody chose it: a built-in default (ours or Celery's)
    default: bool = False

    def describe(self) -> str:
        """The URL (its password masked) and its source, for a log line."""
        return f"{mask_url(self.url)} (from {self.source})"


def mask_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (each URL's
    of a fail-over list, ``;``-separated as Kombu reads it)."""
    if ";" in url:
        return ";".join(mask_url(part) for part in url.split(";"))
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL we can read: hide whatever may be a secret
        return _SECRET_IN_NETLOC.sub(r"\1***@", url)
    query = _SECRET_IN_QUERY.sub(r"\1***", parts.query) if parts.query else parts.query
    if not password:
        return urlunsplit(parts._replace(query=query)) if query != parts.query else url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}", query=query))


def from_flag(name: str, *, by_environment: bool, variable: str) -> str:
    """The words for a value click read for option ``name``: the flag, or
    the environment variable it also reads."""
    return variable if by_environment else name


def app_setting(app: Any, name: str) -> str | None:
    """The app's own value of setting ``name`` (``None`` when it sets none)."""
    value = app.conf.get(name)
    return value if isinstance(value, str) and value else None


def app_broker(app: Any) -> str | None:
    """The app's own ``broker_url`` (``None`` when it sets none); a fail-over
    list of URLs, as Celery takes it, in Kombu's ``;``-separated form."""
    value = app.conf.get("broker_url")
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return ";".join(value)
    return value if isinstance(value, str) and value else None


def choose_database(settings: Settings, *, app: Any = None, app_spec: str | None = None) -> Chosen:
    """The database a command uses: ``settings.db_url`` unless the app
    (``--app``) names one and ``db_url`` was not given as a flag."""
    given = settings.db_source == "--db-url"
    if app is not None and not given:
        url = app_setting(app, "swh_scheduler_db_url")
        if url is not None:
            return Chosen(url, f"the swh_scheduler_db_url of the app {app_spec}")
    default = settings.db_is_default and settings.db_source == BUILT_IN
    return Chosen(settings.db_url, settings.db_source, default=default)


def choose_broker(
    settings: Settings,
    *,
    flag: str | None = None,
    flag_source: str | None = None,
    app: Any = None,
    app_spec: str | None = None,
    built_in: str | None = None,
    celery_env: str | None = None,
) -> Chosen:
    """The broker a command uses: ``flag`` when it came from the command
    line (``flag_source`` is ``--broker-url``), else the app's own broker
    (``celery_env``, the ``CELERY_BROKER_URL`` variable, first: Celery
    reads it before the app's setting), else ``flag`` from the environment,
    else the configuration file's, else the app's Celery default (an app
    given that sets none) or ``built_in`` (ours)."""
    if flag and flag_source == "--broker-url":
        return Chosen(flag, flag_source)
    if app is not None and celery_env:
        return Chosen(celery_env, f"CELERY_BROKER_URL, which the app {app_spec} reads first")
    if app is not None:
        own = app_broker(app)
        if own is not None:
            return Chosen(own, f"the broker_url of the app {app_spec}")
    if flag:
        return Chosen(flag, flag_source or "the caller")
    if settings.broker_url:
        return Chosen(settings.broker_url, settings.broker_source or "the configuration file")
    if app is not None:
        return Chosen(
            CELERY_DEFAULT_BROKER,
            f"Celery's default: the app {app_spec} sets no broker_url",
            default=True,
        )
    return Chosen(built_in or CELERY_DEFAULT_BROKER, BUILT_IN, default=True)


#: what to give to choose the database and the broker, as a command's options
COMMAND_HINTS = {
    "database": "--db-url or SWH_SCHEDULER_DB_URL",
    "broker": "--app APP, --broker-url or SWH_SCHEDULER_BROKER_URL",
}


def first_line(
    command: str,
    database: Chosen,
    broker: Chosen | None,
    *,
    hints: dict[str, str] = COMMAND_HINTS,
) -> tuple[bool, str]:
    """The first log line of daemon ``command``: ``(warn, text)``, ``warn``
    when a value is a default nobody chose (the text then says what to give:
    ``hints``, by "database" and "broker")."""
    parts = [f"{command}: database {database.describe()}"]
    if broker is not None:
        parts.append(f"broker {broker.describe()}")
    text = "; ".join(parts)
    unchosen = [
        what
        for what, value in (("database", database), ("broker", broker))
        if value is not None and value.default
    ]
    if not unchosen:
        return False, text
    chosen_by = "; ".join(f"the {what}: {hints[what]}" for what in unchosen)
    return True, (
        f"{text}. Nobody chose the {' nor the '.join(unchosen)}: "
        f"{'it is a' if len(unchosen) == 1 else 'they are'} built-in default"
        f"{'' if len(unchosen) == 1 else 's'} (give {chosen_by})"
    )
