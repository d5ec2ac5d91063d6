"""The threads a runner's passes hand their work to, kept for the runner's life.

A pass publishes each claimed chunk on one thread, in dispatch order, while
it claims the next (:class:`~.dispatch._Serving`), and with several claimers
claims chunks on others. Starting those threads for every pass of every
type cost a thread per hand-over (1,344 threads in a simulated day of 2,000
tasks, and a third of a pass's time spent waiting for them to start): a
runner opens its :class:`PassPools` once and gives them to every
:func:`~.dispatch.tick`; a lone call of ``tick`` without them opens its own
for the pass, as before.

The publisher has one thread, so the chunks of one type are published in
the order they were handed over whatever the type; a runner serves its
types one after the other, so nothing waits behind another type's chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class PassPools:
    """A publisher thread and ``claimers - 1`` claim threads (the pass's own
    thread claims too)."""

    claimers: int
    publisher: ThreadPoolExecutor
    claims: ThreadPoolExecutor

    @classmethod
    def open(cls, claimers: int) -> PassPools:
        return cls(
            claimers=claimers,
            publisher=ThreadPoolExecutor(max_workers=1, thread_name_prefix="publish"),
            claims=ThreadPoolExecutor(max_workers=max(1, claimers - 1), thread_name_prefix="claim"),
        )

    def close(self) -> None:
        """Wait for the work handed over, then stop the threads."""
        self.publisher.shutdown(wait=True)
        self.claims.shutdown(wait=True)


@contextmanager
def pass_pools(given: PassPools | None, claimers: int) -> Iterator[PassPools]:
    """``given`` when there is one (left open), else pools for one pass,
    closed after it."""
    if given is not None:
        yield given
        return
    pools = PassPools.open(claimers)
    try:
        yield pools
    finally:
        pools.close()
