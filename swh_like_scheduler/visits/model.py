"""The origin-visit scheduler's domain: listers, the origins they listed,
and what the visits of each origin found (frozen, validated records).

A **lister** pages through one forge (an instance of a kind of forge:
``gitlab`` / ``framagit``) and reports **listed origins**: a url, the
**visit type** that loads it (``git``, ``pypi``...: task type
``load-<visit type>`` runs its visits), the forge's own last-update date
when it has one. The **visit statistics** of an origin and visit type say
when it was last visited, with what outcome, and what it found (the
snapshot id): the recurrent scheduler picks from them which origins to
visit next, without one run row per visit.

Every check names the field it refuses, so a lister's bad page fails with
``url: 'not a url' is not a URL ...`` and nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..domain import validation
from ..domain.exceptions import InvalidInput
from ..domain.model import MAX_JSON_DEPTH

#: a URL: a scheme, ``://`` and something, no blank or control character
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s\x00-\x1f\x7f]+$")
#: a url's scheme
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,31}$")
#: the longest url accepted (forges' own limits are below it)
MAX_URL = 4096
#: a snapshot id: the 40 hexadecimal digits of a SHA-1 (``swh:1:snp:<id>``)
_SNAPSHOT = re.compile(r"^[0-9a-f]{40}$")
#: the schemes of the urls a loader can visit: the default of the setting
#: ``[visits] origin_schemes`` (a ``file:``, ``javascript:`` or ``data:``
#: url is no origin, and would be shown as a link by every face)
ORIGIN_SCHEMES = frozenset(
    {
        "https",
        "http",
        "git",
        "svn",
        "svn+http",
        "svn+https",
        "svn+ssh",
        "hg",
        "bzr",
        "cvs",
        "pserver",
        "rsync",
        "ftp",
        "ftps",
        "sftp",
        "deb",
        "opam",
    }
)
#: the keyword arguments the scheduler gives a visit itself
#: (:func:`..recurrent.scheduler.visit_message`): a listed origin's
#: ``extra_loader_arguments`` cannot set them
SCHEDULER_KEYS = ("url",)
#: the task type that runs the visits of a visit type (the reference's name)
VISIT_TASK_PREFIX = "load-"
#: the queue-position offset of an origin never visited (:mod:`.feedback`)
DEFAULT_OFFSET = 4
#: ``failed`` or ``not_found`` visits in a row that disable an origin, as
#: the reference's journal client (``[visits] disable_after_failures``)
DISABLE_AFTER_FAILURES = 3


class VisitStatus(StrEnum):
    """The status of a visit as the archive's journal reports it."""

    CREATED = "created"
    ONGOING = "ongoing"
    FULL = "full"
    PARTIAL = "partial"
    NOT_FOUND = "not_found"
    FAILED = "failed"


class LastVisitStatus(StrEnum):
    """The outcome of an origin's last finished visit."""

    SUCCESSFUL = "successful"
    FAILED = "failed"
    NOT_FOUND = "not_found"


def visit_task_type(visit_type: str) -> str:
    """The task type whose tasks run visits of ``visit_type``."""
    return f"{VISIT_TASK_PREFIX}{visit_type}"


def origin_url(where: str, value: object) -> str:
    """``value`` if it is a URL (``https://…``, ``svn+ssh://…``, ``deb://…``)."""
    if not isinstance(value, str):
        raise InvalidInput(where, f"{value!r} is not a URL (a text like https://host/path)")
    if len(value) > MAX_URL:
        raise InvalidInput(where, f"is {len(value):,} characters long; at most {MAX_URL:,}")
    validation.storable(where, value)
    if not _URL.match(value):
        raise InvalidInput(
            where,
            f"{value!r} is not a URL (scheme://host/path, no spaces: "
            "https://gitlab.com/group/project)",
        )
    return value


def scheme_of(url: str) -> str:
    """The scheme of a url :func:`origin_url` took, in lower case."""
    return url.partition("://")[0].lower()


def origin_scheme(where: str, url: str, schemes: frozenset[str]) -> str:
    """``url`` if its scheme is one of ``schemes`` (the setting
    ``[visits] origin_schemes``: the schemes a loader can visit)."""
    scheme = scheme_of(url)
    if scheme not in schemes:
        raise InvalidInput(
            where,
            f"{scheme + '://'!r} is not a scheme a loader visits (allowed: "
            f"{', '.join(sorted(schemes))}: the setting [visits] origin_schemes)",
        )
    return url


