"""pyproject.toml names its packages one by one: a folder of the package that
is not listed would be left out of a wheel (``pip install .``), though every
test run from the checkout would still find it."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_folder_of_the_package_is_a_listed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "swh_like_scheduler").rglob("__init__.py")
    }
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert {p for p in listed if p.startswith("swh_like_scheduler.")} - found <= {
        "swh_like_scheduler.sql",
        "swh_like_scheduler.sql.versions",
    }
