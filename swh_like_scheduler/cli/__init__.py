"""The ``swh scheduler`` command line (click).

Commands are loaded on first use (:mod:`.tree`): ``swh --help`` imports no
command module, and each command imports only what it needs.
"""

from .base import scheduler, swh
from .swh_core import main, scheduler_main

__all__ = ["main", "scheduler", "scheduler_main", "swh"]
