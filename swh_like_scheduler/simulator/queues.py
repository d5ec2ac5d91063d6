"""The broker's queues in a simulation: one FIFO per queue name, on the
simulated clock. A runner pass publishes to them through the same port as
to a real broker (:class:`~swh_like_scheduler.broker.port.QueuePort`)."""

from __future__ import annotations

from collections.abc import Sequence

import simpy

from ..broker.message import Message


class SimQueues:
    """:class:`~swh_like_scheduler.broker.port.QueuePort` over SimPy stores:
    a message published is waiting at once; a worker takes the oldest."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._queues: dict[str, simpy.Store] = {}
        self.published = 0

    def queue(self, name: str) -> simpy.Store:
        if name not in self._queues:
            self._queues[name] = simpy.Store(self.env)
        return self._queues[name]

    def depths(self, queues: Sequence[str]) -> dict[str, int]:
        return {name: len(self.queue(name).items) for name in queues}

    def publish(self, messages: Sequence[Message]) -> int:
        for message in messages:
            self.queue(message.queue).put(message)
        self.published += len(messages)
        return len(messages)

    def depth(self, name: str) -> int:
        return len(self.queue(name).items)
