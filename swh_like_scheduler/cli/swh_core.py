"""Living beside swh-core, whose package also installs a console script
named ``swh`` (its subcommands, ``swh scheduler`` among them, are plug-ins
of the ``swh.cli.subcommands`` entry point group).

In one environment, pip lets whichever package is installed last write
``bin/swh``. So that the outcome never depends on that order:

* ``swh-like-scheduler`` is this package's own script, a name nobody else
  installs: ``swh-like-scheduler X`` is ``swh scheduler X`` (same options,
  same environment variables).
* ``swh like-scheduler X`` is the same command through swh-core's ``swh``:
  this package registers its group as a swh-core plug-in
  (:mod:`.swh_core_plugin`) under a name swh-core's packages do not use.
* Our ``swh`` script, when swh-core is installed, hands over to swh-core's
  own ``swh`` (plug-ins included): ``swh scheduler`` is then always
  swh-scheduler's, whichever package wrote the script. Without swh-core,
  ``swh`` is ours, as before.
"""

from __future__ import annotations

import importlib
from importlib import metadata

from .base import main as our_main
from .base import scheduler

#: the name of our group under swh-core's ``swh``
PLUGIN_NAME = "like-scheduler"
#: our own script, which nothing else installs
SCRIPT_NAME = "swh-like-scheduler"
#: the distribution whose ``swh`` script and command group we live beside
SWH_CORE = "swh.core"


def swh_core_installed() -> bool:
    """swh-core is installed in this environment (its metadata is found;
    nothing of it is imported)."""
    try:
        metadata.distribution(SWH_CORE)
    except metadata.PackageNotFoundError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    """The ``swh`` console script: swh-core's ``swh`` when swh-core is
    installed (``swh scheduler`` is then swh-scheduler's and ours is ``swh
    like-scheduler``), this package's otherwise. Given ``argv``, always
    this package's (what :mod:`..standalone` runs its children with)."""
    if argv is None and swh_core_installed():
        importlib.import_module("swh.core.cli").main()
        return
    our_main(argv)


def scheduler_main(argv: list[str] | None = None) -> None:
    """The ``swh-like-scheduler`` console script: ``swh scheduler`` under a
    name of its own."""
    scheduler.main(args=argv, prog_name=SCRIPT_NAME, auto_envvar_prefix="SWH_SCHEDULER")
