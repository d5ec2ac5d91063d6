"""The documentation's generated reference pages (``docs/_ext/swh_generated.py``)
hold every API operation and every setting, and the CLI pages render the
root group of the ``swh`` console script and every command of ``swh
scheduler``, each group on a page of its own; checked without a Sphinx build."""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import click

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"


def generated() -> ModuleType:
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        return importlib.import_module("swh_generated")
    finally:
        sys.path.remove(str(DOCS / "_ext"))


def test_the_api_page_lists_every_operation_of_the_openapi_document() -> None:
    module = generated()
    document = module.openapi_document()
    page = module.http_api_markdown(document)
    operations = list(module.operations(document))
    assert len(operations) >= 25  # the REST resources, /rpc and the console's links
    for path, method, operation in operations:
        assert f"| {method} | `{path}` |" in page, (method, path)
        assert f"### {method} `{path}`" in page, (method, path)
        for code in operation["responses"]:
            assert f"| {code} |" in page
        for parameter in operation.get("parameters", []):
            assert f"| `{parameter['name']}` | {parameter['in']} |" in page
    for name in document["components"]["schemas"]:
        assert f"### {name}\n" in page


def test_the_configuration_page_lists_every_setting_with_its_flag_and_variable() -> None:
    from swh_like_scheduler.config.settings import Settings
    from swh_like_scheduler.visits.policy import Cooldowns

    page = generated().configuration_markdown()
    rows = {
        line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")
    }
    for item in dataclasses.fields(Settings):
        assert f"`{item.name}`" in rows, item.name
    for item in dataclasses.fields(Cooldowns):
        assert f"`cooldown_{item.name}`" in rows
    # what sets a field is read from the click options
    assert "`--db-url`" in rows["`db_url`"] and "`SWH_SCHEDULER_DB_URL`" in rows["`db_url`"]
    assert "`--tokens` (`swh scheduler rpc-serve`)" in rows["`api_tokens`"]
    assert "`SWH_SCHEDULER_API_TOKENS`" in rows["`api_tokens`"]
    assert "`SWH_SCHEDULER_INDEX_URL`" in rows["`index_url`"]
    assert rows["`db_is_default`"].rstrip().endswith("| no |")  # never in the file


def click_directives(page: str) -> list[tuple[str, dict[str, str]]]:
    """The ``.. click::`` directives of a page: target and options."""
    found = []
    for match in re.finditer(r"^\.\. click:: (\S+)\n((?:   :[\w-]+:.*\n)*)", page, re.M):
        options = dict(re.findall(r"^   :([\w-]+):[ \t]*(.*)$", match.group(2), re.M))
        found.append((match.group(1), options))
    return found


def test_the_cli_pages_render_the_root_group_and_every_command() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["swh"] == "swh_like_scheduler.cli:main"
    from swh_like_scheduler import cli
    from swh_like_scheduler.cli.tree import SCHEDULER

    assert isinstance(cli.swh, click.Group)
    assert "swh.main(" in Path(cli.base.__file__).read_text()  # main() runs that group
    assert "sphinx_click" in (DOCS / "conf.py").read_text()
    index = (DOCS / "reference" / "cli.md").read_text()
    # the index page: the root group and the options of `swh scheduler`
    assert ("swh_like_scheduler.cli:swh", {"prog": "swh", "nested": "none"}) in (
        click_directives(index)
    )
    assert ("swh_like_scheduler.cli:scheduler", {"prog": "swh scheduler", "nested": "none"}) in (
        click_directives(index)
    )
    # each command of `swh scheduler` rendered once, on a page of the index's toctree
    rendered: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for page in sorted((DOCS / "reference" / "cli").glob("*.md")):
        assert f"\ncli/{page.stem}\n" in index, page.name
        for target, options in click_directives(page.read_text()):
            rendered.setdefault(options["prog"], []).append((target, options))
    ctx = click.Context(cli.scheduler, info_name="scheduler")
    for name, entry in SCHEDULER.items():
        directives = rendered.pop(f"swh scheduler {name}", [])
        assert len(directives) == 1, (name, directives)
        [(target, options)] = directives
        module, _, attribute = target.partition(":")
        command = cli.scheduler.get_command(ctx, name)
        assert getattr(importlib.import_module(module), attribute) is command, name
        if isinstance(entry, click.Group):  # a group, with all its commands
            assert options.get("nested") == "full" and "commands" not in options, name
    assert not rendered  # nothing else


def test_the_pages_include_the_generated_fragments() -> None:
    module = generated()
    reference = DOCS / "reference"
    assert "```{include} _generated/http-api.md" in (reference / "http-api.md").read_text()
    assert (
        "```{include} _generated/configuration.md" in (reference / "configuration.md").read_text()
    )
    assert reference / "_generated" == module.GENERATED
