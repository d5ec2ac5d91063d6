"""The example systemd units shipped in the package (``docs/systemd``):
package data, well formed (``systemd-analyze verify`` when it is there),
restart policies and stop settings set, and every ``ExecStart`` a real
command with real options (asked to the command's own ``--help``)."""

from __future__ import annotations

import configparser
import fnmatch
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from swh_like_scheduler.cli import swh

ROOT = Path(__file__).resolve().parents[3]
UNITS = {
    "swh-scheduler-runner.service": "start-runner",
    "swh-scheduler-listener.service": "start-listener",
    "swh-scheduler-monitor.service": "start-monitor",
    "swh-scheduler-api.service": "rpc-serve",
    "swh-scheduler-worker@.service": "worker",
}
#: where the units expect the package's virtual environment
VENV_BIN = "/opt/swh-scheduler/venv/bin/"


def shipped() -> dict[str, str]:
    folder = resources.files("swh_like_scheduler").joinpath("docs/systemd")
    return {
        entry.name: entry.read_text()
        for entry in folder.iterdir()
        if entry.name.endswith(".service")
    }


def parsed(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read_string(text)
    return parser


def test_the_units_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config["package-data"]["swh_like_scheduler"]
    assert sorted(shipped()) == sorted(UNITS)
    folder = ROOT / "swh_like_scheduler"
    for path in (folder / "docs/systemd").iterdir():
        relative = str(path.relative_to(folder))
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), relative


@pytest.mark.parametrize("name", sorted(UNITS))
def test_each_unit_restarts_stops_warmly_and_reads_the_environment_file(name: str) -> None:
    unit = parsed(shipped()[name])
    assert unit.sections() == ["Unit", "Service", "Install"]
    service = unit["Service"]
    assert service["Restart"] in ("always", "on-failure")
    assert float(service["RestartSec"]) >= 1
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= 30
    assert service["EnvironmentFile"] == "/etc/swh-scheduler/scheduler.env"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    if name.startswith("swh-scheduler-worker@"):
        # Celery's warm shutdown: SIGTERM to the main process alone, time for the tasks
        assert service["KillMode"] == "mixed" and int(service["TimeoutStopSec"]) >= 300
        assert service["Restart"] == "on-failure"


@pytest.mark.parametrize("name", sorted(UNITS))
def test_each_exec_start_is_a_real_command_with_real_options(name: str) -> None:
    argv = shlex.split(parsed(shipped()[name])["Service"]["ExecStart"])
    assert argv[0].startswith(VENV_BIN)
    program = argv[0][len(VENV_BIN) :]
    options = [a for a in argv if a.startswith("-")]
    if program == "swh":
        assert argv[1] == "scheduler" and argv[2] == UNITS[name]
        shown = CliRunner().invoke(swh, ["scheduler", argv[2], "--help"])
        assert shown.exit_code == 0, shown.output
        help_text = shown.output
    else:
        assert program == "celery"
        assert argv[1:4] == ["-A", "swh_like_scheduler.celery_app", UNITS[name]]
        asked = [sys.executable, "-m", "celery", "-A", argv[2], argv[3], "--help"]
        done = subprocess.run(asked, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        help_text = done.stdout
    for option in options:
        assert f"{option}," in help_text or f"{option} " in help_text, (name, option)


def test_systemd_analyze_verifies_them(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the structural checks above ran)")
    bin_dir = str(Path(sys.executable).parent) + "/"
    for name, text in shipped().items():
        (tmp_path / name).write_text(text.replace(VENV_BIN, bin_dir))
    units = [n.replace("@.service", "@swh_like_workers.sleep.sleep.service") for n in UNITS]
    done = subprocess.run(
        [analyze, "verify", *units], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    ours = [line for line in done.stderr.splitlines() if "swh-scheduler" in line]
    assert done.returncode == 0 and ours == [], done.stderr
