"""Reading tasks from CSV or JSON-lines input, one line at a time.

The reader is a generator, so a file of millions of tasks is never held in
memory; an unreadable line raises :class:`InvalidInput` naming its line and
field, which aborts the (transactional) import as a whole.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import IO, Any

from ..domain.exceptions import InvalidInput, UnknownTaskType
from ..domain.model import Task, TaskType
from ..plumbing.reach import Reach
from .builders import TASK_FIELDS, task_from_input

FORMATS = ("csv", "jsonl")


def guess_format(name: str) -> str:
    lowered = name.lower()
    if lowered.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "csv"


def read_rows(
    stream: IO[str], fmt: str, *, columns: list[str] | None = None, delimiter: str = ","
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Yield ``(line number, raw values)`` of each task line."""
    if fmt == "jsonl":
        yield from _jsonl_rows(stream)
    elif fmt == "csv":
        yield from _csv_rows(stream, columns, delimiter)
    else:
        raise InvalidInput("format", f"{fmt!r} is not one of {', '.join(FORMATS)}")


def _jsonl_rows(stream: IO[str]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for number, raw in enumerate(stream, start=1):
        # the line without its end (an error there is "at the end of the
        # line", not at column 1 of the next) nor a UTF-8 byte order mark
        line = raw.rstrip("\r\n")
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            where = f"at column {exc.pos + 1}" if exc.pos < len(line) else "at the end of the line"
            raise InvalidInput("json", f"not valid JSON ({exc.msg} {where})", line=number) from None
        if not isinstance(value, dict):
            raise InvalidInput("json", "each line must be a JSON object", line=number)
        yield number, value


def _csv_rows(
    stream: IO[str], columns: list[str] | None, delimiter: str
) -> Iterator[tuple[int, Mapping[str, Any]]]:
    reader = csv.reader(stream, delimiter=delimiter, strict=True)
    header = columns
    try:
        for cells in reader:
            number = reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            if header is None:
                header = [c.strip() for c in cells]
                unknown = [c for c in header if c not in TASK_FIELDS]
                if unknown:
                    raise InvalidInput(
                        "columns",
                        f"unknown column {unknown[0]!r} (known: {', '.join(TASK_FIELDS)})",
                        line=number,
                    )
                continue
            if len(cells) != len(header):
                raise InvalidInput(
                    "columns",
                    f"{len(cells)} values for {len(header)} columns ({', '.join(header)})",
                    line=number,
                )
            yield number, dict(zip(header, cells, strict=True))
    except csv.Error as exc:
        raise InvalidInput("csv", f"unreadable CSV ({exc})", line=reader.line_num) from None


def tasks_from_rows(
    rows: Iterator[tuple[int, Mapping[str, Any]]],
    get_task_type: Callable[[str], TaskType | None],
    *,
    now: datetime,
    default_type: str | None = None,
    max_argument_bytes: int | None = None,
    check: Callable[[Task, TaskType], None] | None = None,
    reach: Reach | None = None,
) -> Iterator[Task]:
    """Build a task from each row, locating every refusal at its line
    (arguments longer than ``max_argument_bytes`` of JSON included, a
    callback URL ``reach`` does not allow, default public addresses only,
    and what ``check`` refuses in a built task: its arguments, for instance)."""
    types: dict[str, TaskType | None] = {}
    for number, values in rows:
        try:
            name = str(values.get("type") or default_type or "").strip()
            if not name:
                raise InvalidInput("type", "is required (a column, or --task-type)")
            if name not in types:
                types[name] = get_task_type(name)
            task_type = types[name]
            if task_type is None:
                raise UnknownTaskType(name)
            built = task_from_input({**values, "type": name}, task_type, now=now, reach=reach)
            built.check_arguments_size(max_argument_bytes)
            if check is not None:
                check(built, task_type)
            yield built
        except InvalidInput as error:
            raise error.at_line(number) from None
