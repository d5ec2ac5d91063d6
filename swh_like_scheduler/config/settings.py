"""One settings object, built at the edge and passed down.

Sources, strongest first: command-line flags, ``SWH_SCHEDULER_*`` environment
variables (click reads them for each flag), a TOML configuration file, and
the defaults below. Nothing here runs at import time.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

from ..domain.exceptions import InvalidInput
from ..domain.model import MAX_ARGUMENT_BYTES
from ..plumbing.reach import Reach
from ..visits.policy import VisitSettings, visit_settings

APP_NAME = "swh-like-scheduler"
ENV_PREFIX = "SWH_SCHEDULER"
#: the words that say a value is the built-in default (nobody chose it)
BUILT_IN = "the built-in default"
#: a field of :class:`Settings` worked out from the others: never in the file
_DERIVED = {"file": False}


def default_config_file() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_db_path() -> Path:
    """The embedded default database: a SQLite file in the user's data directory."""
    return Path(platformdirs.user_data_dir(APP_NAME)) / "scheduler.sqlite"


def default_db_url() -> str:
    return f"sqlite:///{default_db_path()}"


@dataclass(frozen=True)
class Settings:
    db_url: str
    #: True when ``db_url`` is the embedded default (created on first use)
    db_is_default: bool = field(default=False, metadata=_DERIVED)
    #: where ``db_url`` came from, in words (a flag, a variable, the file...)
    db_source: str = field(default=BUILT_IN, metadata=_DERIVED)
    broker_url: str | None = None
    #: where ``broker_url`` came from, in words (``None`` with no broker_url)
    broker_source: str | None = field(default=None, metadata=_DERIVED)
    #: JSON bytes of one task's arguments beyond which a new task is refused
    max_argument_bytes: int = MAX_ARGUMENT_BYTES
    #: bearer tokens of the HTTP API (``SECRET:rw`` / ``SECRET:ro`` entries)
    api_tokens: tuple[str, ...] = ()
    #: the HTTP API lets reads through without a token
    api_open_reads: bool = False
    #: the token this client sends to a server ``db_url`` (``http://…``)
    api_token: str | None = None
    #: the Redis index of waiting tasks (``redis://…``), off when ``None``
    index_url: str | None = None
    #: where http callbacks may go besides public addresses (:mod:`.reach`)
    callback_allow: Reach = field(default_factory=Reach)
    #: the origin-visit scheduler's cooldowns and policy mixes (``[visits]``)
    visits: VisitSettings = field(default_factory=VisitSettings)


#: the settings a configuration file may hold
FILE_SETTINGS = tuple(f.name for f in fields(Settings) if f.metadata.get("file", True))


def read_config_file(path: Path) -> dict[str, Any]:
    """The ``[scheduler]`` table of a TOML file (the whole file if it has none)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidInput("config-file", f"{path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput("config-file", f"{path} cannot be read: {exc}") from None
    section = data.get("scheduler", data)
    if not isinstance(section, dict):
        raise InvalidInput("config-file", f"{path}: [scheduler] must be a table")
    known = set(FILE_SETTINGS)
    unknown = sorted(set(section) - known)
    if unknown:
        raise InvalidInput(
            "config-file",
            f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})",
        )
    return section


def load_settings(
    *,
    db_url: str | None = None,
    db_source: str | None = None,
    broker_url: str | None = None,
    broker_source: str | None = None,
    config_file: Path | None = None,
    max_argument_bytes: int | None = None,
    api_token: str | None = None,
    index_url: str | None = None,
    callback_allow: str | None = None,
) -> Settings:
    """Merge flags/environment (already resolved by click) with the file and
    defaults. ``db_source`` and ``broker_source`` say in words where the
    given ``db_url`` and ``broker_url`` came from (default: "the caller")."""
    from_file: dict[str, Any] = {}
    file_path = config_file
    if config_file is not None:
        from_file = read_config_file(config_file)
    elif default_config_file().exists():
        file_path = default_config_file()
        from_file = read_config_file(file_path)
    in_the_file = f"the configuration file {file_path}"
    url = db_url or from_file.get("db_url")
    if db_url:
        db_from = db_source or "the caller"
    else:
        db_from = f"{in_the_file} (db_url)" if url else BUILT_IN
    broker = broker_url or from_file.get("broker_url")
    if broker_url:
        broker_from: str | None = broker_source or "the caller"
    else:
        broker_from = f"{in_the_file} (broker_url)" if broker else None
    limit = max_argument_bytes or from_file.get("max_argument_bytes") or MAX_ARGUMENT_BYTES
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput("max_argument_bytes", f"{limit!r} is not a positive number of bytes")
    tokens = from_file.get("api_tokens", ())
    if isinstance(tokens, str):
        tokens = tuple(tokens.split(","))
    if not isinstance(tokens, list | tuple) or not all(isinstance(t, str) for t in tokens):
        raise InvalidInput("api_tokens", "must be a list of 'SECRET:rw' / 'SECRET:ro' strings")
    open_reads = from_file.get("api_open_reads", False)
    if not isinstance(open_reads, bool):
        raise InvalidInput("api_open_reads", f"{open_reads!r} is not true or false")
    allow = callback_allow if callback_allow is not None else from_file.get("callback_allow", ())
    if not isinstance(allow, str | list | tuple):
        raise InvalidInput("callback_allow", "must be a list of networks and host names")
    visits = from_file.get("visits")
    if visits is not None and not isinstance(visits, dict):
        raise InvalidInput("visits", "must be a table ([visits])")
    return Settings(
        visits=visit_settings(visits),
        callback_allow=Reach.parse(allow),
        db_url=url or default_db_url(),
        db_is_default=not url,
        db_source=db_from,
        broker_url=broker,
        broker_source=broker_from,
        max_argument_bytes=limit,
        api_tokens=tuple(tokens),
        api_open_reads=open_reads,
        api_token=api_token or from_file.get("api_token"),
        index_url=_index_url(index_url or from_file.get("index_url")),
    )


def _index_url(url: object) -> str | None:
    if url is None or url == "":
        return None
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise InvalidInput("index_url", f"{url!r} is not a redis://, rediss:// or unix:// URL")
    return url
