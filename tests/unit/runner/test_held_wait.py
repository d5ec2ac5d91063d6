"""How long the runner waits after a pass that left ready rows held by
another transaction (runner/loop.py: ``held_wait``)."""

from __future__ import annotations

from swh_like_scheduler.runner.loop import HELD_WAIT_CAP, held_wait


def test_the_runner_waits_longer_while_rows_stay_held_never_past_its_period() -> None:
    assert [held_wait(n, 60.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert all(held_wait(n, 1.0) == 1.0 for n in range(1, 5))
    assert held_wait(10_000, 60.0) == HELD_WAIT_CAP
