"""Reference pages generated from the code at build time.

Three fragments are written under ``docs/reference/_generated/`` when a
build starts, and included by the reference pages:

- ``http-api.md``: the paths, methods, parameters and response codes of
  the OpenAPI document the FastAPI app produces (built as the tests build
  it: :func:`swh_like_scheduler.api.create_app` over an in-memory store);
- ``configuration.md``: the fields of :class:`swh_like_scheduler.config.settings.Settings`
  (name, type, default, what it is) with the command-line flags and
  environment variables that set them, read from the click commands;
- ``visits.md``: the ``[visits]`` table's cooldowns.

The functions return Markdown and run without Sphinx (the unit tests call
them).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import click

GENERATED = Path(__file__).resolve().parents[1] / "reference" / "_generated"
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")


def cell(text: object) -> str:
    """A Markdown table cell: one line, pipes escaped, reST markup of the
    code's comments (``x``, :mod:`x`) made Markdown."""
    text = re.sub(r":[a-z]+:`([^`]*)`", r"`\1`", " ".join(str(text).split()))
    return text.replace("``", "`").replace("|", "\\|")


# --- the HTTP API ---------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app ``rpc-serve`` serves, over an empty
    in-memory SQLite store (nothing is served or written)."""
    from swh_like_scheduler.store import SQLAlchemyStore
    from swh_like_scheduler.web import create_app

    store = SQLAlchemyStore.from_url("sqlite://")
    try:
        return create_app(store).openapi()
    finally:
        store.close()


def _schema_text(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_schema_text(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_schema_text(schema.get('items', {}))}"
    if "enum" in schema:
        return " / ".join(f"`{v}`" for v in schema["enum"])
    return str(kind)


def _body_text(body: dict[str, Any]) -> str:
    content = body.get("content", {})
    kinds = [f"{kind}: {_schema_text(spec.get('schema', {}))}" for kind, spec in content.items()]
    required = "required" if body.get("required") else "optional"
    return f"{required}; " + "; ".join(kinds)


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every (path, METHOD, operation) of the document, in its order."""
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield path, method.upper(), item[method]


def http_api_markdown(document: dict[str, Any]) -> str:
    """The API reference: a summary table, then each operation."""
    info = document.get("info", {})
    out = [
        f"Generated from the OpenAPI document of {cell(info.get('title', 'the API'))} "
        f"(OpenAPI {document.get('openapi', '?')}, version {info.get('version', '?')}): "
        f"{len(document.get('paths', {}))} paths, "
        f"{sum(1 for _ in operations(document))} operations.",
        "",
        "| method | path | summary | token |",
        "|---|---|---|---|",
    ]
    for path, method, op in operations(document):
        token = "yes" if op.get("security") else "no"
        out.append(f"| {method} | `{cell(path)}` | {cell(op.get('summary', ''))} | {token} |")
    out += ["", "## Operations", ""]
    for path, method, op in operations(document):
        out += [f"### {method} `{path}`", ""]
        described = op.get("description") or op.get("summary") or ""
        if described:
            out += [cell(described), ""]
        params = op.get("parameters", [])
        if params:
            out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
            for param in params:
                out.append(
                    f"| `{cell(param['name'])}` | {param.get('in', '')} "
                    f"| {cell(_schema_text(param.get('schema', {})))} "
                    f"| {'yes' if param.get('required') else 'no'} "
                    f"| {cell(param.get('description', ''))} |"
                )
            out.append("")
        if "requestBody" in op:
            out += [f"Body: {cell(_body_text(op['requestBody']))}", ""]
        out += ["| answer | meaning |", "|---|---|"]
        for code, answer in op.get("responses", {}).items():
            out.append(f"| {code} | {cell(answer.get('description', ''))} |")
        out.append("")
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", "", "The bodies named above, and the answers' bodies.", ""]
    for name, schema in schemas.items():
        out += [f"### {name}", ""]
        if schema.get("description"):
            out += [cell(schema["description"]), ""]
        properties = schema.get("properties", {})
        if not properties:
            out += [f"Type: {cell(_schema_text(schema))}.", ""]
            continue
        required = set(schema.get("required", []))
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, spec in properties.items():
            out.append(
                f"| `{cell(field)}` | {cell(_schema_text(spec))} "
                f"| {'yes' if field in required else 'no'} | {cell(spec.get('description', ''))} |"
            )
        out.append("")
    return "\n".join(out)


# --- the configuration ----------------------------------------------------


