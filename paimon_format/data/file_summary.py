"""What a data file's metadata needs from its rows, gathered one row group at a time.

Why: a file's `DataFileMeta` holds column bounds and null counts, its first and last key, its
sequence range and its count of retractions. Computing them at the end from the file's rows meant
keeping every row group of the file in memory until it was finished, so a compaction task's memory
grew with its output file (a primary-key bucket of 1.25M rows held its whole merged output).
Here each row group leaves two values per column (its minimum and maximum), its null counts and a
few numbers; the file's statistics are then computed by `stats.value_stats` over those extremes
(the minimum of the minimums and the maximum of the maximums are the file's, and truncation is
applied to those as before), with the null counts summed.

A row group holding NaN in a float column leaves NaN as its extremes, so the file keeps no bounds
for that column, as when the stats were computed over all rows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.data.stats import has_min_max
from paimon_format.model.file_layout import RETRACT_KINDS, SEQUENCE_NUMBER, VALUE_KIND
from paimon_format.model.types import DataField


class FileSummary:
    """The per-row-group facts of one data file's rows; `extremes` stands in for the rows in the stats."""

    def __init__(
        self,
        fields: Sequence[DataField],
        key_names: Sequence[str],
        primary_key: bool,
        bounded: Collection[str] | None = None,
    ) -> None:
        self._fields = list(fields)
        self._key_names = list(key_names)
        # the columns whose bounds the stats record (stats mode full or truncate, and the key): the
        # others keep only null counts, and their values are never converted (a DATE before year 1
        # has no Python value, yet a column in mode none or counts holds it fine)
        self._bounded = {f.name for f in fields} if bounded is None else set(bounded)
        self._primary_key = primary_key
        self._parts: list[pa.Table] = []
        self.null_counts: dict[str, int] = {f.name: 0 for f in fields}
        self.rows = 0
        self.first_key: list[Any] | None = None
        self.last_key: list[Any] | None = None
        self.deletes = 0
        self.min_sequence: int | None = None
        self.max_sequence: int | None = None

    def add(self, chunk: pa.Table) -> None:
        """Take one row group's facts (the chunk itself is not kept)."""
        if chunk.num_rows == 0:
            return
        self.rows += chunk.num_rows
        columns = {}
        for field in self._fields:
            column = chunk.column(field.name)
            self.null_counts[field.name] += column.null_count
            bounded = field.name in self._bounded
            columns[field.name] = _chunk_extremes(column, field) if bounded else pa.nulls(2, column.type)
        self._parts.append(pa.table(columns))
        if self._primary_key:
            self._add_key_values(chunk)

    def _add_key_values(self, chunk: pa.Table) -> None:
        last = chunk.num_rows - 1
        if self.first_key is None:
            self.first_key = [chunk.column(name)[0].as_py() for name in self._key_names]
        self.last_key = [chunk.column(name)[last].as_py() for name in self._key_names]
        kinds = chunk.column(VALUE_KIND).to_numpy()
        self.deletes += int(np.count_nonzero(np.isin(kinds, RETRACT_KINDS)))
        extremes = pc.min_max(chunk.column(SEQUENCE_NUMBER))
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        self.min_sequence = low if self.min_sequence is None else min(self.min_sequence, low)
        self.max_sequence = high if self.max_sequence is None else max(self.max_sequence, high)

    def extremes(self) -> pa.Table:
        """Two rows per row group (its minimum and maximum of each column; nulls where it had no
        value), in the columns' types: what the file's bounds are computed over."""
        return pa.concat_tables(self._parts) if self._parts else pa.table({})


def _chunk_extremes(column: pa.ChunkedArray, field: DataField) -> pa.Array:
    """[min, max] of one row group's column, [NaN, NaN] when it holds NaN, nulls when it has no
    bounds (all null, or a type without bounds)."""
    if not has_min_max(field.type) or column.null_count == len(column):
        return pa.nulls(2, column.type)
    if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
        return pa.array([float("nan")] * 2, column.type)
    found = pc.min_max(column)
    return pa.array([found["min"].as_py(), found["max"].as_py()], column.type)
