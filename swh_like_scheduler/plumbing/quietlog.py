"""Repeated failures logged once per interval, with a count.

During an outage every delivery, retry or event can fail the same way: a
worker logging one line per failure writes thousands of identical lines
and hides what matters. :class:`QuietLog` writes the first occurrence of a
kind (``key``) at once, then at most one line per ``every`` seconds for that
kind, saying how many occurrences it left out::

    quiet = QuietLog(logger, logging.WARNING)
    quiet.log("run %s: the database is away (%s)", run_id, error, key="database")
    # ... later, at most once a minute:
    # "run ...: the database is away (...) [and 4039 more like it in 60 s]"

:meth:`QuietLog.ok` ends an outage of one kind (its count is written, and
its next failure is written at once); :meth:`QuietLog.flush` writes every
count still held (when a daemon stops). One instance per kind of message and
process; safe across threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass
class _Kind:
    logged_at: float
    left_out: int = 0
    last: tuple[str, tuple[object, ...]] | None = None


class QuietLog:
    """First occurrence at once, then one line per ``every`` seconds and kind."""

    def __init__(
        self,
        logger: logging.Logger,
        level: int = logging.WARNING,
        *,
        every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger, self._level, self._every, self._clock = logger, level, every, clock
        self._kinds: dict[Hashable, _Kind] = {}
        self._lock = threading.Lock()

    def log(self, message: str, *args: object, key: Hashable = None) -> bool:
        """Log ``message % args`` unless a line of kind ``key`` was written
        less than ``every`` seconds ago (then it is counted). True when written."""
        now = self._clock()
        with self._lock:
            kind = self._kinds.get(key)
            if kind is not None and now - kind.logged_at < self._every:
                kind.left_out += 1
                kind.last = (message, args)
                return False
            left_out = kind.left_out if kind is not None else 0
            since = now - kind.logged_at if kind is not None else 0.0
            self._kinds[key] = _Kind(logged_at=now)
        if left_out:
            self._logger.log(
                self._level,
                message + " [and %d more like it in %.0f s]",
                *args,
                left_out,
                since,
            )
        else:
            self._logger.log(self._level, message, *args)
        return True

    def left_out(self, key: Hashable = None) -> int:
        """Occurrences of kind ``key`` not written yet."""
        with self._lock:
            kind = self._kinds.get(key)
            return kind.left_out if kind is not None else 0

    def ok(self, key: Hashable = None) -> None:
        """What failed as kind ``key`` works again: its count is written (if
        any) and the next failure of that kind is written at once."""
        with self._lock:
            kind = self._kinds.pop(key, None)
        if kind is not None:
            self._write_left_out(kind, self._clock())

    def flush(self) -> None:
        """Write, for each kind with occurrences left out, its last one with
        the count; then forget every kind (the next occurrence is written)."""
        now = self._clock()
        with self._lock:
            kinds, self._kinds = self._kinds, {}
        for kind in kinds.values():
            self._write_left_out(kind, now)

    def _write_left_out(self, kind: _Kind, now: float) -> None:
        if kind.left_out and kind.last is not None:
            message, args = kind.last
            self._logger.log(
                self._level,
                message + " [%d like it in %.0f s]",
                *args,
                kind.left_out,
                now - kind.logged_at,
            )


__all__ = ["QuietLog"]
