"""Web page checker: fetch a URL and tell whether its content changed since the
last visit.

The outcome drives the adaptive interval of the task: *eventful* (the content
changed, or the page is seen for the first time) shortens it, *uneventful*
lengthens it (the scheduler leaves it as it is after a task's first good
run, which has nothing to compare with). A network error, a timeout or an
HTTP error other than 404/410 raises (*failed*: retried by the scheduler);
404 and 410 give *permfailed*.

What was seen at the last visit (a SHA-256 of the body, the validators
``ETag`` / ``Last-Modified``, a version number) is kept in a small state store
shared by every worker process, chosen from the app's configuration when the
task runs:

1. ``swh_webcheck_state_url`` when set: a ``redis://`` / ``rediss://`` /
   ``unix://`` URL, or any SQLAlchemy URL (``sqlite:///…``,
   ``postgresql+psycopg://…``);
2. else the result backend, then the broker, when it is a Redis server;
3. else a SQLite file in the user's data directory (shared by the worker
   processes of one machine only).

Each visit is an optimistic transaction on its URL's record: read it, fetch
the page (conditionally, when validators are known), then write the new
record only if its version is still the one read (an atomic compare-and-set:
a Lua script on Redis, ``UPDATE … WHERE version = ?`` in SQL). A visit that
loses the race to another visit of the same URL compares its digest with the
winner's: the same content is reported *uneventful* (the change was already
reported once), other content makes it start again. So each change is
reported once however many workers look at the page at the same time.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import platformdirs
import redis
import sqlalchemy as sa
from celery import Task, shared_task

from swh_like_scheduler.worker import SchedulerTask

TASK_NAME = "swh_like_workers.webcheck.check_page"

#: Celery setting naming the state store (see the module documentation)
STATE_URL_SETTING = "swh_webcheck_state_url"
#: Redis keys: this prefix and the SHA-256 of the state key (the URL by default)
REDIS_KEY_PREFIX = "swh-webcheck:"
#: A Redis record not written for this long expires (its next visit is a first visit)
REDIS_TTL = timedelta(days=180)
#: SQL table of the records
TABLE_NAME = "swh_webcheck_state"

DEFAULT_TIMEOUT = 30.0
USER_AGENT = "swh-like-scheduler-webcheck/0.1"
#: HTTP statuses that mean the page will not come back
GONE = frozenset({404, 410})
#: Visits that lose the compare-and-set to a different content before giving up
MAX_ATTEMPTS = 5
_CHUNK = 64 * 1024


class PageUnavailable(RuntimeError):
    """The page could not be fetched (network error, timeout, HTTP error)."""


class StateConflict(RuntimeError):
    """Other visits of the same URL kept changing its record during this one."""


@dataclass(frozen=True)
class PageState:
    """What the last visit of a page saw."""

    url: str
    digest: str
    version: int
    etag: str | None = None
    last_modified: str | None = None
    checked_at: str = ""
    changed_at: str = ""

    def as_fields(self) -> dict[str, str]:
        fields = {
            "url": self.url,
            "digest": self.digest,
            "version": str(self.version),
            "etag": self.etag or "",
            "last_modified": self.last_modified or "",
            "checked_at": self.checked_at,
            "changed_at": self.changed_at,
        }
        return fields

    @classmethod
    def from_fields(cls, fields: Mapping[Any, Any]) -> PageState:
        return cls(
            url=str(fields["url"]),
            digest=str(fields["digest"]),
            version=int(fields["version"]),
            etag=fields.get("etag") or None,
            last_modified=fields.get("last_modified") or None,
            checked_at=str(fields.get("checked_at") or ""),
            changed_at=str(fields.get("changed_at") or ""),
        )


class StateStore(Protocol):
    """Records of the last visits, keyed by the SHA-256 (hex) of a state key."""

    def load(self, key: str) -> PageState | None:
        """The record of ``key``, or None when there is none."""

    def swap(self, key: str, expected_version: int, new: PageState) -> bool:
        """Write ``new`` if the record's version is ``expected_version`` (0: no
        record); False, and nothing written, otherwise."""

    def delete(self, key: str) -> None:
        """Forget ``key`` (its next visit is a first visit)."""


# --------------------------------------------------------------------------- #
# Redis
# --------------------------------------------------------------------------- #

_SWAP_SCRIPT = """
local current = redis.call('HGET', KEYS[1], 'version') or '0'
if current ~= ARGV[1] then
    return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


