"""Errors raised by the broker layer.

Both are :class:`~swh_like_scheduler.domain.exceptions.SchedulerError`, so daemons
that already handle the scheduler's exception tree handle these too.
"""

from __future__ import annotations

from swh_like_scheduler.domain.exceptions import SchedulerError


class BrokerError(SchedulerError):
    """The message broker could not be reached or refused an operation."""


class PublishError(BrokerError):
    """Publishing a batch of task messages failed part-way or entirely.

    ``published`` is how many messages, from the start of the batch, were
    handed to the broker before the failure (the broker acknowledged the
    write); the fate of the others is unknown or they were not sent at all.
    ``total`` is the size of the batch.  The runs of the batch are still
    recorded as scheduled in the store, so the monitor can re-publish them;
    a re-published message carries the same task id, so a copy that did
    reach the broker is recognised as a duplicate rather than run twice.
    """

    def __init__(self, reason: str, *, published: int, total: int) -> None:
        self.reason = reason
        self.published = published
        self.total = total
        super().__init__(
            f"publishing {total} task message(s) failed after {published} were "
            f"accepted by the broker: {reason}; the runs stay scheduled and will "
            "be re-published"
        )


class QueueDepthError(BrokerError):
    """The length of a broker queue could not be read."""
