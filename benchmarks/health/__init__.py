"""Benchmarks of the health room (:mod:`swh_like_scheduler.health`): the census."""
