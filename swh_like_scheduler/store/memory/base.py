"""The state, the writes and the hooks every part of the memory store shares."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Self

from ...domain.model import MAX_ARGUMENT_BYTES
from ..sql_identity import run_namespace_of
from ..values import Capabilities
from .state import State

#: what a store held in one process can do: one writer at a time (a lock),
#: no other process to notify
CAPABILITIES = Capabilities(
    skip_locked=False,
    concurrent_writers=False,
    id_sequences=True,
    notifications=False,
)


class MemoryBase:
    """One process's store: every row in :class:`.state.State`, each call
    under its lock, each write undone whole if it raises."""

    def __init__(self, *, max_argument_bytes: int | None = MAX_ARGUMENT_BYTES) -> None:
        self._state = State()
        #: new tasks whose arguments' JSON is longer are refused (``None``: no limit)
        self.max_argument_bytes = max_argument_bytes
        self._namespace: uuid.UUID | None = None

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    def close(self) -> None:
        """Nothing to release: the rows go with the object."""

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """A block whose calls are written together, or not at all if it
        raises (other threads wait for it to end)."""
        with self._state.writing("transaction"):
            yield self

    @contextmanager
    def _write(self, where: str) -> Iterator[None]:
        with self._state.writing(where):
            yield

    def _announce(self, type_names: Iterable[str]) -> None:
        """Types that may have new ready tasks (a database store wakes the
        runners of other processes; one in memory has none to wake)."""

    # -- identity -------------------------------------------------------------

    def installation_id(self) -> str:
        with self._state.lock:
            found = self._state.installation.get("id")
            if found is None:
                found = str(uuid.uuid4())
                self._state.installation["id"] = found
            return found

    def _run_namespace(self) -> uuid.UUID:
        if self._namespace is None:
            self._namespace = run_namespace_of(self.installation_id())
        return self._namespace
