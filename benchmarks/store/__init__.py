"""Benchmarks of the store room (:mod:`swh_like_scheduler.store`): claims and bulk actions."""
