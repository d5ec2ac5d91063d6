"""A missing PostgreSQL driver is one line naming what to install, not a traceback."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = (
    "import sys; sys.modules['psycopg'] = None; "  # as if psycopg were not installed
    "from swh_like_scheduler.cli import main; "
    "sys.argv = ['swh', 'scheduler', '--db-url', 'postgresql://u@127.0.0.1:1/x', "
    "'task-type', 'list']; main()"
)


def test_a_missing_driver_names_the_package_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "db_url" in lines[0] and "pip install 'psycopg[binary]'" in lines[0]
    assert "Traceback" not in done.stderr + done.stdout
