"""The scheduler's HTTP API (``swh scheduler rpc-serve``): task types,
tasks, runs, conditions, health and metrics over one store."""

from __future__ import annotations

from .auth import TOKENS_ENV, Access, Token, parse_tokens
from .state import ApiSettings

__all__ = ["TOKENS_ENV", "Access", "ApiSettings", "Token", "parse_tokens"]
