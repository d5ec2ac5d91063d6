"""An API server over each kind of store, and clients with each access: the
fixtures of the HTTP face's tests (the API's and the console's conftest import
them)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest
from api_server import READER, WRITER, Clock, serving

from swh_like_scheduler.api import ApiSettings, parse_tokens
from swh_like_scheduler.store import SQLAlchemyStore
from swh_like_scheduler.web import create_app


@pytest.fixture
def clock(now: datetime) -> Clock:
    return Clock(now)


@pytest.fixture
def api_url(store: SQLAlchemyStore, clock: Clock) -> Iterator[str]:
    # the open runs counted again at once: tests see their changes
    settings = ApiSettings(tokens=parse_tokens(f"{WRITER}:rw,{READER}:ro"), runs_every=0.1)
    with serving(create_app(store, settings, clock=clock)) as url:
        yield url


def _client(url: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


@pytest.fixture
def client(api_url: str) -> Iterator[httpx.Client]:
    """May read and write."""
    with _client(api_url, WRITER) as http:
        yield http


@pytest.fixture
def reader(api_url: str) -> Iterator[httpx.Client]:
    with _client(api_url, READER) as http:
        yield http


@pytest.fixture
def anonymous(api_url: str) -> Iterator[httpx.Client]:
    with _client(api_url, None) as http:
        yield http
