"""What `pip install .` installs: every package of the source tree."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_every_package_of_the_tree_is_installed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "swh_like_scheduler").rglob("__init__.py")
    }
    missing = sorted(found - listed)
    assert not missing, f"packages a non-editable install would leave out: {missing}"


def test_the_shipped_workloads_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "workloads/*.toml" in config["package-data"]["swh_like_scheduler.simulator"]
    folder = ROOT / "swh_like_scheduler/simulator/workloads"
    shipped = sorted(p.stem for p in folder.glob("*.toml"))
    from swh_like_scheduler.simulator.workload import SHIPPED

    assert shipped == sorted(SHIPPED)


def test_no_listed_package_is_gone_from_the_tree() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "swh_like_scheduler").rglob("__init__.py")
    }
    stale = {
        p for p in config["packages"] if p.startswith("swh_like_scheduler.") and p not in found
    }
    # (the migrations are installed from sql/ under the package's name)
    assert stale <= {"swh_like_scheduler.sql", "swh_like_scheduler.sql.versions"}
