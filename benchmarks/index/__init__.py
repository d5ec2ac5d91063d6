"""Benchmarks of the index room (:mod:`swh_like_scheduler.index`): the Redis index."""
