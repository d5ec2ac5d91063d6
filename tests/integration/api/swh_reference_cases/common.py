"""What every case script shares (run by the reference's own python, never ours).

``python AREA.py URL TOKEN`` runs each case of the area against one
``rpc-serve``'s ``/swh/`` through swh-scheduler's client, and prints one
JSON line: ``{case name: null}`` for a case whose checks held, else the
tail of its traceback. The cases share one database: each builds its
listers, urls and visit types under a prefix of its own (``c.ns``), and a
read over the whole database is narrowed to the case's own rows.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from swh.scheduler import get_scheduler
from swh.scheduler.model import ListedOrigin, Lister, TaskType

UTC = datetime.UTC
DAY = datetime.timedelta(days=1)
#: snapshot ids as the archive writes them (20 bytes)
SNAPSHOT = bytes.fromhex("d81cc0710eb6cf9efd5b920a8453e1e07157b6cd")
OTHER_SNAPSHOT = bytes.fromhex("fffcc0710eb6cf9efd5b920a8453e1e07157bfff")

_CASES: dict[str, Callable[[Case], None]] = {}


def case(check: Callable[[Case], None]) -> Callable[[Case], None]:
    """Registers ``check`` as a case, under its own name."""
    _CASES[check.__name__] = check
    return check


def now() -> datetime.datetime:
    return datetime.datetime.now(UTC)


class Case:
    """One case's client and its own corner of the database."""

    #: the reference's five listers (three named, one name with two instances)
    LISTERS = (("github", "github"), ("gitlab", "gitlab"), ("gitlab", "freedesktop"),
               ("npm", ""), ("pypi", ""))  # fmt: skip

    def __init__(self, scheduler: Any, area: str, number: int) -> None:
        self.scheduler = scheduler
        self.ns = f"{area}{number:02d}"
        #: three visit types of this case's own (the reference's fixture has five)
        self.visit_types = [f"{self.ns}-git", f"{self.ns}-hg", f"{self.ns}-svn"]
        self.register(self.visit_types)

    def register(self, visit_types: list[str]) -> None:
        """Makes ``visit_types`` known here: a task type ``load-TYPE`` each
        (ours refuses an origin of an unknown visit type, the reference
        takes any: docs/howto/origin-visits.md, "A visit type is known when
        task type load-<visit type> is registered")."""
        for visit_type in visit_types:
            self.scheduler.create_task_type(
                TaskType(type=f"load-{visit_type}", description=visit_type,
                         backend_name=f"loaders.{visit_type}")
            )  # fmt: skip

    def lister_name(self, name: str) -> str:
        return f"{self.ns}-{name}"

    def mine(self, listers: list[Lister]) -> list[Lister]:
        """``listers`` narrowed to this case's, in the order given."""
        return [x for x in listers if x.name.startswith(self.ns + "-")]

    def create_listers(self) -> list[Lister]:
        return [
            self.scheduler.get_or_create_lister(name=self.lister_name(n), instance_name=i)
            for n, i in self.LISTERS
        ]

    def stored_lister(self) -> Lister:
        name, instance = self.LISTERS[0]
        return self.scheduler.get_or_create_lister(
            name=self.lister_name(name), instance_name=instance
        )

    def origins_by_type(self, lister: Lister, per_type: int = 100) -> dict[str, list[ListedOrigin]]:
        """As the reference's fixture: per visit type, ``per_type`` origins with
        distinct forge dates (a microsecond apart, later types later), some forks."""
        return {
            visit_type: [
                ListedOrigin(
                    lister_id=lister.id,
                    url=f"https://{visit_type}.example.com/{i:04d}",
                    visit_type=visit_type,
                    last_update=datetime.datetime(
                        2020, 6, 15, 16, 0, 0, t * per_type + i, tzinfo=UTC
                    ),
                    is_fork=[True, False, None][i % 3],
                    forked_from_url=(
                        f"https://{visit_type}.example.com/src_{i:04d}" if i % 12 == 0 else None
                    ),
                )
                for i in range(per_type)
            ]
            for t, visit_type in enumerate(self.visit_types)
        }

    def listed_origins(self, lister: Lister, per_type: int = 100) -> list[ListedOrigin]:
        by_type = self.origins_by_type(lister, per_type)
        return [origin for origins in by_type.values() for origin in origins]


def expect_raises(kind: type[BaseException], call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except kind as error:
        return error
    raise AssertionError(f"{kind.__name__} not raised")


def run() -> None:
    url, token = sys.argv[1], sys.argv[2]
    area = os.path.basename(sys.argv[0])[:2]
    headers = {"Authorization": "Bearer " + token}
    scheduler = get_scheduler("remote", url=url, session_kwargs={"headers": headers})
    wanted = set(sys.argv[3:])
    results: dict[str, str | None] = {}
    for number, (name, check) in enumerate(_CASES.items()):
        if wanted and name not in wanted:
            continue
        try:
            check(Case(scheduler, area, number))
        except Exception:
            results[name] = traceback.format_exc(limit=-4)[-3000:]
        else:
            results[name] = None
    print(json.dumps(results))


__all__ = ["DAY", "SNAPSHOT", "UTC", "Case", "case", "expect_raises", "now", "run", "uuid"]
