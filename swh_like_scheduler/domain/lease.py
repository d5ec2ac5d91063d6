"""What the store answers to the lease protocol: now in
:mod:`swh_like_scheduler.domain.records` (the model layer), re-exported here."""

from __future__ import annotations

from .records import (
    ASSIGNED,
    PINGED_LATE,
    REFUSED_COPY,
    RETRYING,
    STOLEN,
    TIMED_OUT,
    YIELDED,
    LeaseGrant,
    PingAnswer,
    PingReply,
    Refusal,
    Renewal,
    StealReport,
)

__all__ = [
    "ASSIGNED",
    "PINGED_LATE",
    "REFUSED_COPY",
    "RETRYING",
    "STOLEN",
    "TIMED_OUT",
    "YIELDED",
    "LeaseGrant",
    "PingAnswer",
    "PingReply",
    "Refusal",
    "Renewal",
    "StealReport",
]