def origin_schemes(where: str, value: object) -> frozenset[str]:
    """The setting ``origin_schemes``: a list of url schemes (``https``,
    ``svn+ssh``), taken in lower case."""
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise InvalidInput(where, f"{value!r} is not a list of url schemes (['https', 'git'])")
    schemes = set()
    for item in value:
        if not isinstance(item, str) or not _SCHEME.match(item):
            raise InvalidInput(where, f"{item!r} is not a url scheme (like https or svn+ssh)")
        schemes.add(item.lower())
    return frozenset(schemes)


def visit_type_name(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInput(where, f"{value!r} is not a visit type (a name like git)")
    return validation.identifier(where, value)


def aware(where: str, value: object) -> datetime | None:
    """``value`` if it is ``None`` or a datetime with a zone (never a naive one:
    a forge's date without a zone would be read in whatever zone we guess)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(where, f"{value!r} is not a date-time")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(
            where, f"{value.isoformat()} has no zone (give one: 2026-01-31T14:00:00Z)"
        )
    return validation.parse_datetime(where, value)


def snapshot_id(where: str, value: object) -> str | None:
    """A snapshot id as 40 lower-case hexadecimal digits (``swh:1:snp:`` taken off)."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray) and len(value) == 20:
        return bytes(value).hex()
    if isinstance(value, str):
        text = value.strip().lower().removeprefix("swh:1:snp:")
        if _SNAPSHOT.match(text):
            return text
    raise InvalidInput(where, f"{value!r} is not a snapshot id (40 hexadecimal digits)")


def _json_object(where: str, value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object every reader reads back the same:
    no NaN nor infinity, integers in signed 64 bits, storable text, at most
    :data:`MAX_JSON_DEPTH` levels deep (the rules of a task's arguments)."""
    if not isinstance(value, Mapping):
        raise InvalidInput(where, f"{value!r} is not an object")
    validation.storable(where, value)
    found = dict(value)
    problem = validation.json_problem(found, depth=MAX_JSON_DEPTH)
    if problem is not None:
        raise InvalidInput(where, problem)
    return found


def _flag(where: str, value: object, *, optional: bool = False) -> bool | None:
    if value is None and optional:
        return None
    if not isinstance(value, bool):
        raise InvalidInput(where, f"{value!r} is not true or false")
    return value


@dataclass(frozen=True)
class Lister:
    """One lister: a kind of forge (``name``) and its instance, the state it
    resumes from, and ``updated``: the token an update must present (a
    second lister process writing from an older state is refused)."""

    name: str
    instance_name: str = ""
    id: str | None = None
    current_state: Mapping[str, Any] = field(default_factory=dict)
    created: datetime | None = None
    updated: datetime | None = None
    last_listing_finished_at: datetime | None = None
    first_visits_queue_prefix: str | None = None
    first_visits_scheduled_at: datetime | None = None

    def __post_init__(self) -> None:
        validation.identifier("name", self.name)
        if not isinstance(self.instance_name, str):
            raise InvalidInput("instance_name", f"{self.instance_name!r} is not a name")
        if self.instance_name:
            validation.identifier("instance_name", self.instance_name)
        object.__setattr__(self, "current_state", _json_object("current_state", self.current_state))
        for name in ("created", "updated", "last_listing_finished_at"):
            object.__setattr__(self, name, aware(name, getattr(self, name)))
        object.__setattr__(
            self,
            "first_visits_scheduled_at",
            aware("first_visits_scheduled_at", self.first_visits_scheduled_at),
        )
        if self.first_visits_queue_prefix is not None:
            validation.identifier("first_visits_queue_prefix", self.first_visits_queue_prefix)


@dataclass(frozen=True)
class ListedOrigin:
    """An origin as a lister reported it. ``first_seen`` and ``last_seen`` are
    the store's (when it was first and last recorded); ``last_update`` is the
    forge's own date of the origin's last change, if it gives one."""

    lister_id: str
    url: str
    visit_type: str
    extra_loader_arguments: Mapping[str, Any] = field(default_factory=dict)
    last_update: datetime | None = None
    enabled: bool = True
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    is_fork: bool | None = None
    forked_from_url: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.lister_id, str) or not self.lister_id:
            raise InvalidInput("lister_id", f"{self.lister_id!r} is not a lister id")
        origin_url("url", self.url)
        visit_type_name("visit_type", self.visit_type)
        extra = _json_object("extra_loader_arguments", self.extra_loader_arguments)
        for key in SCHEDULER_KEYS:
            if key in extra:
                raise InvalidInput(
                    f"extra_loader_arguments.{key}",
                    f"is set by the scheduler (the origin's {key}): a loader argument cannot "
                    "replace it",
                )
        object.__setattr__(self, "extra_loader_arguments", extra)
        for name in ("last_update", "first_seen", "last_seen"):
            object.__setattr__(self, name, aware(name, getattr(self, name)))
        _flag("enabled", self.enabled)
        _flag("is_fork", self.is_fork, optional=True)
        if self.forked_from_url is not None:
            origin_url("forked_from_url", self.forked_from_url)

    @classmethod
    def stored(cls, fields: Mapping[str, Any]) -> ListedOrigin:
        """One read back from the store, which checked every field on the way
        in: built without checking again (a grab builds thousands)."""
        origin = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(origin, name, value)
        object.__setattr__(origin, "extra_loader_arguments", dict(origin.extra_loader_arguments))
        return origin

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.lister_id, self.url, self.visit_type)


@dataclass(frozen=True)
class ListedOriginPage:
    """A page of listed origins, and the token of the next page (``None``: the last)."""

    origins: tuple[ListedOrigin, ...]
    next_page_token: str | None = None


@dataclass(frozen=True)
class OriginVisitStats:
    """What the visits of one origin with one visit type found.

    ``last_visit`` / ``last_visit_status``: the latest finished visit;
    ``last_successful``: the latest that loaded something; ``last_snapshot``:
    what it loaded (a new one means the visit was eventful);
    ``last_scheduled``: when the scheduler last sent a visit;
    ``next_visit_queue_position`` and ``next_position_offset``: the origin's
    place in its visit type's queue of origins with no forge date, pushed
    further (a larger offset) while visits find nothing new;
    ``successive_visits``: how many visits in a row had the last status;
    ``next_visit_due``: when the origin's freshness promise falls due (the
    last visit plus ``2**offset`` hours: the ``deadline`` policy's order)."""

    url: str
    visit_type: str
    last_successful: datetime | None = None
    last_visit: datetime | None = None
    last_visit_status: LastVisitStatus | None = None
    last_scheduled: datetime | None = None
    last_snapshot: str | None = None
    next_visit_queue_position: datetime | None = None
    next_position_offset: int = DEFAULT_OFFSET
    successive_visits: int = 1
    next_visit_due: datetime | None = None

    def __post_init__(self) -> None:
        origin_url("url", self.url)
        visit_type_name("visit_type", self.visit_type)
        for name in (
            "last_successful",
            "last_visit",
            "last_scheduled",
            "next_visit_queue_position",
            "next_visit_due",
        ):
            object.__setattr__(self, name, aware(name, getattr(self, name)))
        if self.last_visit_status is not None:
            try:
                status = LastVisitStatus(self.last_visit_status)
            except ValueError:
                choices = ", ".join(s.value for s in LastVisitStatus)
                raise InvalidInput(
                    "last_visit_status", f"{self.last_visit_status!r} is not one of {choices}"
                ) from None
            object.__setattr__(self, "last_visit_status", status)
        object.__setattr__(self, "last_snapshot", snapshot_id("last_snapshot", self.last_snapshot))
        for name in ("next_position_offset", "successive_visits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
                raise InvalidInput(name, f"{value!r} is not a whole number >= 0")

    @property
    def key(self) -> tuple[str, str]:
        return (self.url, self.visit_type)


@dataclass(frozen=True)
class OriginMetrics:
    """How one lister's origins of one visit type stand, as of ``last_update``:
    known, enabled, never visited (enabled and never visited successfully,
    as the reference counts them: an origin whose every visit failed is
    one), with pending changes (the forge's last update after the last
    successful visit), and the enabled ones per condition (OK, WARNING,
    ERROR)."""

    lister_id: str
    visit_type: str
    last_update: datetime
    origins_known: int = 0
    origins_enabled: int = 0
    origins_never_visited: int = 0
    origins_with_pending_changes: int = 0
    #: the enabled origins per condition (:mod:`.condition`)
    origins_ok: int = 0
    origins_warning: int = 0
    origins_error: int = 0
    #: the enabled origins no visit ended for (what ``origins_never_visited``
    #: counted before it counted as the reference does)
    origins_never_attempted: int = 0
