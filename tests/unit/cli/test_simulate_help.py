"""``swh scheduler simulate --help`` names every workload it ships."""

from __future__ import annotations

from click.testing import CliRunner

from swh_like_scheduler.cli import swh
from swh_like_scheduler.simulator.workload import SHIPPED


def test_the_help_names_every_shipped_workload() -> None:
    result = CliRunner().invoke(swh, ["scheduler", "simulate", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    help_text = " ".join(result.output.split())
    missing = [name for name in SHIPPED if name not in help_text]
    assert not missing, f"simulate --help does not name {missing}"
