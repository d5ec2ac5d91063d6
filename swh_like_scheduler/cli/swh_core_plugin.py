"""Our ``scheduler`` group as a swh-core plug-in: ``swh like-scheduler``.

swh-core's ``swh`` imports each module its ``swh.cli.subcommands`` entry
points name; this one adds our group to swh-core's root group under
:data:`~.swh_core.PLUGIN_NAME` (``swh scheduler`` stays swh-scheduler's).
Imported only by swh-core: it needs swh-core installed."""

from __future__ import annotations

import importlib

from .base import scheduler
from .swh_core import PLUGIN_NAME

importlib.import_module("swh.core.cli").swh.add_command(scheduler, name=PLUGIN_NAME)
