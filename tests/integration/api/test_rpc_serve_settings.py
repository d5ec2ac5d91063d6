"""``rpc-serve``'s health and console settings, set from its command line in
a real process: the threshold /health reports and applies, the bound on
the clocks it names, how long a console session may stay unused; and the
values it refuses."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from rpc_process import SWH, serving_process
from waiting import wait_until

from swh_like_scheduler.store import SQLAlchemyStore

SECRET = "settings-secret-0123456789"


def test_health_and_console_follow_the_options(sqlite_url: str, tmp_path: Path) -> None:
    store = SQLAlchemyStore.from_url(sqlite_url)
    try:
        store.record_host_clock("ahead.example", role="runner", offset_seconds=-1.0)
        store.record_host_clock("close.example", role="listener", offset_seconds=0.3)
    finally:
        store.close()
    options = ("--tokens", f"{SECRET}:ro", "--health-stale-after", "45")
    options += ("--clock-bound", "0.5", "--console-idle", "2")
    with serving_process(sqlite_url, tmp_path, *options) as (_, port):
        url = f"http://127.0.0.1:{port}"
        health = httpx.get(f"{url}/health", timeout=30).json()
        assert health["stale_after"] == 45.0
        # 1 s off is past a bound of 0.5 s (not past the default 2 s); 0.3 s is not
        assert [c["host"] for c in health["clocks_off"]] == ["ahead.example"]
        assert "ahead.example is 1.0 s ahead of" in health["warnings"][0]
        page = {"Accept": "text/html"}
        with httpx.Client(base_url=url, timeout=30, headers=page) as browser:
            login = browser.post("/console/login", data={"token": SECRET, "next": "/console/"})
            assert login.status_code == 303, login.text
            assert browser.get("/console/").status_code == 200

            def logged_out() -> bool:
                answer = browser.get("/console/live")
                assert answer.status_code in (200, 401), answer.text
                return answer.status_code == 401

            # the live updates are no use: the session ends 2 s after the last page
            wait_until(logged_out, 30, "the unused session to end")
            assert browser.get("/console/").status_code == 303


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--console-idle", "0"),
        ("--console-idle", "43201"),  # past a session's 12-hour life
        ("--health-stale-after", "0.5"),
        ("--clock-bound", "0"),
        ("--clock-bound", "soon"),
    ],
)
def test_a_value_out_of_range_is_refused_by_name(sqlite_url: str, option: str, value: str) -> None:
    command = [SWH, "scheduler", "--db-url", sqlite_url, "rpc-serve", option, value]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}'" in done.stderr
