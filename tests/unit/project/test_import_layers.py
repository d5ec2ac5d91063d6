"""The house's floors hold (pyproject's ``[tool.importlinter]`` contracts:
each room imports only the rooms below it, and no circle of imports), and
the check fails on a copy of the package where a floor is broken or a
circle closed: the contracts would catch the commit that did it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT = Path(sys.executable).parent / "lint-imports"


def lint(checkout: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with ``checkout``'s contracts, over its package."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return subprocess.run(
        [str(LINT), str(checkout / "pyproject.toml"), "--no-cache"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package and its contracts, to break."""
    where = tmp_path_factory.mktemp("house")
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    shutil.copytree(
        ROOT / "swh_like_scheduler",
        where / "swh_like_scheduler",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return where


def test_the_package_keeps_its_floors_and_has_no_circle() -> None:
    found = lint(ROOT)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "2 kept, 0 broken" in found.stdout


def append(module: Path, line: str) -> str:
    before = module.read_text()
    module.write_text(before + "\n" + line + "\n")
    return before


def test_a_ground_floor_module_importing_a_room_above_breaks_the_floors(copy: Path) -> None:
    module = copy / "swh_like_scheduler/domain/text.py"
    before = append(module, "from ..store import values  # noqa: E402,F401")
    try:
        found = lint(copy)
    finally:
        module.write_text(before)
    assert found.returncode != 0
    assert "each room imports only the rooms below it BROKEN" in found.stdout
    assert "swh_like_scheduler.domain.text -> swh_like_scheduler.store.values" in found.stdout


def test_a_circle_between_two_modules_of_one_room_is_refused(copy: Path) -> None:
    # text.py imports nothing of the domain: enums -> text -> enums closes a circle
    module = copy / "swh_like_scheduler/domain/text.py"
    before = append(module, "from . import enums  # noqa: E402,F401")
    enums = copy / "swh_like_scheduler/domain/enums.py"
    enums_before = append(enums, "from . import text  # noqa: E402,F401")
    try:
        found = lint(copy)
    finally:
        module.write_text(before)
        enums.write_text(enums_before)
    assert found.returncode != 0
    assert "no circle of imports, between rooms or between the modules of a room BROKEN" in (
        found.stdout
    )
    assert "each room imports only the rooms below it KEPT" in found.stdout
