"""The reference's cases that read every listed origin of the database, with
no lister named: run first, on the database before any other case wrote in
it, and in this order (the second records the first's origins again, half
of them disabled, which is the state its reference test starts from).
"""

from __future__ import annotations

import attr
from common import Case, case, run


def _fresh(c: Case) -> Case:
    """Both cases share one corner (one lister, the same urls)."""
    c.ns = "wh00"
    c.visit_types = ["wh00-git", "wh00-hg", "wh00-svn"]
    c.register(c.visit_types)
    return c


@case
def every_listed_origin_in_one_page_larger_than_them_all(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listed_origins_all
    c = _fresh(c)
    origins = c.listed_origins(c.stored_lister())
    c.scheduler.record_listed_origins(origins)
    page = c.scheduler.get_listed_origins(limit=len(origins) + 1)
    assert page.next_page_token is None
    assert len(page.results) == len(origins), len(page.results)


@case
def listed_origins_by_enabled_true_false_or_either(c: Case) -> None:
    # reference: test_scheduler.py::test_get_listed_origins_with_enabled_parameter
    c = _fresh(c)
    origins = [
        attr.evolve(o, enabled=n % 2 == 0)
        for n, o in enumerate(c.listed_origins(c.stored_lister()))
    ]
    c.scheduler.record_listed_origins(origins)
    limit = len(origins) + 1
    for enabled in (True, False):
        page = c.scheduler.get_listed_origins(enabled=enabled, limit=limit)
        assert page.next_page_token is None
        assert len(page.results) == len([o for o in origins if o.enabled is enabled])
        assert all(o.enabled is enabled for o in page.results)
    page = c.scheduler.get_listed_origins(enabled=None, limit=limit)
    assert page.next_page_token is None
    assert len(page.results) == len(origins)


if __name__ == "__main__":
    run()
