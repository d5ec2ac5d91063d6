"""Issue 57: ``standalone`` printed its one-time ``Console:`` link once,
and the first redraw of the live table scrolled it out of view, while the
header showed the API token in clear. The link now stays under the table
at every redraw, with the command that makes a new one (its token read from
a file), and no screen shows a token."""

from __future__ import annotations

import io
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from swh_like_scheduler.standalone import Options, Platform, TypeRow, render
from swh_like_scheduler.standalone.platform import _write_secret
from swh_like_scheduler.standalone.table import (
    LEGEND,
    ConsoleLink,
    ErrorLine,
    Snapshot,
    console_lines,
)

NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
API = "http://127.0.0.1:41241"
WRITER = ConsoleLink("read-write", f"{API}/console/link/w" + "x" * 40, NOW + timedelta(minutes=10))
READER = ConsoleLink("read-only", f"{API}/console/link/r" + "y" * 40, NOW + timedelta(minutes=10))
NEW = "SWH_SCHEDULER_API_TOKEN=$(cat /run/api-token) swh scheduler console-link --url " + API


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_links_say_until_when_and_how_to_make_another() -> None:
    lines = console_lines(
        [WRITER, READER], console_url=f"{API}/console/", new_link=NEW, token_file="/run/api-token"
    )
    assert lines == [
        f"Console: {WRITER.url} (read-write; one session, until 12:10:00 UTC)",
        f"  read-only: {READER.url} (one session, until 12:10:00 UTC)",
        f"  a new link: {NEW}",
    ]
    later = console_lines(
        [WRITER, READER],
        console_url=f"{API}/console/",
        new_link=NEW,
        token_file="/run/api-token",
        now=NOW + timedelta(minutes=11),
    )
    assert later[0] == f"Console: {WRITER.url} (read-write; expired at 12:10:00 UTC)"
    # no link could be made (the API was slow): where to log in, and with what
    assert console_lines(
        [], console_url=f"{API}/console/", new_link=NEW, token_file="/run/api-token"
    ) == [
        f"Console: {API}/console/ (log in with the token in /run/api-token)",
        f"  a login link: {NEW}",
    ]


def test_the_links_come_under_the_legend_whole_on_a_narrow_terminal() -> None:
    error = ErrorLine(NOW, 7, "failed", "RuntimeError('boom')")
    rows = [TypeRow("sleep", waiting=3, ready=1, error=1, last_errors=(error,))]
    links = console_lines(
        [WRITER, READER], console_url=f"{API}/console/", new_link=NEW, token_file="/run/api-token"
    )
    text = render(rows, now=NOW, width=60, console=links).splitlines()
    legend = text.index(LEGEND[1][:59] + "…")
    assert text[legend + 1 : legend + 5] == ["", *links]  # right under the legend, uncut
    assert text.index("Last errors:") > legend + 4
    assert all(len(line) <= 60 for line in text if line not in links)
    assert render(rows, now=NOW) == render(rows, now=NOW, console=())  # nothing asked: as before


def test_every_redraw_keeps_the_link_and_no_screen_shows_a_token(tmp_path: Path) -> None:
    out = Terminal()
    platform = Platform(
        Options(db_url=f"sqlite:///{tmp_path / 'x.db'}", broker_url="redis://:pw@127.0.0.1:1/0"),
        store=None,  # type: ignore[arg-type]  # the screen reads no store
        out=out,
        clock=lambda: NOW,
    )
    platform.api_url = API
    platform.links = [
        ConsoleLink("read-write", f"{API}/console/link/w1", NOW + timedelta(minutes=10)),
        ConsoleLink("read-only", f"{API}/console/link/r1", NOW + timedelta(minutes=10)),
    ]
    snap = Snapshot(NOW, (TypeRow("sleep", waiting=2),))
    for _ in range(3):  # the first draw and two redraws
        platform.show(platform.screen(snap))
    frames = out.getvalue().split("\x1b[H")
    assert len(frames) == 4  # clear + home, then home twice
    for frame in frames[1:]:
        assert f"Console: {API}/console/link/w1 (read-write;" in frame
        assert f"read-only: {API}/console/link/r1" in frame
        command = f"SWH_SCHEDULER_API_TOKEN=$(cat {platform.token_file}) swh scheduler console-link"
        assert f"a new link: {command} --url {API}" in frame
        assert platform.api_token not in frame and platform.api_read_token not in frame
        assert "pw@" not in frame  # nor the broker's password
    header = next(line for line in frames[-1].splitlines() if line.startswith("api "))
    assert header.startswith(f"api      {API} (tokens: api-token, api-token-read-only")
    # the table comes first, the links after it
    last = frames[-1]
    assert last.index("TYPE ") < last.index("Console: ")


def test_the_token_file_is_for_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "api-token"
    path.write_text("old")
    path.chmod(0o644)  # left by an earlier run in the same --run-dir
    _write_secret(path, "s3cret")
    assert path.read_text() == "s3cret\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
