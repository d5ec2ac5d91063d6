"""The console is served by the same app as the API: its tests use the API
tests' server and clients (``apitest``, beside them)."""

import sys
from pathlib import Path

API = Path(__file__).resolve().parents[1] / "api"
if str(API) not in sys.path:
    sys.path.insert(0, str(API))

from apitest import anonymous, api_url, client, clock, reader  # noqa: E402

__all__ = ["anonymous", "api_url", "client", "clock", "reader"]
