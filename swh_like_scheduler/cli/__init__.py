"""The ``swh scheduler`` command line (click).

Commands are loaded on first use (:mod:`.tree`): ``swh --help`` imports no
command module, and each command imports only what it needs.
"""

from .base import main, scheduler, swh

__all__ = ["main", "scheduler", "swh"]