class RedisStateStore:
    """One hash per URL; the compare-and-set is a Lua script (atomic on the server)."""

    def __init__(self, url: str, ttl: timedelta = REDIS_TTL) -> None:
        self._client = redis.Redis.from_url(
            url, socket_timeout=10, socket_connect_timeout=10, decode_responses=True
        )
        self._swap = self._client.register_script(_SWAP_SCRIPT)
        self._ttl = max(1, int(ttl.total_seconds()))

    def load(self, key: str) -> PageState | None:
        fields = self._client.hgetall(REDIS_KEY_PREFIX + key)
        return PageState.from_fields(fields) if fields else None

    def swap(self, key: str, expected_version: int, new: PageState) -> bool:
        pairs = [item for pair in new.as_fields().items() for item in pair]
        done = self._swap(
            keys=[REDIS_KEY_PREFIX + key], args=[str(expected_version), self._ttl, *pairs]
        )
        return bool(done)

    def delete(self, key: str) -> None:
        self._client.delete(REDIS_KEY_PREFIX + key)


# --------------------------------------------------------------------------- #
# SQL (SQLite file by default; PostgreSQL works the same)
# --------------------------------------------------------------------------- #

_metadata = sa.MetaData()
_table = sa.Table(
    TABLE_NAME,
    _metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("etag", sa.Text, nullable=False),
    sa.Column("last_modified", sa.Text, nullable=False),
    sa.Column("checked_at", sa.Text, nullable=False),
    sa.Column("changed_at", sa.Text, nullable=False),
)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout = 30000")
        cursor.execute("PRAGMA journal_mode = WAL")
    finally:
        cursor.close()


class SqlStateStore:
    """One row per URL; the compare-and-set is ``UPDATE … WHERE version = ?``
    (or an ``INSERT`` refused by the primary key for a first visit)."""

    def __init__(self, url: str) -> None:
        sqlite = sa.engine.make_url(url).get_backend_name() == "sqlite"
        self._engine = sa.create_engine(
            url, pool_pre_ping=True, connect_args={"timeout": 30} if sqlite else {}
        )
        if sqlite:
            sa.event.listen(self._engine, "connect", _sqlite_pragmas)
        try:
            _metadata.create_all(self._engine, checkfirst=True)
        except sa.exc.DBAPIError:
            # another process created the table at the same moment
            if not sa.inspect(self._engine).has_table(TABLE_NAME):
                raise

    def load(self, key: str) -> PageState | None:
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(_table).where(_table.c.key == key)).mappings().first()
        return PageState.from_fields(row) if row is not None else None

    def swap(self, key: str, expected_version: int, new: PageState) -> bool:
        values = {**new.as_fields(), "version": new.version}
        if expected_version == 0:
            try:
                with self._engine.begin() as conn:
                    conn.execute(sa.insert(_table).values(key=key, **values))
            except sa.exc.IntegrityError:
                return False
            return True
        with self._engine.begin() as conn:
            result = conn.execute(
                sa.update(_table)
                .where(_table.c.key == key, _table.c.version == expected_version)
                .values(**values)
            )
        return result.rowcount == 1

    def delete(self, key: str) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.delete(_table).where(_table.c.key == key))

    def close(self) -> None:
        self._engine.dispose()


# --------------------------------------------------------------------------- #
# choosing the store
# --------------------------------------------------------------------------- #

_REDIS_SCHEMES = frozenset({"redis", "rediss", "unix"})
_stores: dict[tuple[int, str], StateStore] = {}
_stores_lock = threading.Lock()


