"""Our ``swh`` beside swh-core's (swh_like_scheduler/cli/swh_core.py): the
handover when swh-core is installed, ``swh-like-scheduler``, and the plug-in
that adds our group to swh-core's ``swh`` as ``like-scheduler``. swh-core
itself is installed for real in tests/acceptance/test_beside_swh_core.py."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
import types
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from swh_like_scheduler import cli
from swh_like_scheduler.cli import swh_core
from swh_like_scheduler.standalone.platform import swh_command

ROOT = Path(__file__).resolve().parents[3]


def fake_swh_core(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A stand-in for ``swh.core.cli``: its root group, and a ``main`` that
    records being called."""
    calls: list[str] = []
    module = types.ModuleType("swh.core.cli")
    module.swh = click.Group("swh")  # type: ignore[attr-defined]
    module.main = lambda: calls.append("core")  # type: ignore[attr-defined]
    for name, value in (
        ("swh", types.ModuleType("swh")),
        ("swh.core", types.ModuleType("swh.core")),
    ):
        monkeypatch.setitem(sys.modules, name, value)
    monkeypatch.setitem(sys.modules, "swh.core.cli", module)
    return types.SimpleNamespace(module=module, calls=calls)


def test_the_scripts_and_the_plug_in_are_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["swh"] == "swh_like_scheduler.cli:main"
    assert project["scripts"]["swh-like-scheduler"] == "swh_like_scheduler.cli:scheduler_main"
    plugins = project["entry-points"]["swh.cli.subcommands"]
    assert plugins == {"like-scheduler": "swh_like_scheduler.cli.swh_core_plugin"}
    assert cli.main is swh_core.main and cli.scheduler_main is swh_core.scheduler_main


def test_our_swh_hands_over_to_swh_core_when_it_is_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    core = fake_swh_core(monkeypatch)
    monkeypatch.setattr(swh_core, "swh_core_installed", lambda: True)
    monkeypatch.setattr(sys, "argv", ["swh", "--help"])
    swh_core.main()
    assert core.calls == ["core"] and capsys.readouterr().out == ""
    # given its arguments (standalone's children), it is always ours
    with pytest.raises(SystemExit) as ended:
        swh_core.main(["--help"])
    assert ended.value.code == 0 and "Software Heritage-like" in capsys.readouterr().out
    assert core.calls == ["core"]


def test_without_swh_core_our_swh_is_ours(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(swh_core, "swh_core_installed", lambda: False)
    monkeypatch.setattr(sys, "argv", ["swh", "scheduler", "--help"])
    with pytest.raises(SystemExit) as ended:
        swh_core.main()
    out = capsys.readouterr().out
    assert ended.value.code == 0 and "Usage: swh scheduler " in out


def test_swh_core_installed_reads_the_metadata() -> None:
    # swh-core is not in the project's own environment
    assert swh_core.swh_core_installed() is (importlib.util.find_spec("swh") is not None)


def test_swh_like_scheduler_is_the_scheduler_group_under_its_own_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        swh_core.scheduler_main(["--help"])
    out = capsys.readouterr().out
    assert ended.value.code == 0
    assert out.startswith("Usage: swh-like-scheduler [OPTIONS] COMMAND") and "rpc-serve" in out


def test_the_plug_in_adds_our_group_to_swh_core_as_like_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    core = fake_swh_core(monkeypatch)
    monkeypatch.delitem(sys.modules, "swh_like_scheduler.cli.swh_core_plugin", raising=False)
    importlib.import_module("swh_like_scheduler.cli.swh_core_plugin")
    root: click.Group = core.module.swh
    assert root.commands == {"like-scheduler": cli.scheduler}
    ran = CliRunner().invoke(root, ["like-scheduler", "--help"])
    assert ran.exit_code == 0 and "Usage: swh like-scheduler " in ran.output


def test_standalone_runs_its_children_through_our_main_beside_swh_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = types.SimpleNamespace(name="swh")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: found if name == "swh" else None)
    command = swh_command()
    assert command[0] == sys.executable and command[1] == "-c"
    assert "main(sys.argv[1:])" in command[2]
