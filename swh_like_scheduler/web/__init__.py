"""The HTTP face assembled: the API's routes (:mod:`..api`) and the console
(:mod:`..console`) on one ASGI app, ``create_app(store, settings)``.

This room sits above both: the console reads the API's state and reports,
the API knows nothing of the console, and only this module mounts them
side by side. It may import any room below it; nothing imports it but the
command line, the standalone platform and the tests."""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
