"""Dispatch: one runner pass (:func:`.serve.tick`) claims the ready tasks of
each type in the dispatch order and publishes them to their queues. Beside
it: what a pass did (:mod:`.passes`), the slots kept from long runs
(:mod:`.reserve`), the room a pass records for the monitor (:mod:`.room`),
paused types (:mod:`.pauses`), the pass's threads (:mod:`.pools`), the live
workers of each queue (:mod:`.routing`), runs whose message was lost
published again (:mod:`.republish`) and the runner's metrics
(:mod:`.metrics`).

It may import the store, the broker, the policy and the Redis index; the
monitor and the runner's loop sit above it."""

from .passes import PassReport, TypePass
from .serve import tick

__all__ = ["PassReport", "TypePass", "tick"]
