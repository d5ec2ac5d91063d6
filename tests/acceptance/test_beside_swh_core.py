"""This package and swh-scheduler (with swh-core, whose package also
installs a ``swh`` script) in one environment, each installed from the
package index into a throwaway venv: whichever wrote ``bin/swh`` last,
``swh scheduler`` is swh-scheduler's, ``swh like-scheduler`` and
``swh-like-scheduler`` are ours and run a command on a database.

About a minute (two installs with their dependencies): in the full cut
only (``SWH_SLOW=full``, tests/cuts.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuts import FULL

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.skipif(not FULL, reason="two installs from the index: SWH_SLOW=full"),
]

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "swh-scheduler==3.6.0"
SWH_CORE = "swh-core==5.0.1"
#: the reference's own help line for its group
THEIR_GROUP = "Software Heritage Scheduler tools."
OUR_GROUP = "Manage the scheduler: task types, tasks, runs and the database."


def run(*argv: str | Path, timeout: float = 600) -> str:
    done = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd="/"
    )
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def source_tree(target: Path) -> Path:
    """The files of this checkout that git does not ignore (no build output)."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        path = ROOT / name.decode()
        if path.is_file():
            destination = target / name.decode()
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
    return target


def both_reachable(bin_dir: Path, db: Path) -> None:
    assert THEIR_GROUP in run(bin_dir / "swh", "scheduler", "--help")
    assert OUR_GROUP in run(bin_dir / "swh", "like-scheduler", "--help")
    listing = run(bin_dir / "swh", "--help")
    assert "  scheduler " in listing and "  like-scheduler " in listing
    url = f"sqlite:///{db}"
    run(bin_dir / "swh-like-scheduler", "--db-url", url, "db", "init")
    for argv in (["swh-like-scheduler"], ["swh", "like-scheduler"]):
        types = run(bin_dir / argv[0], *argv[1:], "--db-url", url, "task-type", "list", "--json")
        assert types.strip().startswith("["), types


def test_swh_core_and_this_package_in_one_environment(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile"]
    run(*pip, REFERENCE)
    # ours last: our package wrote bin/swh
    run(*pip, source_tree(tmp_path / "source"))
    script = (venv / "bin" / "swh").read_text()
    assert "swh_like_scheduler" in script
    both_reachable(venv / "bin", tmp_path / "a.sqlite")
    # swh-core last: its package wrote bin/swh
    run(*pip, "--force-reinstall", "--no-deps", SWH_CORE)
    script = (venv / "bin" / "swh").read_text()
    assert "swh.core.cli" in script and "swh_like_scheduler" not in script
    both_reachable(venv / "bin", tmp_path / "b.sqlite")
