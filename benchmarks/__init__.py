"""Benchmarks of swh_like_scheduler, run on demand (``python -m benchmarks``).

Each scenario sits in the folder of the package's room it measures
(``dispatch/``, ``store/``, ...; ``whole/`` for the whole path, ``peers/``
for other projects beside ours); the kit they share stays here. The test
suite imports only :mod:`benchmarks.results` and the arithmetic of
:mod:`benchmarks.whole.writes` (pure); see ``benchmarks/README.md``.
"""
