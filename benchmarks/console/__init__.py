"""Benchmarks of the console room (:mod:`swh_like_scheduler.console`): its pages."""
