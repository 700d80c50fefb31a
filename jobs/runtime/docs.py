"""The option tables of docs/operations/<operation>.md, generated from the operations' pydantic models.

The YAML an operation accepts is exactly its CONFIG_MODEL (jobs/runtime/registry.py), so the
reference of its keys is rendered from that model: key, type, default and the Field description.
A hand-written table would drift from the model the day a key is added; this one cannot, because
`python -m jobs docs --write docs/operations` rewrites it and tests/jobs/test_docs.py fails when a
page's table and its model disagree.

Each page holds the generated part between two markers; everything around them is prose:

    <!-- options:begin -->
    ...generated...
    <!-- options:end -->
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from jobs.runtime.config import TableJobConfig
from jobs.runtime.registry import OPERATIONS, load

BEGIN = "<!-- options:begin -->"
END = "<!-- options:end -->"
REGENERATE = "python -m jobs docs --write docs/operations"
SHARED_LINK_TEXT = "how every operation runs"
SHARED_LINK = "README.md#the-keys-every-job-shares"  # docs/operations/README.md
_GENERATED = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)

# Where the frame's option models live (TableJobConfig, LocalRunOptions, ...): keys an operation
# inherits from them are shared by many jobs and listed once per page, after the operation's own.
FRAME_PACKAGE = "jobs.runtime."


@dataclass(frozen=True)
class OptionRow:
    """One line of an option table."""

    key: str  # dotted for nested mappings: source.format, lock.ttl, overrides[].match
    type: str
    default: str
    description: str


class PageError(Exception):
    """A page that cannot be regenerated: it exists but has no (or broken) option markers."""


def page_name(operation: str) -> str:
    """docs/operations/<this>: the operation's name as typed on the command line."""
    return f"{operation}.md"


# Rendering types, defaults and descriptions.


def _without_none(annotation: Any) -> list[Any]:
    """The members of a union other than None (an optional key's type is the type of its value)."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [member for member in typing.get_args(annotation) if member is not type(None)]
    return [annotation]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a key holds (directly or optionally), or None for a plain value."""
    members = _without_none(annotation)
    if len(members) == 1 and isinstance(members[0], type) and issubclass(members[0], BaseModel):
        return members[0]
    return None


def _list_item_model(annotation: Any) -> type[BaseModel] | None:
    """The model of each item when the key holds a list of mappings with their own keys."""
    members = _without_none(annotation)
    if len(members) == 1 and typing.get_origin(members[0]) is list:
        (item,) = typing.get_args(members[0]) or (Any,)
        return _model_of(item)
    return None


_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_name(annotation: Any) -> str:
    """A YAML reader's name for a key's type: string, integer, list of string, `a` \\| `b`, mapping."""
    members = _without_none(annotation)
    if len(members) > 1:
        return " or ".join(type_name(member) for member in members)
    (annotation,) = members
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return f"list of {type_name(item)}"
    if origin is dict or annotation is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    if annotation is Any:
        return "any"
    return _SCALARS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(info: FieldInfo) -> str:
    """The limits pydantic enforces on a value (ge/le/gt/lt, a list's minimum length), as text."""
    limits = []
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            limits.append(f">= {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            limits.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            limits.append(f"<= {item.le}")
        elif isinstance(item, annotated_types.Lt):
            limits.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.MinLen) and item.min_length > 0:
            limits.append(f"at least {item.min_length}")
    return f" ({', '.join(limits)})" if limits else ""


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    if isinstance(value, list):
        return "[]" if not value else str(value)
    return str(value)


def default_text(info: FieldInfo) -> str:
    """`required`, `unset` (the job falls back to what the description says), or the YAML value."""
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "unset"
    else:
        value = info.default
    if value is None:
        return "unset"
    shown = _yaml_value(value)
    return shown if shown == "see below" else f"`{shown}`"


def _cell(text: str) -> str:
    """One table cell: whitespace collapsed, pipes escaped (a description may say `order | zorder`)."""
    text = " ".join(text.split())
    return re.sub(r"(?<!\\)\|", r"\\|", text)


def _docstring_summary(model: type[BaseModel]) -> str:
    doc = model.__doc__ or ""
    if model.__doc__ == BaseModel.__doc__:
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def description_of(info: FieldInfo, annotation: Any) -> str:
    """The Field description; a nested mapping without one takes its model's docstring."""
    if info.description:
        return info.description
    nested = _model_of(annotation) or _list_item_model(annotation)
    return _docstring_summary(nested) if nested is not None else ""


# Walking a model into rows.


def _operation_block(key: str, model: type[BaseModel]) -> str | None:
    """The operation whose keys a maintain block takes (`expire_snapshots:` -> expire-snapshots)."""
    operation = key.replace("_", "-")
    if operation not in OPERATIONS or "enabled" not in model.model_fields:
        return None
    try:
        base = load(operation).CONFIG_MODEL
    except Exception:
        return None
    return operation if issubclass(model, base) else None


