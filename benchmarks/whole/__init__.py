"""Benchmarks of the whole path (runner → worker → listener), no single room."""
