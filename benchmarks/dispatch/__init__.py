"""Benchmarks of the dispatch room (:mod:`swh_like_scheduler.dispatch`): a runner pass."""
