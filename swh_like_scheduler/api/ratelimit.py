"""A request rate per client: token buckets, in the API's process.

Each client (the token it sends, else its address) may make ``rate``
requests per second, ``burst`` at once; past that it gets a 429 with
``Retry-After`` (seconds). The buckets of the clients seen least recently
are forgotten beyond :data:`MAX_CLIENTS`, so a flood of addresses cannot
grow the server's memory."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

#: clients whose buckets are kept
MAX_CLIENTS = 10_000


class Buckets:
    def __init__(
        self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs a rate above 0 and a burst of at least 1")
        self.rate, self.burst, self._clock = rate, burst, clock
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, client: Hashable) -> int | None:
        """Take one request for ``client``: ``None`` when allowed, else the
        whole seconds to wait."""
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.pop(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            allowed = tokens >= 1
            if allowed:
                tokens -= 1
            self._buckets[client] = (tokens, now)
            while len(self._buckets) > MAX_CLIENTS:
                self._buckets.popitem(last=False)
        return None if allowed else max(1, math.ceil((1 - tokens) / self.rate))
