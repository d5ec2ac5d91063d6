"""Benchmarks of the runner room (:mod:`swh_like_scheduler.runner`): the runner daemon."""
