"""The pages users read are not a lab notebook and render as written: no
page names a commit of this repository (the history of a change belongs
to the changelog and to ``git log``), and no page escapes a backtick
(Markdown has no escape inside a code span: ``\\``` there ends the span and
turns the rest of the paragraph into code; a span that must hold a backtick
is opened with two)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: every page of the site and the README (the docs folder's own notes and
#: the build's output are not read by users)
PAGES = sorted(
    [ROOT / "README.md"]
    + [
        page
        for page in (ROOT / "docs").rglob("*.md")
        if "_build" not in page.parts and page != ROOT / "docs" / "README.md"
    ]
)
#: what could be an abbreviated or full commit id: 7 to 40 hex digits with
#: at least one letter and one digit (a number or a word is neither)
HEXISH = re.compile(r"(?<![0-9A-Za-z_./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def needs_git() -> None:
    """Skip outside a git checkout (an unpacked source archive); CI must have one."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        if os.environ.get("CI"):
            pytest.fail("CI must run this check in a git checkout with git installed")
        pytest.skip("not a git checkout")


def commits_among(candidates: set[str]) -> set[str]:
    """The candidates git knows as commits of this repository."""
    needs_git()
    ordered = sorted(candidates)
    answer = subprocess.run(
        ["git", "cat-file", "--batch-check=%(objecttype)"],
        input="".join(f"{name}^{{commit}}\n" for name in ordered),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {name for name, kind in zip(ordered, answer, strict=True) if kind == "commit"}


def test_the_pages_are_found() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "docs/index.md", "docs/reference/reliability.md"} <= names
    assert len(PAGES) >= 20


def test_no_page_names_a_commit_of_this_repository() -> None:
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
            for token in HEXISH.findall(line):
                found.setdefault(token, []).append(f"{page.relative_to(ROOT)}:{number}")
    named = commits_among(set(found))
    assert not named, "pages name commits: " + "; ".join(
        f"{c} ({', '.join(found[c])})" for c in sorted(named)
    )


def test_the_commit_check_recognises_a_commit() -> None:
    """(The check above could pass by never recognising anything.)"""
    needs_git()
    head = subprocess.run(
        ["git", "rev-parse", "--short=9", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    line = f"measured on {head} (the fix)"
    tokens = set(HEXISH.findall(line))
    if tokens == set():  # a head of digits only, or letters only: one in 2^20
        pytest.skip(f"{head} has no digit or no letter")
    assert commits_among(tokens) == {head}
    assert HEXISH.findall("port 5432, 2026-12-02, deadbeef, #3f3f3f") == []


def test_no_page_escapes_a_backtick() -> None:
    escaped = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in PAGES
        for number, line in enumerate(page.read_text("utf-8").splitlines(), 1)
        if "\\`" in line
    ]
    assert not escaped, f"escaped backticks (use a ``double`` span or a code block): {escaped}"