def _block_row(key: str, operation: str) -> OptionRow:
    return OptionRow(
        key,
        "mapping",
        "unset",
        f"the keys of [{operation}]({page_name(operation)}) (not the top-level ones), plus `enabled` "
        "(default true; false: skip the operation)",
    )


def option_rows(model: type[BaseModel], prefix: str = "") -> Iterator[OptionRow]:
    """Every key of `model`, nested mappings expanded as dotted keys (lists of mappings as `key[].x`)."""
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        key = f"{prefix}{name}"
        annotation = info.annotation
        nested = _model_of(annotation)
        operation = _operation_block(name, nested) if nested is not None else None
        if operation is not None:
            yield _block_row(key, operation)
            continue
        yield OptionRow(
            key,
            type_name(annotation) + _bounds(info),
            default_text(info),
            description_of(info, annotation),
        )
        if nested is not None:
            yield from option_rows(nested, f"{key}.")
        item = _list_item_model(annotation)
        if item is not None:
            yield from option_rows(item, f"{key}[].")


def _table(rows: list[OptionRow]) -> list[str]:
    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for row in rows:
        lines.append(f"| `{row.key}` | {_cell(row.type)} | {_cell(row.default)} | {_cell(row.description)} |")
    return lines


def shared_keys(model: type[BaseModel]) -> frozenset[str]:
    """The keys every table job has, and those `model` inherits from the frame's option models.

    Found from the model's bases rather than by importing them, so that `python -m jobs` (which
    imports this module) does not load the driver-execution machinery just to print its help.
    """
    frame_bases = [
        base
        for base in model.__mro__[1:]
        if issubclass(base, BaseModel) and base.__module__.startswith(FRAME_PACKAGE)
    ]
    inherited = {name for base in frame_bases for name in base.model_fields}
    return frozenset(TableJobConfig.model_fields) | frozenset(inherited)


def options_markdown(model: type[BaseModel]) -> str:
    """The option tables of one model: its own keys, then the keys every job shares."""
    rows = list(option_rows(model))
    shared_names = shared_keys(model)
    own = [row for row in rows if row.key.split(".")[0].split("[")[0] not in shared_names]
    shared = [row for row in rows if row not in own]
    lines = _table(own)
    if shared:
        lines += ["", f"Keys every job shares (see [{SHARED_LINK_TEXT}]({SHARED_LINK})):", ""]
        lines += _table(shared)
    return "\n".join(lines) + "\n"


def operation_markdown(operation: str) -> str:
    """`python -m jobs schema <operation> --markdown`: the option tables of one operation."""
    return options_markdown(load(operation).CONFIG_MODEL)


# The generated part of a page.


def generated_block(operation: str) -> str:
    """What sits between the markers of docs/operations/<operation>.md, markers included."""
    note = f"<!-- generated from the pydantic model by `{REGENERATE}`; edit the model, not this table -->"
    return f"{BEGIN}\n{note}\n\n{operation_markdown(operation)}{END}"


def render_page(operation: str, page: str) -> str:
    """`page` with its generated block replaced by the current one (PageError without markers)."""
    if len(_GENERATED.findall(page)) != 1:
        raise PageError(f"{page_name(operation)}: expected one {BEGIN} ... {END} block")
    block = generated_block(operation)
    return _GENERATED.sub(lambda _: block, page)


def new_page(operation: str) -> str:
    """A page for an operation that has none yet: a title, its one-line description, its options."""
    title = f"# {operation}\n\n{OPERATIONS[operation].description}."
    return f"{title}\n\n## Options\n\n{generated_block(operation)}\n"


@dataclass(frozen=True)
class PageStatus:
    operation: str
    path: Path
    state: Literal["current", "stale", "missing", "broken"]
    detail: str = ""


def check_pages(directory: Path) -> list[PageStatus]:
    """Whether each operation's page exists and its option tables equal what its model renders."""
    statuses = []
    for operation in OPERATIONS:
        path = directory / page_name(operation)
        if not path.exists():
            statuses.append(PageStatus(operation, path, "missing"))
            continue
        text = path.read_text(encoding="utf-8")
        try:
            current = render_page(operation, text) == text
        except PageError as error:
            statuses.append(PageStatus(operation, path, "broken", str(error)))
            continue
        statuses.append(PageStatus(operation, path, "current" if current else "stale"))
    return statuses


def write_pages(directory: Path) -> list[PageStatus]:
    """Regenerate every page's option tables (a missing page is created); returns what was not current.

    A page without markers is left alone and reported broken: its prose is somebody's work.
    """
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for status in check_pages(directory):
        if status.state == "missing":
            status.path.write_text(new_page(status.operation), encoding="utf-8")
        elif status.state == "stale":
            text = status.path.read_text(encoding="utf-8")
            status.path.write_text(render_page(status.operation, text), encoding="utf-8")
        if status.state != "current":
            changed.append(status)
    return changed
