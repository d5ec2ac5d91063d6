"""The console in a real headless Chromium (Debian's ``chromium``, driven by
Playwright), over the whole platform of ``swh scheduler standalone``: its
example tasks run, fail and go late for real.

With ``SWH_CONSOLE_SCREENSHOTS=DIR`` the pages' screenshots are also saved
in DIR (the README's and the documentation's come from there: ``docs/``)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standalone_run import answers, clean_env, start, swh_executable, wait_for

from swh_like_scheduler.domain.model import TaskStatus
from swh_like_scheduler.store import SQLAlchemyStore, TaskFilter

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: what this machine's closed network needs (no background connections)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_or_skip() -> Any:
    """Playwright's sync API, or a skip (a failure under CI)."""
    missing = None
    if not Path(CHROMIUM).exists():
        missing = f"no Chromium at {CHROMIUM} (apt install chromium)"
    try:
        from playwright import sync_api
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[testing]')"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return sync_api


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """A standalone platform: its read-write and read-only login links, and
    its database file."""
    env = clean_env(tmp_path)
    process, out = start(env, tmp_path, "--refresh", "5")
    try:
        wait_for(lambda: "read-only: " in out.read_text(), 60, "the console's links")
        text = out.read_text()
        writer = re.search(r"Console: (\S+)", text)
        reader = re.search(r"read-only: (\S+)", text)
        assert writer and reader, text
        base = writer.group(1).split("/console/")[0]
        wait_for(lambda: answers(f"{base}/console/login"), 30, "the console to answer")
        db = Path(env["XDG_DATA_HOME"]) / "swh-like-scheduler" / "scheduler.sqlite"
        yield writer.group(1), reader.group(1), db
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()


def shoot(page: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=False)
    keep = os.environ.get("SWH_CONSOLE_SCREENSHOTS")
    if keep:
        shutil.copy(path, Path(keep) / path.name)


def live_text(page: Any, key: str) -> str:
    return str(page.locator(f'[data-live="{key}"]').first.text_content()).strip()


