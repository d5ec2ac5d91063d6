"""Benchmarks of swh_like_scheduler, run on demand (``python -m benchmarks``).

Never imported by the test suite; see ``benchmarks/README.md``.
"""