def _field_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment above each field of a dataclass, by field name."""
    source = inspect.getsource(cls)
    lines = source.splitlines()
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comment: list[str] = []
            at = node.lineno - 2
            while at >= 0 and lines[at].strip().startswith("#:"):
                comment.insert(0, lines[at].strip()[2:].strip())
                at -= 1
            found[node.target.id] = " ".join(comment)
    return found


def _default(item: dataclasses.Field[Any]) -> str:
    if item.default is not dataclasses.MISSING:
        return f"`{item.default!r}`"
    if item.default_factory is not dataclasses.MISSING:
        return f"a new `{getattr(item.default_factory, '__name__', 'value')}()`"
    return "none (required)"


def _walk(command: click.Command, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    yield ctx.command_path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            child = command.get_command(ctx, name)
            if child is not None:
                sub = click.Context(child, info_name=name, parent=ctx)
                yield from _walk(child, sub)


class Source(NamedTuple):
    """A click option that sets a settings field."""

    command: str
    flag: str
    envvar: str | None
    help: str


def settings_sources() -> dict[str, list[Source]]:
    """Per settings field, every click option of the ``swh`` commands that
    sets it: named after the field (``api_`` left out for the server's own
    flags), or reading ``SWH_SCHEDULER_<FIELD>``."""
    from swh_like_scheduler.cli import swh
    from swh_like_scheduler.config.settings import ENV_PREFIX, Settings

    names = [item.name for item in dataclasses.fields(Settings)]
    found: dict[str, list[Source]] = {name: [] for name in names}
    for path, command in _walk(swh, click.Context(swh, info_name="swh")):
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or [])
            for name in names:
                env = f"{ENV_PREFIX}_{name.upper()}"
                if param.name in (name, name.removeprefix("api_")) or env in envvars:
                    flag = max(param.opts, key=len)
                    used = env if env in envvars else None
                    found[name].append(Source(path, flag, used, param.help or ""))
    return found


def configuration_markdown() -> str:
    """The settings object's fields, and what sets each."""
    from swh_like_scheduler.config.settings import Settings
    from swh_like_scheduler.visits.policy import Cooldowns

    comments = _field_comments(Settings)
    sources = settings_sources()
    out = [
        "| setting | type | default | what it is | flag (commands) | environment | config file |",
        "|---|---|---|---|---|---|---|",
    ]
    for item in dataclasses.fields(Settings):
        seen = sources[item.name]
        flags: dict[str, set[str]] = {}
        for source in seen:
            flags.setdefault(source.flag, set()).add(f"`{source.command}`")
        flag_text = "; ".join(
            f"`{flag}` ({', '.join(sorted(paths))})" for flag, paths in sorted(flags.items())
        )
        envs = sorted({source.envvar for source in seen if source.envvar})
        described = comments.get(item.name) or next((s.help for s in seen if s.help), "")
        in_file = item.metadata.get("file", True)  # config.settings.FILE_SETTINGS
        out.append(
            f"| `{item.name}` | `{cell(item.type)}` | {cell(_default(item))} "
            f"| {cell(described)} | {cell(flag_text) or '(none)'} "
            f"| {', '.join(f'`{e}`' for e in envs) or '(none)'} "
            f"| {'yes' if in_file else 'no'} |"
        )
    out += [
        "",
        "The `[visits]` table's cooldowns (`cooldown_<name>` in the file; durations",
        'such as `"3 days"`):',
        "",
        "| cooldown | default |",
        "|---|---|",
    ]
    for item in dataclasses.fields(Cooldowns):
        out.append(f"| `cooldown_{item.name}` | {cell(item.default)} |")
    out.append("")
    return "\n".join(out)


# --- Sphinx ---------------------------------------------------------------


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` unless the file already holds it (an unchanged file
    keeps its time: Sphinx reads the pages including it again only when
    it changed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text("utf-8") != text:
        path.write_text(text, "utf-8")


def generate(_app: object = None) -> None:
    write_if_changed(GENERATED / "http-api.md", http_api_markdown(openapi_document()))
    write_if_changed(GENERATED / "configuration.md", configuration_markdown())


def plain_help(_app: object, _ctx: click.Context, lines: list[str]) -> None:
    """The commands' help is plain text, not reST: a lone ``*`` (a host
    pattern such as ``*.example.org``) is a character, not emphasis."""
    for n, line in enumerate(lines):
        if not line.lstrip().startswith(".. "):
            lines[n] = re.sub(r"(?<![*\\])\*(?!\*)", r"\\*", line)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    for event in ("description", "options", "arguments", "epilog"):
        app.connect(f"sphinx-click-process-{event}", plain_help)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
