"""Words for people: counts with the right noun form."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 task``, ``0 tasks``, ``3 tasks`` (``many``: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


#: what a cut text ends with
ELLIPSIS = "\u2026"


def headline(text: str | None, width: int | None = None) -> str:
    """The line of an error text that says what happened: its first
    non-blank line, or the last one of a Python traceback (the exception);
    cut to ``width`` characters (ending with an ellipsis) when longer, and
    ending with an ellipsis when more lines follow."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call last)"):
        line, more = lines[-1], True
    else:
        line, more = lines[0], len(lines) > 1
    suffix = f" {ELLIPSIS}" if more else ""
    if width is not None and len(line) + len(suffix) > width:
        return line[: max(width - 1, 0)] + ELLIPSIS
    return line + suffix


__all__ = ["ELLIPSIS", "headline", "plural"]
