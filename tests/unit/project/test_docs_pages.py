"""The pages users read are not a lab notebook and render as written: no
page names a commit of this repository (the history of a change belongs
to the changelog and to ``git log``), and no page escapes a backtick
(Markdown has no escape inside a code span: ``\\``` there ends the span and
turns the rest of the paragraph into code; a span that must hold a backtick
is opened with two), and no page is longer than a reader takes in one
sitting (:data:`MAX_PROSE_WORDS`: what runs longer is two pages)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: every page of the site and the README (the docs folder's own notes, the
#: build's output and the pages it generates from the code are not written
#: by hand)
PAGES = sorted(
    [ROOT / "README.md"]
    + [
        page
        for page in (ROOT / "docs").rglob("*.md")
        if not {"_build", "_generated"} & set(page.parts) and page != ROOT / "docs" / "README.md"
    ]
)
#: what could be an abbreviated or full commit id: 7 to 40 hex digits with
#: at least one letter and one digit (a number or a word is neither)
HEXISH = re.compile(r"(?<![0-9A-Za-z_./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


#: the most words of prose a page may hold: about twelve minutes of reading;
#: commands and files in fenced code blocks are not counted (a procedure that
#: shows each command whole is not the longer for it)
MAX_PROSE_WORDS = 3000
#: a fence that opens a code block: ``` or ~~~ (three or more) and an info
#: string that is not a MyST directive (```{note} holds prose)
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(\S*)")


def prose_words(text: str) -> int:
    """The words of a page outside its fenced code blocks (a directive's
    fence, ```{note}, holds prose; a fence inside a code block is code)."""
    words = 0
    opened: list[tuple[str, bool]] = []  # each open fence and whether it is code
    for line in text.splitlines():
        in_code = any(code for _, code in opened)
        match = FENCE.match(line)
        if match:
            fence, info = match.groups()
            if opened and not info and fence.startswith(opened[-1][0]):
                opened.pop()
                continue
            if not in_code:
                opened.append((fence, not info.startswith("{")))
                continue
        if not in_code:
            words += len(line.split())
    return words


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


def test_no_page_is_longer_than_one_sitting() -> None:
    long = {
        page.relative_to(ROOT).as_posix(): words
        for page in PAGES
        if (words := prose_words(page.read_text("utf-8"))) > MAX_PROSE_WORDS
    }
    assert not long, f"pages over {MAX_PROSE_WORDS} words of prose (split them): {long}"


def test_prose_words_leave_out_code_and_count_directives() -> None:
    page = "\n".join(
        [
            "One two three.",
            "```sh",
            "swh scheduler task list --limit 10",
            "```",
            "````{note}",
            "Four five.",
            "```toml",
            "[runner]",
            "```",
            "````",
            "~~~",
            "``` not a fence inside code",
            "~~~",
            "Six.",
        ]
    )
    assert prose_words(page) == 6
    assert prose_words("word " * (MAX_PROSE_WORDS + 1)) > MAX_PROSE_WORDS
