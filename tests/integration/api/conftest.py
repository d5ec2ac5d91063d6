"""The HTTP API's tests talk to a real server (``apitest``)."""

from apitest import anonymous, api_url, client, clock, reader

__all__ = ["anonymous", "api_url", "client", "clock", "reader"]
