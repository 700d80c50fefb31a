"""JSON metadata as Java's Jackson writes it, and the strict reading of a metadata JSON object.

Snapshots, tags, schemas and consumers are all JSON files written by Java's `JsonSerdeUtil`. One
writer here produces the same bytes, so files we write are indistinguishable from Java's; it lives
in `model` (not next to snapshots) so that reading a schema does not import the snapshot code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from paimon_format.errors import CorruptFileError

_JACKSON_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _jackson_string(text: str) -> str:
    out = ['"']
    for char in text:
        escaped = _JACKSON_SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _jackson_value(value: Any, nesting: int) -> str:
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        inner = "  " * (nesting + 1)
        entries = [
            f"{inner}{_jackson_string(str(k))} : {_jackson_value(v, nesting + 1)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(entries) + "\n" + "  " * nesting + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(_jackson_value(item, nesting) for item in value) + " ]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _jackson_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON: {value!r}")


def jackson_json(value: Any) -> str:
    """JSON text exactly as Java's `JsonSerdeUtil.toJson` (Jackson default pretty printer) writes it.

    Why not `json.dumps(indent=2)`: byte-identical metadata makes diffs against Java-written tables
    meaningful and keeps our files indistinguishable from Java's. Jackson's layout: 2-space object
    indentation, `"key" : value`, arrays inline as `[ a, b ]` (objects inside them open on the same
    line: `[ {`), empty containers as `{ }` / `[ ]`, no trailing newline. Non-ASCII is written as-is
    (UTF-8); control characters use Jackson's escapes. Decimals (from `parse_float=Decimal`) keep
    their original digits, so a Java `Duration` like `86400.000000000` round-trips unchanged.
    """
    return _jackson_value(value, 0)


def load_json_object(data: bytes | str, path: str) -> dict[str, Any]:
    """Parse a metadata file that must hold one JSON object; anything else is a corrupt file."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        parsed = json.loads(text, parse_float=Decimal)
    except (UnicodeDecodeError, ValueError) as error:
        raise CorruptFileError(path, f"not valid JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise CorruptFileError(path, f"expected a JSON object, found {type(parsed).__name__}")
    return parsed
