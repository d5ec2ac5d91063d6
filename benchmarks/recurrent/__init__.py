"""Benchmarks of the recurrent room (:mod:`swh_like_scheduler.recurrent`): visits sent."""
