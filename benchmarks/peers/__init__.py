"""Benchmarks against other projects (celery beat, RedBeat, procrastinate)."""
