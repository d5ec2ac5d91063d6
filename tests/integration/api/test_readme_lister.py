"""The origin-visit guide's lister script (``docs/howto/origin-visits.md``),
run as it is written against a real HTTP server: it registers, records
1,000 origins in pages, and a run cut short resumes from the state it
saved."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from api_server import WRITER, serving

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.domain.model import TaskType
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app

GUIDE = Path(__file__).parents[3] / "docs" / "howto" / "origin-visits.md"


def script() -> str:
    text = GUIDE.read_text()
    found = re.search(
        r"<!-- lister-script -->\n```python\n(.*?)```\n<!-- /lister-script -->", text, re.S
    )
    assert found, "the origin-visit guide lost its lister script"
    return found.group(1)


def test_the_readme_lister_records_and_resumes(
    store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_task_type(TaskType(type="load-git", backend_name="loader.git"))
    settings = ApiSettings(tokens=parse_tokens([f"{WRITER}:rw"]))
    code = compile(script(), "docs/howto/origin-visits.md (lister script)", "exec")
    with serving(create_app(store, settings)) as url:
        monkeypatch.setenv("SWH_SCHEDULER_URL", url)
        monkeypatch.setenv("SWH_SCHEDULER_API_TOKEN", WRITER)
        first: dict[str, Any] = {}
        exec(code, first)
        [lister] = store.get_listers()
        assert lister.current_state == {"page": 10}
        assert len(store.get_listed_origins(limit=10_000).origins) == 1000
        seen = {o.url: o.last_seen for o in store.get_listed_origins(limit=10_000).origins}
        # a run that stopped after page 4: the next one resumes at page 4
        store.update_lister(lister.__class__(**{**vars(lister), "current_state": {"page": 4}}))
        again: dict[str, Any] = {}
        exec(code, again)
    after = store.get_listed_origins(limit=10_000).origins
    assert len(after) == 1000 and store.get_listers()[0].current_state == {"page": 10}
    moved = sorted(
        int(o.url.rsplit("repo", 1)[1].removesuffix(".git"))
        for o in after
        if o.last_seen != seen[o.url]
    )
    assert moved == list(range(400, 1000))  # pages 4 to 9 listed again, not 0 to 3
