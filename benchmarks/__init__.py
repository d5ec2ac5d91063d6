"""Benchmarks of swh_like_scheduler, run on demand (``python -m benchmarks``).

The test suite imports only :mod:`benchmarks.results` (pure); see
``benchmarks/README.md``.
"""
