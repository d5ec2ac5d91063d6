"""Words for people: counts with the right noun form."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 task``, ``0 tasks``, ``3 tasks`` (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


__all__ = ["plural"]