def default_state_path() -> Path:
    """The SQLite file used when no Redis is configured."""
    return Path(platformdirs.user_data_dir("swh-like-scheduler")) / "webcheck.sqlite"


def _as_redis_url(value: Any) -> str | None:
    """``value`` (a Celery broker or backend setting) as a redis-py URL, or None."""
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    if not isinstance(value, str) or not value.strip():
        return None
    url = value.split(";", 1)[0].strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    if scheme == "redis+socket":  # Celery's spelling of a Unix socket
        return "unix://" + rest
    return url if scheme in {"redis", "rediss"} else None


def _setting(conf: Mapping[str, Any], name: str) -> Any:
    """A setting of a Celery configuration (whose ``broker_url`` is a property
    that also knows the other spellings) or of a plain mapping."""
    try:
        return getattr(conf, name)
    except AttributeError:
        return conf.get(name)


def state_url_for(conf: Mapping[str, Any]) -> str:
    """Where the records live for a Celery app's configuration ``conf``."""
    explicit = _setting(conf, STATE_URL_SETTING)
    if explicit:
        return str(explicit)
    for name in ("result_backend", "broker_url"):
        url = _as_redis_url(_setting(conf, name))
        if url is not None:
            return url
    path = default_state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def state_store(url: str) -> StateStore:
    """The store at ``url``, made once per process (clients are not fork-safe)."""
    cache_key = (os.getpid(), url)
    with _stores_lock:
        store = _stores.get(cache_key)
        if store is None:
            scheme = url.partition("://")[0]
            store = RedisStateStore(url) if scheme in _REDIS_SCHEMES else SqlStateStore(url)
            _stores[cache_key] = store
    return store


def record_key(name: str) -> str:
    """The store's key for a state key (the URL unless the task names another)."""
    return hashlib.sha256(name.encode()).hexdigest()


# --------------------------------------------------------------------------- #
# fetching
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Fetched:
    """One HTTP exchange: ``digest`` is None when there is no body to compare
    (304 Not Modified, or a page that is gone)."""

    http_status: int
    digest: str | None = None
    size: int = 0
    etag: str | None = None
    last_modified: str | None = None


def url_problem(url: Any) -> str | None:
    """Why ``url`` cannot be checked, or None."""
    if not isinstance(url, str) or not url:
        return f"url must be a non-empty string, not {url!r}"
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"{url!r} is not an http:// or https:// URL"
    if not parts.hostname:
        return f"{url!r} has no host"
    return None


