"""Benchmarks of the intake room (:mod:`swh_like_scheduler.intake`): the bulk import."""
