"""Benchmarks of the cli room (:mod:`swh_like_scheduler.cli`): ``swh`` as an operator runs it."""
