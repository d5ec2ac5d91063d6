"""The wheel a user installs: the package's own modules and nothing else at
the top (a top-level ``celeryconfig`` would be read by every other Celery
app of the environment that asks for its own)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_installs_no_top_level_module(tmp_path: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    source = tmp_path / "source"
    for name in filter(None, files):
        path = ROOT / name.decode()
        if path.is_file():  # (a file deleted in the work tree is not shipped)
            target = source / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    info = {t for t in top if t.endswith(".dist-info")}
    assert top - info == {"swh_like_scheduler", "swh_like_workers"}, sorted(top)
    assert not [n for n in names if "/" not in n], "a module at the top of the wheel"
    # the platform's settings are the package's own
    assert "swh_like_scheduler/celeryconfig.py" in names
    [listed] = [n for n in names if n.endswith("top_level.txt")]
    assert set(zipfile.ZipFile(wheel).read(listed).decode().split()) == {
        "swh_like_scheduler",
        "swh_like_workers",
    }