def eventually(page: Any, check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        page.wait_for_timeout(500)


@pytest.mark.acceptance
@pytest.mark.timeout(360)
def test_the_console_in_a_browser(platform: tuple[str, str, Path], tmp_path: Path) -> None:
    sync_api = chromium_or_skip()
    writer_link, reader_link, db = platform
    base = writer_link.split("/console/")[0]
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            # -- a read-only session: everything shown, every action disabled
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(reader_link)  # a one-time link: its page logs in by itself
            page.wait_for_url(f"{base}/console/")
            assert page.locator(".badge.ro").text_content() == "read-only"
            pause = page.locator("button", has_text="Pause")
            assert pause.count() >= 3 and all(b.is_disabled() for b in pause.all())
            page.goto(f"{base}/console/tasks/1")
            for words in ("Run now", "Delete"):
                assert page.locator("button", has_text=words).first.is_disabled(), words
            context.close()

            # -- a read-write session: the overview, live
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(writer_link)
            page.wait_for_url(f"{base}/console/")
            assert "#token=" not in page.url
            page.keyboard.press("Tab")  # the first stop skips to the content
            assert page.evaluate("document.activeElement.className") == "skip"
            eventually(
                page,
                lambda: live_text(page, "total:ERROR") not in ("\u2013", "0"),
                120,
                "a task in ERROR on the overview",
            )
            page.evaluate("window.notReloaded = true")
            before = live_text(page, "sleep:hour")
            eventually(page, lambda: live_text(page, "sleep:hour") != before, 90, "a run to end")
            assert page.evaluate("window.notReloaded") is True  # changed in place
            page.evaluate("document.activeElement.blur()")
            shoot(page, tmp_path, "overview")

            # -- a phone's width: nothing wider than the screen but the tables' own scroll
            page.set_viewport_size({"width": 375, "height": 740})
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.set_viewport_size({"width": 1280, "height": 800})

            # -- a type to its problems, a task to its page, disable it
            page.locator("table.types th a", has_text="sleep").click()
            page.wait_for_url(re.compile(r".*/console/problems\?type=sleep"))
            eventually(
                page,
                lambda: (
                    page.reload() is not None and page.locator("table.problems tbody a").count() > 0
                ),
                90,
                "sleep tasks not OK",
            )
            assert re.search(r"\d+ of [\d,]+\s+tasks not OK", page.locator("#total").inner_text())
            shoot(page, tmp_path, "problems")
            task_id = None
            links = [a.get_attribute("href") for a in page.locator("table.problems tbody a").all()]
            for href in links[:15]:
                page.goto(f"{base}{href}")
                if page.locator("button", has_text="Disable").count():
                    task_id = int(str(href).rsplit("/", 1)[1])
                    break
            assert task_id is not None, "no problem task could be disabled"
            shoot(page, tmp_path, "task")
            page.locator("button", has_text="Disable").click()
            page.wait_for_load_state()
            assert f"Task {task_id} was disabled." in page.locator(".flash").inner_text()
            explain = ["task", "explain", str(task_id)]
            explained = subprocess.run(
                [swh_executable(), "scheduler", "--db-url", f"sqlite:///{db}", *explain],
                capture_output=True,
                text=True,
                timeout=60,
                env=clean_env(tmp_path),
            )
            assert "status disabled" in explained.stdout, explained.stdout + explained.stderr

            # -- a request without the CSRF token is refused
            refused = context.request.post(f"{base}/console/tasks/{task_id}/enable", form={})
            assert refused.status == 403

            # -- bulk: disable the late sleep one-shots, counted in the store
            page.goto(f"{base}/console/problems?type=sleep&kind=oneshot&level=ERROR")
            eventually(
                page,
                lambda: (
                    page.reload() is not None
                    and page.locator("a.button", has_text="Disable all").count() > 0
                ),
                90,
                "late one-shots",
            )
            page.locator("a.button", has_text="Disable all").click()
            heading = page.locator("h1").inner_text()
            asked = int(re.search(r"Disable ([\d,]+) tasks", heading).group(1).replace(",", ""))
            sample = re.search(r"tasks: ([\d, ]+)", page.locator("main").inner_text())
            page.locator("button.danger").click()
            page.wait_for_load_state()
            flash = page.locator(".flash").inner_text()
            done = re.search(r"([\d,]+) of ([\d,]+) tasks changed", flash)
            assert done and int(done.group(2).replace(",", "")) == asked, flash
            store = SQLAlchemyStore.from_url(f"sqlite:///{db}")
            try:
                assert sample is not None
                ids = [int(i) for i in sample.group(1).replace(" ", "").split(",") if i]
                statuses = {t.id: t.status for t in store.get_tasks(ids)}
                assert set(statuses.values()) == {TaskStatus.DISABLED}, statuses
                criteria = TaskFilter(type="sleep", status=[TaskStatus.DISABLED])
                disabled = store.count_tasks(criteria)
                assert disabled >= int(done.group(1).replace(",", "")) + 1
            finally:
                store.close()
        finally:
            browser.close()
        used_links_leave_no_secret(playwright, tmp_path, base, reader_link)


def used_links_leave_no_secret(playwright: Any, tmp_path: Path, base: str, used_link: str) -> None:
    """A link made by ``console-link`` logs a browser with a profile on disk
    in; the profile (its History, Top Sites...) then holds no token, and a
    used link opens nothing."""
    printed = (tmp_path / "standalone.out").read_text()
    token = (tmp_path / "run" / "api-token").read_text().strip()
    assert token and token not in printed  # standalone names the file, never the token
    made = subprocess.run(
        [swh_executable(), "scheduler", "console-link", "--url", base],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean_env(tmp_path), "SWH_SCHEDULER_API_TOKEN": token},
    )
    assert made.returncode == 0, made.stderr
    link = made.stdout.strip()
    assert link.startswith(f"{base}/console/link/") and token not in link
    profile = tmp_path / "profile"
    context = playwright.chromium.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, args=CHROMIUM_ARGS
    )
    try:
        page = context.new_page()
        page.goto(link)
        page.wait_for_url(f"{base}/console/")
        assert page.locator(".badge.rw").text_content() == "read-write"
        page.goto(used_link)  # used by the first session: worthless now
        assert "used, expired or unknown" in page.locator("main").inner_text()
    finally:
        context.close()  # the profile is written out
    history = profile / "Default" / "History"
    assert history.exists(), sorted(p.name for p in (profile / "Default").iterdir())
    assert b"/console/link/" in history.read_bytes()  # the visit is on record...
    secret = token.encode()
    for path in profile.rglob("*"):  # ...and no file of the profile holds the token
        if path.is_file():
            assert secret not in path.read_bytes(), path
