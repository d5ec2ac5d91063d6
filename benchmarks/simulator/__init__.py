"""Benchmarks of the simulator room (:mod:`swh_like_scheduler.simulator`): its engine."""
