"""The partial-update and aggregation merge engine over windows of sorted rows.

Keys that occur more than once in a window are merged column-wise (`columnar.py`) where that gives
Paimon's result, the rest row by row through the merge function (`row_functions.py`). Keys met once
pass through unchanged (`ReducerMergeFunctionWrapper`), and their rows are never converted to
Python values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.merge.columnar import aggregation_columns, partial_update_columns
from paimon_format.merge.row_functions import (
    DELETE,
    Aggregation,
    MergeRow,
    PartialUpdate,
    row_merge_function,
)
from paimon_format.model.file_layout import RETRACT_KINDS, SEQUENCE_NUMBER, VALUE_KIND
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema


@dataclass
class RowMergeEngine:
    """Merges the keys that occur more than once in a window: column-wise (`columnar_merge`) where
    that gives Paimon's result, the rest row by row through the merge function. Keys met once pass
    through unchanged, except with `merge_single_retractions`: Paimon's lookup compaction
    (`LookupChangelogMergeFunctionWrapper`) merges every key through the merge function, so a lone
    -U/-D becomes what the function makes of it (aggregation: an insert of the retracted values; a
    lone add comes out with its values unchanged, so adds still pass through)."""

    function: PartialUpdate | Aggregation
    value_names: list[str]
    merge_single_retractions: bool = False

    def merge(self, window: pa.Table, order: np.ndarray, starts: np.ndarray) -> pa.Table:
        n = len(order)
        if n == 0:
            return window.slice(0, 0)
        sizes = np.append(starts[1:], n) - starts
        single = sizes == 1
        if self.merge_single_retractions and single.any():
            first_kinds = window.column(VALUE_KIND).to_numpy()[order[starts]]
            single &= ~np.isin(first_kinds, RETRACT_KINDS)
        if single.all():
            return window.take(order)
        rows = window.take(order[np.repeat(~single, sizes)])
        group_sizes = sizes[~single]
        group_starts = np.cumsum(group_sizes) - group_sizes
        kinds = rows.column(VALUE_KIND).to_numpy()
        is_add = ~np.isin(kinds, RETRACT_KINDS)
        fast = self._fast_groups(kinds, group_starts)
        multi_index = np.flatnonzero(~single)
        parts = [(np.flatnonzero(single), window.take(order[starts[single]]))]
        if fast.any():
            merged = self._merge_columnar(rows, group_sizes, fast, is_add)
            if merged is None:
                fast[:] = False
            else:
                parts.append((multi_index[fast], merged))
        if not fast.all():
            parts.append((multi_index[~fast], self._merge_row_wise(rows, group_sizes, ~fast)))
        combined = pa.concat_tables([table for _, table in parts])
        group_index = np.concatenate([index for index, _ in parts])
        return combined.take(np.argsort(group_index, kind="stable"))

    def _fast_groups(self, kinds: np.ndarray, group_starts: np.ndarray) -> np.ndarray:
        """Groups the columnar path may merge (it may still decline a window by returning None)."""
        is_add = ~np.isin(kinds, RETRACT_KINDS)
        function = self.function
        if isinstance(function, PartialUpdate):
            if function.groups.enabled:
                return np.zeros(len(group_starts), dtype=bool)
            if function.ignore_delete:
                return np.ones(len(group_starts), dtype=bool)
            return np.minimum.reduceat(is_add, group_starts).astype(bool)
        if function.remove_record_on_delete:  # a -D restarts the row: row-wise
            return np.minimum.reduceat(kinds != DELETE, group_starts).astype(bool)
        return np.ones(len(group_starts), dtype=bool)

    def _merge_columnar(
        self, rows: pa.Table, group_sizes: np.ndarray, chosen: np.ndarray, is_add: np.ndarray
    ) -> pa.Table | None:
        mask = np.repeat(chosen, group_sizes)
        subset = rows if mask.all() else rows.filter(pa.array(mask))
        sizes = group_sizes[chosen]
        starts = np.cumsum(sizes) - sizes
        if isinstance(self.function, PartialUpdate):
            result = partial_update_columns(self.function, subset, starts, is_add[mask])
        else:
            result = aggregation_columns(self.function, subset, starts, is_add[mask])
        if result is None:
            return None
        columns, sequences, kinds = result
        return self._assemble(subset, sizes, columns, sequences, kinds)

    def _merge_row_wise(self, rows: pa.Table, group_sizes: np.ndarray, chosen: np.ndarray) -> pa.Table:
        mask = np.repeat(chosen, group_sizes)
        subset = rows if mask.all() else rows.filter(pa.array(mask))
        sizes = group_sizes[chosen]
        kinds = subset.column(VALUE_KIND).to_pylist()
        sequences = subset.column(SEQUENCE_NUMBER).to_pylist()
        values = list(zip(*[subset.column(name).to_pylist() for name in self.value_names], strict=True))
        merged: list[MergeRow] = []
        offset = 0
        for size in sizes.tolist():
            group = [MergeRow(kinds[j], sequences[j], list(values[j])) for j in range(offset, offset + size)]
            merged.append(self.function.merge_rows(group))
            offset += size
        columns = {
            name: pa.array([r.values[i] for r in merged], type=subset.schema.field(name).type)
            for i, name in enumerate(self.value_names)
        }
        return self._assemble(
            subset,
            sizes,
            columns,
            np.array([r.sequence for r in merged], dtype=np.int64),
            np.array([r.kind for r in merged], dtype=np.int8),
        )

    def _assemble(
        self,
        rows: pa.Table,
        sizes: np.ndarray,
        columns: dict[str, pa.Array],
        sequences: np.ndarray,
        kinds: np.ndarray,
    ) -> pa.Table:
        """The merged rows in the data-file layout; key columns from each group's newest row."""
        last = pa.array(np.cumsum(sizes) - 1)
        arrays = []
        for field in rows.schema:
            if field.name == SEQUENCE_NUMBER:
                arrays.append(pa.array(sequences, type=field.type))
            elif field.name == VALUE_KIND:
                arrays.append(pa.array(kinds, type=field.type))
            elif field.name in columns:
                arrays.append(columns[field.name])
            else:
                arrays.append(pc.take(rows.column(field.name), last))
        return pa.Table.from_arrays(arrays, schema=rows.schema)


def row_merge_engine(schema: TableSchema, options: CoreOptions) -> RowMergeEngine:
    """The engine of a partial-update or aggregation table."""
    return RowMergeEngine(row_merge_function(schema, options), schema.field_names())
