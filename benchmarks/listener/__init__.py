"""Benchmarks of the listener room (:mod:`swh_like_scheduler.listener`): events to history."""
