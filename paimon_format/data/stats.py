"""Value and key statistics of a data file as Java's stats collectors produce them (spec §4.5).

`metadata.stats-mode` per column (none, counts, full, truncate(n); default truncate(16)), min/max
only for the types Java records bounds for, truncated string bounds that still bound every value,
and `_VALUE_STATS_COLS` with `metadata.stats-dense-store`. Used by `writer` for every file it writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.errors import DataWriteError
from paimon_format.manifest.entries import SimpleStats
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataField, DataType

_NESTED_ROOTS = ("ARRAY", "MAP", "MULTISET", "ROW", "VARIANT", "BLOB", "VECTOR")


# -- statistics ---------------------------------------------------------------------------------------

_TRUNCATE_RE = re.compile(r"TRUNCATE\((\d+)\)")


@dataclass(frozen=True)
class StatsMode:
    """One column's `metadata.stats-mode`: none, counts, full or truncate(length)."""

    kind: str
    length: int | None = None


FULL_STATS = StatsMode("full")


def parse_stats_mode(text: str) -> StatsMode:
    normalized = text.strip().upper()
    if normalized in ("NONE", "COUNTS", "FULL"):
        return StatsMode(normalized.lower())
    match = _TRUNCATE_RE.fullmatch(normalized)
    if match and int(match.group(1)) > 0:
        return StatsMode("truncate", int(match.group(1)))
    raise DataWriteError(f"unsupported stats mode {text!r}: none, counts, full or truncate(<n>)")


def stats_modes(options: CoreOptions, names: Sequence[str]) -> list[StatsMode]:
    """Per column: `fields.<name>.stats-mode`, else `metadata.stats-mode` (default truncate(16))."""
    default = parse_stats_mode(options.metadata_stats_mode)
    modes = []
    for name in names:
        own = options.get(f"fields.{name}.stats-mode")
        modes.append(parse_stats_mode(own) if own else default)
    return modes


def has_min_max(data_type: DataType) -> bool:
    """Types Java records bounds for: not nested, not binary, timestamps only up to micros."""
    root = data_type.root
    if root in _NESTED_ROOTS or root in ("BINARY", "VARBINARY"):
        return False
    return not (root in ("TIMESTAMP", "TIMESTAMP_LTZ") and (data_type.precision or 0) > 6)


def truncate_min(value: str, length: int) -> str:
    """The first `length` code points: a lower bound of every string with that prefix."""
    return value[:length]


def truncate_max(value: str, length: int) -> str | None:
    """A string of at most `length` code points >= `value`, or None when none exists.

    Like Java: keep the value when it is short enough, else increment the last code point of
    the prefix that can be incremented and cut after it.
    """
    if len(value) <= length:
        return value
    prefix = value[:length]
    for index in range(length - 1, -1, -1):
        code = ord(prefix[index]) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be encoded; the next scalar value is larger
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:index] + chr(code)
    return None


def _min_max(column: pa.ChunkedArray, data_type: DataType) -> tuple[Any, Any]:
    if not has_min_max(data_type) or column.null_count == len(column):
        return None, None
    if data_type.root in ("FLOAT", "DOUBLE") and pc.any(pc.is_nan(column)).as_py():
        return None, None  # NaN has no place in an ordered range: give no bounds rather than wrong ones
    extremes = pc.min_max(column)
    return extremes["min"].as_py(), extremes["max"].as_py()


def column_stats(
    data: pa.Table,
    fields: Sequence[DataField],
    modes: Sequence[StatsMode],
    null_counts: Mapping[str, int] | None = None,
) -> SimpleStats:
    """Min, max and null count of each field's column (by name in `data`), as SimpleStats.

    `null_counts` (by column name) replace the counts of `data` when it stands in for the rows
    (a file's per-row-group extremes, `file_summary.FileSummary`)."""
    minimums: list[Any] = []
    maximums: list[Any] = []
    nulls: list[int | None] = []
    for f, mode in zip(fields, modes, strict=True):
        column = data.column(f.name)
        count = column.null_count if null_counts is None else null_counts[f.name]
        nulls.append(None if mode.kind == "none" else count)
        low = high = None
        if mode.kind in ("full", "truncate"):
            low, high = _min_max(column, f.type)
            if mode.kind == "truncate" and mode.length is not None and isinstance(high, str):
                low, high = truncate_min(low, mode.length), truncate_max(high, mode.length)
                if high is None:
                    low = None
        minimums.append(low)
        maximums.append(high)
    types = [f.type for f in fields]
    return SimpleStats(serialize_row(minimums, types), serialize_row(maximums, types), nulls)


def bounded_columns(schema: TableSchema, options: CoreOptions, key_names: Sequence[str]) -> set[str]:
    """The columns whose min and max a data file's stats record: stats mode full or truncate, and
    the trimmed primary key (its key stats are always full)."""
    fields = [f.name for f in schema.fields]
    modes = stats_modes(options, fields)
    bounded = {name for name, mode in zip(fields, modes, strict=True) if mode.kind in ("full", "truncate")}
    return bounded | set(key_names)


def value_stats(
    data: pa.Table, schema: TableSchema, options: CoreOptions, null_counts: Mapping[str, int] | None = None
) -> tuple[SimpleStats, list[str] | None]:
    """`_VALUE_STATS` and `_VALUE_STATS_COLS` over the table columns (`null_counts`: see
    `column_stats`).

    With `metadata.stats-dense-store` (default true) columns in mode `none` are left out and the
    kept columns are listed; null means "all columns".
    """
    fields = list(schema.fields)
    modes = stats_modes(options, [f.name for f in fields])
    if options.metadata_stats_dense_store and any(m.kind == "none" for m in modes):
        kept = [(f, m) for f, m in zip(fields, modes, strict=True) if m.kind != "none"]
        stats = column_stats(data, [f for f, _ in kept], [m for _, m in kept], null_counts)
        return stats, [f.name for f, _ in kept]
    return column_stats(data, fields, modes, null_counts), None
