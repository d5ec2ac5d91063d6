"""One log line per outage, not one traceback per attempt.

A daemon whose database or broker goes away keeps trying; its log should
say once that something is wrong (with the cause), stay quiet while it
tries again, and say when it works again and how long it was down::

    outage = Outage(logger, "runner pass")
    try:
        ...
    except SchedulerError as error:
        outage.failed(error)
    else:
        outage.ok()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class Outage:
    """The state of one kind of attempt: working, or failing since when."""

    def __init__(
        self, logger: logging.Logger, what: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._logger = logger
        self._what = what
        self._clock = clock
        self._since: float | None = None
        self._attempts = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, error: BaseException) -> None:
        """An attempt failed: logged as an error the first time only."""
        self._attempts += 1
        if self._since is None:
            self._since = self._clock()
            self._logger.error("%s failed: %s; retrying quietly until it works", self._what, error)
        else:
            self._logger.debug("%s failed again: %s", self._what, error)

    def ok(self) -> None:
        """An attempt worked: logged once if it ends an outage."""
        if self._since is None:
            return
        self._logger.warning(
            "%s works again after %.0f s (%d failed attempts)",
            self._what,
            self._clock() - self._since,
            self._attempts,
        )
        self._since, self._attempts = None, 0


__all__ = ["Outage"]
