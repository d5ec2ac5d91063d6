"""Benchmarks of the api room (:mod:`swh_like_scheduler.api`): the HTTP API."""
