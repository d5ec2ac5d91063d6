"""Every shell command of the README and of the documentation's
getting-started page is run by a test.

Each command line is cut at its ``&&`` into steps, and each step must be in
:data:`RUN_BY`, which says what runs it: this file (the cheap ones run
here, as written), or another test named by its node id. A step added to
either page and run by nothing fails
:func:`test_every_command_is_run_by_a_test`."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cuts import FULL
from standalone_run import clean_env, swh_executable

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs" / "getting-started.md")
HERE = "tests/acceptance/test_docs_commands.py"

BUILD = ".venv/bin/sphinx-build -W --keep-going -n -b html docs docs/_build/html"
DEMO = (
    ".venv/bin/swh scheduler task status --show ERROR --limit 5",
    ".venv/bin/swh scheduler task list --type sleep --condition ERROR --limit 3",
    ".venv/bin/swh scheduler task explain 1",
)

#: each step of the pages' commands, and the tests that run it
RUN_BY: dict[str, tuple[str, ...]] = {
    "python3 -m venv .venv": (
        f"{HERE}::test_the_install_commands_from_a_clean_checkout",
        ".ci/run",
    ),
    ".venv/bin/pip install .": (f"{HERE}::test_the_install_commands_from_a_clean_checkout",),
    ".venv/bin/swh scheduler standalone": (
        "tests/acceptance/test_standalone.py::test_standalone_runs_tasks_and_ctrl_c_leaves_no_process",
        f"{HERE}::test_the_install_commands_from_a_clean_checkout",
    ),
    ".venv/bin/pip install -e '.[testing]'": (".ci/run",),
    ".venv/bin/pytest": (".ci/run",),
    ".venv/bin/pip install -e '.[docs]'": (
        f"{HERE}::test_the_install_commands_from_a_clean_checkout",
    ),
    BUILD: (f"{HERE}::test_the_docs_build_command",),
    **{command: (f"{HERE}::test_the_demo_commands_on_the_demo_database",) for command in DEMO},
}


def commands(page: Path) -> list[str]:
    """The command lines of the page's ``sh`` blocks (comments and
    continuations joined)."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text("utf-8"), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(" ".join(line.split()))
    return found


def steps(line: str) -> list[str]:
    return [step.strip() for step in line.split("&&")]


def test_every_command_is_run_by_a_test() -> None:
    found = {step for page in PAGES for line in commands(page) for step in steps(line)}
    assert len(found) >= 10
    missing = sorted(found - set(RUN_BY))
    assert not missing, f"commands of the README or getting started that no test runs: {missing}"
    # and every test named exists
    for step in found:
        for runner in RUN_BY[step]:
            if runner == ".ci/run":
                script = (ROOT / ".ci" / "run").read_text()
                assert "<!-- test-command -->" in script and "python3 -m venv .venv" in script
                assert 'bash -euo pipefail -c "$test_command"' in script
                continue
            path, name = runner.split("::")
            tree = ast.parse((ROOT / path).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            assert name in names, runner


def test_the_test_command_is_the_one_ci_runs() -> None:
    """``.ci/run`` reads the README's test command between its markers."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- test-command -->\n```sh\n(.*?)\n```\n<!-- /test-command -->", text)
    assert block is not None
    expected = "python3 -m venv .venv && .venv/bin/pip install -e '.[testing]' && .venv/bin/pytest"
    assert block.group(1) == expected
    page = (ROOT / "docs" / "getting-started.md").read_text()
    assert f"```sh\n{expected}\n```" in page


@pytest.mark.acceptance
@pytest.mark.timeout(120)
def test_the_demo_commands_on_the_demo_database(tmp_path: Path) -> None:
    """The getting-started page's commands, as written, on the embedded
    default database holding the demo's task types and tasks."""
    from swh_like_scheduler.standalone import create_examples, register_task_types
    from swh_like_scheduler.store import SQLAlchemyStore, migrations

    env = clean_env(tmp_path)
    database = tmp_path / "xdg_data_home" / "swh-like-scheduler" / "scheduler.sqlite"
    database.parent.mkdir(parents=True)
    store = SQLAlchemyStore.from_url(f"sqlite:///{database}")
    migrations.upgrade(store.engine)
    register_task_types(store)
    assert create_examples(store, datetime.now(tz=UTC))
    store.close()
    page = commands(ROOT / "docs" / "getting-started.md")
    for command in DEMO:
        assert command in page
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/swh"
        done = subprocess.run(
            [swh_executable(), *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert done.stdout.strip(), command
    assert database.exists()


@pytest.mark.timeout(300)
def test_the_docs_build_command(tmp_path: Path) -> None:
    """The README's docs build, with warnings as errors (output in a
    temporary folder instead of ``docs/_build/html``)."""
    assert any(BUILD in line for line in commands(ROOT / "README.md"))
    sphinx = Path(sys.executable).with_name("sphinx-build")
    if not sphinx.exists():
        if os.environ.get("CI"):
            pytest.fail("sphinx-build is not installed (pip install -e '.[docs]')")
        pytest.skip("sphinx-build is not installed (pip install -e '.[docs]')")
    argv = shlex.split(BUILD)
    assert argv[-2:] == ["docs", "docs/_build/html"]
    out = tmp_path / "html"
    done = subprocess.run(
        [str(sphinx), *argv[1:-1], str(out)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for page in ("index", "getting-started", "reference/cli", "reference/http-api"):
        assert (out / f"{page}.html").exists(), page
    assert "cmdoption-swh-scheduler-db-url" in (out / "reference" / "cli.html").read_text()


@pytest.mark.acceptance
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not FULL, reason="installs the package twice from the index: SWH_SLOW=full")
def test_the_install_commands_from_a_clean_checkout(tmp_path: Path) -> None:
    """The README's main command and docs command, as written, in a copy of
    the checkout's tracked files (a clean checkout): the package installs
    and ``standalone`` shows its table; the docs extra installs and builds."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    checkout = tmp_path / "checkout"
    for name in filter(None, tracked):
        source = ROOT / name.decode()
        if source.is_file():
            target = checkout / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    readme = commands(ROOT / "README.md")
    main = next(line for line in readme if line.endswith("swh scheduler standalone"))
    install, run = main.rsplit(" && ", 1)
    env = clean_env(tmp_path)
    subprocess.run(["bash", "-euo", "pipefail", "-c", install], cwd=checkout, env=env, check=True)
    out = (tmp_path / "standalone.out").open("w")
    process = subprocess.Popen(
        shlex.split(run), cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        while "TYPE " not in (tmp_path / "standalone.out").read_text():
            assert process.poll() is None, (tmp_path / "standalone.out").read_text()
            assert time.monotonic() < deadline, "standalone showed no table"
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    docs = next(line for line in readme if BUILD in line)
    subprocess.run(["bash", "-euo", "pipefail", "-c", docs], cwd=checkout, env=env, check=True)
    assert (checkout / "docs" / "_build" / "html" / "index.html").exists()