def _opener() -> urllib.request.OpenerDirector:
    """HTTP(S) only: no ``file:`` or ``ftp:`` reachable through a redirect."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPRedirectHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def fetch(
    url: str,
    timeout: float = DEFAULT_TIMEOUT,
    etag: str | None = None,
    last_modified: str | None = None,
) -> Fetched:
    """GET ``url`` (conditionally when validators are given) and hash its body.

    ``timeout`` bounds each network operation and, roughly, the whole download.
    Raises PageUnavailable on a network error, a timeout, or an HTTP status
    that is not 2xx, 304, 404 or 410.
    """
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    request = urllib.request.Request(url, headers=headers)
    deadline = time.monotonic() + timeout
    try:
        with _opener().open(request, timeout=timeout) as response:
            digest = hashlib.sha256()
            size = 0
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                if time.monotonic() > deadline:
                    raise PageUnavailable(f"{url}: download took longer than {timeout}s")
            return Fetched(
                http_status=response.status,
                digest=digest.hexdigest(),
                size=size,
                etag=response.headers.get("ETag"),
                last_modified=response.headers.get("Last-Modified"),
            )
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 304 and (etag or last_modified):
            return Fetched(
                http_status=304,
                etag=exc.headers.get("ETag"),
                last_modified=exc.headers.get("Last-Modified"),
            )
        if exc.code in GONE:
            return Fetched(http_status=exc.code)
        raise PageUnavailable(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise PageUnavailable(f"{url}: {exc.reason}") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise PageUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- #
# a visit
# --------------------------------------------------------------------------- #


def _result(
    status: str, url: str, fetched: Fetched, digest: str | None, changed: bool
) -> dict[str, Any]:
    return {
        "status": status,
        "url": url,
        "digest": digest,
        "changed": changed,
        "http_status": fetched.http_status,
        "bytes": fetched.size,
    }


def visit(
    store: StateStore, url: str, key: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """Fetch ``url``, compare with the last visit recorded under ``key`` (the
    URL by default) and record this one; the task's result."""
    stored_as = record_key(key if key is not None else url)
    for _attempt in range(MAX_ATTEMPTS):
        previous = store.load(stored_as)
        known = previous if previous is not None and previous.url == url else None
        fetched = fetch(
            url,
            timeout,
            etag=known.etag if known else None,
            last_modified=known.last_modified if known else None,
        )
        if fetched.http_status in GONE:
            return _result("permfailed", url, fetched, None, False)
        if fetched.digest is not None:
            digest, etag, last_modified = fetched.digest, fetched.etag, fetched.last_modified
        elif known is not None:  # 304: the body is the one the validators came from
            digest = known.digest
            etag = fetched.etag or known.etag
            last_modified = fetched.last_modified or known.last_modified
        else:  # fetch() only returns a 304 to a conditional request
            raise PageUnavailable(f"{url}: HTTP 304 to an unconditional request")
        changed = previous is None or previous.digest != digest
        now = datetime.now(tz=UTC).isoformat()
        expected = previous.version if previous is not None else 0
        new = PageState(
            url=url,
            digest=digest,
            version=expected + 1,
            etag=etag,
            last_modified=last_modified,
            checked_at=now,
            changed_at=now if changed or previous is None else previous.changed_at,
        )
        if store.swap(stored_as, expected, new):
            return _result("eventful" if changed else "uneventful", url, fetched, digest, changed)
        # another visit wrote first: if it saw the same content, it reported
        # the change (if any), and this visit has nothing new to say
        winner = store.load(stored_as)
        if winner is not None and winner.digest == digest:
            return _result("uneventful", url, fetched, digest, False)
    raise StateConflict(f"{url}: its record changed during {MAX_ATTEMPTS} visits in a row")


@shared_task(name=TASK_NAME, bind=True, base=SchedulerTask)
def check_page(
    self: Task, url: str, timeout: float = DEFAULT_TIMEOUT, state_key: str | None = None
) -> dict[str, Any]:
    """Fetch ``url`` and report whether it changed since the last visit.

    ``state_key`` names the record to compare with (default: the URL); give
    each task its own when several tasks watch one URL and each must see
    every change. Returns ``{"status", "url", "digest", "changed",
    "http_status", "bytes"}``; raises PageUnavailable when the page could not
    be fetched.
    """
    problem = url_problem(url)
    if problem is not None:
        return {
            "status": "permfailed",
            "url": url,
            "digest": None,
            "changed": False,
            "http_status": None,
            "bytes": 0,
            "error": problem,
        }
    store = state_store(state_url_for(self.app.conf))
    return visit(store, url, key=state_key, timeout=float(timeout))


def register() -> dict[str, Any]:
    """Entry point of the ``swh.workers`` group (see :mod:`swh_like_workers.sleep`)."""
    return {
        "task_modules": [__name__],
        "task_types": [
            {
                "type": "check-page",
                "backend_name": TASK_NAME,
                "description": "Fetch a web page; eventful when its content changed",
                "default_interval": "1 day",
                "min_interval": "1 hour",
                "max_interval": "30 days",
                "backoff_factor": 2.0,
                "max_queue_length": 10_000,
                # 5 + 10 + 20 min: the retries fit in the shortest interval
                "num_retries": 3,
                "retry_delay": "5 min",
                "retry_growth": 2.0,
                "retry_cap": "30 min",
                "max_expected_duration": "2 min",
                "max_allowed_duration": "15 min",
            }
        ],
    }
