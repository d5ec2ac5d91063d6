"""Benchmarks of the visits room (:mod:`swh_like_scheduler.visits`): origins listed, grabbed."""
