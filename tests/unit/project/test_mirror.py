"""The test and benchmark folders mirror the package's rooms: a folder of
``tests/unit``, ``tests/integration`` or ``benchmarks`` is a room of
``swh_like_scheduler`` or one of the few folders the development page names
as not a room, and no test or scenario lies loose beside them."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: the folders that are not rooms, each said in docs/development.md
NOT_ROOMS = {
    "tests/unit": {"project"},
    "tests/integration": {"contract", "workers"},
    "benchmarks": {"whole", "peers"},
}


def rooms(package: Path) -> set[str]:
    return {p.parent.name for p in package.glob("*/__init__.py")}


def strays(root: Path, folder: str, known: set[str]) -> list[str]:
    """The folders of ``root/folder`` that are neither a room nor a named
    exception, and the test or scenario files lying loose in it."""
    base = root / folder
    found = [
        f"{folder}/{p.name}/"
        for p in sorted(base.iterdir())
        if p.is_dir() and not p.name.startswith((".", "_")) and p.name not in known
    ]
    loose = "test_*.py" if folder.startswith("tests") else "scenario_*.py"
    found += [f"{folder}/{p.name}" for p in sorted(base.glob(loose))]
    return found


def test_every_test_and_benchmark_folder_is_a_room() -> None:
    known = rooms(ROOT / "swh_like_scheduler")
    assert {"domain", "dispatch", "store", "runner"} <= known
    for folder, others in NOT_ROOMS.items():
        assert not strays(ROOT, folder, known | others), folder


def test_the_named_exceptions_are_in_the_development_page() -> None:
    page = (ROOT / "docs/development.md").read_text()
    for folder, others in NOT_ROOMS.items():
        for name in others:
            assert f"{folder}/{name}/" in page, f"{folder}/{name}/"


def test_a_folder_that_is_no_room_and_a_loose_test_are_found(tmp_path: Path) -> None:
    (tmp_path / "tests/unit/dispatch").mkdir(parents=True)
    (tmp_path / "tests/unit/helpers").mkdir()
    (tmp_path / "tests/unit/__pycache__").mkdir()
    (tmp_path / "tests/unit/test_loose.py").write_text("")
    found = strays(tmp_path, "tests/unit", {"dispatch"})
    assert found == ["tests/unit/helpers/", "tests/unit/test_loose.py"]
