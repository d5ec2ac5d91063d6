"""The installation's identity (:mod:`.sql_identity`)."""

from __future__ import annotations

from typing import Protocol


class IdentityStore(Protocol):
    """The installation's identity."""

    def installation_id(self) -> str:
        """The installation's random id, stored in its database (written by
        ``db init`` or the first call): the same for every process of the
        installation, whatever URL it connects with; never the same for two
        installations. The listener's default event queue and the
        namespace of the run ids derive from it."""
        ...
