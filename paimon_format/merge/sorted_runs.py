"""Streaming k-way merge of a primary-key bucket's sorted runs (spec §7, "Reading" / compaction).

Compaction rewrites several sorted runs of one bucket into one; the merge-on-read reader does the
same to answer a scan. Both call `merge_sorted_runs`, which yields the merged rows in the data-file
layout, sorted by key, one row per key, as Paimon's `SortMergeReader` + merge function do.

Why windows rather than a row heap: the merge is the hot path of compaction, and per-row Python is
two orders of magnitude slower than Arrow's kernels. Each run keeps about `batch_rows` rows
buffered. The smallest "last buffered key" across the runs that still have input is a bound: no
future row of any run can have a key <= bound (each run is sorted and holds a key at most once),
so every buffered row with key <= bound is final. Those rows are sorted in one `sort_indices` call
by (key, sequence.field, _SEQUENCE_NUMBER, retract-before-add) -- Paimon's order -- and the merge
engine picks or builds each key's result. Rows above the bound stay buffered for the next window.
Memory is therefore bounded by ~`batch_rows` rows (plus one input batch) per run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.errors import InvalidTableStateError
from paimon_format.merge.interface import MergeEngine
from paimon_format.merge.row import RowMergeEngine
from paimon_format.merge.table_engine import merge_engine_for, uses_lookup_merge
from paimon_format.model.file_layout import (
    RETRACT_KINDS,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    file_arrow_schema,
    key_column_names,
)
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema

WindowObserver = Callable[[pa.Table, np.ndarray, np.ndarray, np.ndarray, pa.Table], None]
"""Called once per merged window with (window, level of each window row, the window's merge order
(every row of the final keys), where each key's group starts in that order, and the engine's
result: one row per key, retractions kept). Compaction derives its changelog from it."""

_IS_ADD = "__merge_is_add"


def sequence_order(options: CoreOptions) -> str:
    """`sequence.field.sort-order` as an Arrow sort order."""
    text = (options.get("sequence.field.sort-order") or "ascending").strip().lower()
    return "descending" if text == "descending" else "ascending"


def sort_keys(schema: TableSchema, options: CoreOptions) -> list[tuple[str, str]]:
    """Paimon's merge order: key, then `sequence.field` (nulls first in either direction, as Java's
    generated comparator), then `_SEQUENCE_NUMBER`, then retract before add."""
    keys = [(name, "ascending") for name in key_column_names(schema, options)]
    if options.merge_engine != "first-row":
        order = sequence_order(options)
        keys += [(name, order) for name in options.sequence_field]
    keys += [(SEQUENCE_NUMBER, "ascending"), (_IS_ADD, "ascending")]
    return keys


class _RunCursor:
    """One run's buffered rows: pulls input batches only when fewer than the target are buffered.

    Every batch is checked to continue the run in strictly increasing key order: the window bound
    relies on it, and a run breaking it (a corrupt or foreign file) would otherwise yield a key
    twice or out of order silently.
    """

    def __init__(
        self, index: int, batches: Iterable[pa.RecordBatch], layout: pa.Schema, key_names: list[str]
    ) -> None:
        self.index = index
        self._source = iter(batches)
        self._layout = layout
        self._key_names = key_names
        self._chunks: list[pa.RecordBatch] = []
        self._previous_key: pa.RecordBatch | None = None
        self.rows = 0
        self.exhausted = False

    def fill(self, target_rows: int) -> None:
        while self.rows < target_rows and not self.exhausted:
            try:
                batch = next(self._source)
            except StopIteration:
                self.exhausted = True
                return
            if isinstance(batch, pa.Table):
                batches = batch.to_batches()
            else:
                batches = [batch]
            for part in batches:
                if part.num_rows:
                    part = _conform(part, self._layout)
                    self._check_order(part)
                    self._chunks.append(part)
                    self.rows += part.num_rows

    def _check_order(self, batch: pa.RecordBatch) -> None:
        keys = batch.select(self._key_names)
        checked = keys if self._previous_key is None else pa.concat_batches([self._previous_key, keys])
        if not _strictly_increasing(checked):
            raise InvalidTableStateError(
                f"merge input run {self.index} (0 = oldest) is not sorted by key with each key once: "
                "a data file of a primary-key table must be"
            )
        self._previous_key = keys.slice(keys.num_rows - 1, 1)

    def table(self) -> pa.Table:
        return pa.Table.from_batches(self._chunks, schema=self._layout)

    def last_row(self) -> pa.Table:
        last = self._chunks[-1]
        return pa.Table.from_batches([last.slice(last.num_rows - 1, 1)], schema=self._layout)

    def drop_front(self, count: int) -> None:
        """Forget the first `count` buffered rows (they went into a window)."""
        self.rows -= count
        while count:
            head = self._chunks[0]
            if head.num_rows <= count:
                count -= head.num_rows
                self._chunks.pop(0)
            else:
                self._chunks[0] = head.slice(count)
                count = 0


def _strictly_increasing(keys: pa.RecordBatch) -> bool:
    """Are the rows of `keys` in strictly increasing lexicographic order (nulls first)?"""
    n = keys.num_rows
    if n < 2:
        return True
    less = np.zeros(n - 1, dtype=bool)
    equal_so_far = np.ones(n - 1, dtype=bool)
    for column in keys.columns:
        before, after = column.slice(0, n - 1), column.slice(1)
        lt, eq = pc.less(before, after), pc.equal(before, after)
        if column.null_count:
            null_before, null_after = pc.is_null(before), pc.is_null(after)
            either = pc.or_(null_before, null_after)
            lt = pc.if_else(either, pc.and_(null_before, pc.invert(null_after)), lt)
            eq = pc.if_else(either, pc.and_(null_before, null_after), eq)
        less |= equal_so_far & lt.to_numpy(zero_copy_only=False)
        equal_so_far &= eq.to_numpy(zero_copy_only=False)
    return bool(less.all())


def _conform(batch: pa.RecordBatch, layout: pa.Schema) -> pa.RecordBatch:
    """The batch with exactly the layout's columns, in order and types (metadata may differ)."""
    if batch.schema.equals(layout, check_metadata=False):
        return batch
    columns = []
    for field in layout:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            raise InvalidTableStateError(
                f"merge input has no column {field.name!r} of the data-file layout "
                f"({', '.join(layout.names)})"
            )
        column = batch.column(index)
        columns.append(column if column.type.equals(field.type) else column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=layout)


def _group_starts(keys: pa.Table) -> np.ndarray:
    """Start offsets of runs of equal keys in sorted `keys` (two nulls are equal, as in Java's
    key comparator, for tables with `primary-key.nullable`)."""
    n = keys.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n - 1, dtype=bool)
    for column in keys.columns:
        before, after = column.slice(0, n - 1), column.slice(1)
        differs = pc.not_equal(before, after)
        if column.null_count:
            one_null = pc.not_equal(pc.is_null(before), pc.is_null(after))
            differs = pc.if_else(pc.is_null(differs), one_null, differs)
        change |= differs.to_numpy(zero_copy_only=False)
    return np.concatenate(([0], np.flatnonzero(change) + 1)).astype(np.int64)


def _order_table(window: pa.Table, keys: list[tuple[str, str]]) -> pa.Table:
    kinds = window.column(VALUE_KIND)
    is_add = pc.invert(pc.is_in(kinds, value_set=pa.array(RETRACT_KINDS, type=kinds.type)))
    columns = {name: window.column(name) for name, _ in keys if name != _IS_ADD}
    columns[_IS_ADD] = is_add.cast(pa.int8())
    return pa.table(columns)


class _Batcher:
    """Collects merged rows and hands them out in batches of at most `batch_rows` rows."""

    def __init__(self, layout: pa.Schema, batch_rows: int) -> None:
        self._layout = layout
        self._batch_rows = batch_rows
        self._pending: list[pa.Table] = []
        self._rows = 0

    def add(self, table: pa.Table) -> Iterator[pa.RecordBatch]:
        if table.num_rows:
            self._pending.append(table)
            self._rows += table.num_rows
        if self._rows >= self._batch_rows:
            yield from self._emit(final=False)

    def finish(self) -> Iterator[pa.RecordBatch]:
        yield from self._emit(final=True)

    def _emit(self, final: bool) -> Iterator[pa.RecordBatch]:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending).combine_chunks()
        full = data.num_rows if final else data.num_rows - data.num_rows % self._batch_rows
        for start in range(0, full, self._batch_rows):
            yield from data.slice(start, min(self._batch_rows, full - start)).to_batches()
        rest = data.slice(full)
        self._pending = [rest] if rest.num_rows else []
        self._rows = rest.num_rows


def sort_and_group(
    rows: pa.Table, schema: TableSchema, options: CoreOptions
) -> tuple[np.ndarray, np.ndarray]:
    """Paimon's merge order of `rows` (`sort_indices`) and where each key's group starts in it."""
    keys = sort_keys(schema, options)
    key_names = key_column_names(schema, options)
    ordered = _order_table(rows, keys)
    order = pc.sort_indices(ordered, sort_keys=keys, null_placement="at_start").to_numpy()
    return order, _group_starts(ordered.select(key_names).take(order))


def merge_rows(
    rows: pa.Table, schema: TableSchema, options: CoreOptions | None = None, *, drop_deletes: bool
) -> pa.Table:
    """Merge one bucket's rows given in any order (keys may repeat) into one row per key, sorted.

    The in-memory counterpart of `merge_sorted_runs` for a single buffer, e.g. the rows of one
    write (Java's write buffer merges them with the same merge function before flushing). The merge
    engine is only built when some key repeats, so a table whose engine this module cannot merge
    can still be written as long as every key occurs once.
    """
    options = options or CoreOptions(schema.options)
    order, starts = sort_and_group(rows, schema, options)
    if len(starts) == len(order):
        merged = rows.take(order)
    else:
        merged = merge_engine_for(schema, options).merge(rows, order, starts)
    return _drop_retractions(merged) if drop_deletes else merged


def _drop_retractions(merged: pa.Table) -> pa.Table:
    if not merged.num_rows:
        return merged
    kinds = merged.column(VALUE_KIND)
    return merged.filter(pc.invert(pc.is_in(kinds, value_set=pa.array(RETRACT_KINDS, type=kinds.type))))


def merge_sorted_runs(
    runs: Sequence[Iterable[pa.RecordBatch]],
    schema: TableSchema,
    options: CoreOptions | None = None,
    *,
    drop_deletes: bool,
    batch_rows: int = 8192,
    run_levels: Sequence[int] | None = None,
    on_window: WindowObserver | None = None,
    merge_single_retractions: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Merge sorted runs of one bucket into one key-sorted stream with one row per key.

    `runs` are oldest first, each an iterable of batches in the primary-key data-file layout
    (`file_layout.file_arrow_schema`), sorted by key with each key at most once per run. The merge
    engine of `options` (default: the schema's) decides each key's row; a key whose result is a
    retraction (-U/-D) is left out when `drop_deletes` (the top level, readers), kept otherwise.
    A key met only once is passed through unchanged, as Paimon's reducer wrapper does.

    Raises `UnsupportedOperationError` for an engine/option combination this module cannot merge
    (call `check_merge_supported` before any work to fail early), `MergeFunctionError` for input
    Paimon's merge function rejects (e.g. a delete under first-row without ignore-delete).

    `run_levels` (the level of each run's files) turns on what needs levels: on tables where Paimon
    merges through its `LookupMergeFunction` (`uses_lookup_merge`), a key's older rows above level 0
    are left out of its merge but the newest (it already holds them, e.g. an aggregate that
    includes them: merging both would count them twice); and `on_window` sees every window.
    `merge_single_retractions`: a key's lone -U/-D goes through the partial-update / aggregation
    merge function instead of passing unchanged, as in Paimon's lookup compaction.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be positive, got {batch_rows}")
    options = options or CoreOptions(schema.options)
    engine = merge_engine_for(schema, options)
    if merge_single_retractions:
        if isinstance(engine, RowMergeEngine):
            engine = dataclasses.replace(engine, merge_single_retractions=True)
    layout = file_arrow_schema(schema, options)
    if run_levels is not None and len(run_levels) != len(runs):
        raise ValueError(f"{len(run_levels)} run levels given for {len(runs)} runs")
    if on_window is not None and run_levels is None:
        raise ValueError("on_window needs run_levels")
    levels = _Levels(run_levels, uses_lookup_merge(options), on_window) if run_levels is not None else None
    return _merge(runs, schema, options, engine, layout, drop_deletes, batch_rows, levels)


class _Levels:
    """The levels of the runs, and what a merge does with them (see `merge_sorted_runs`)."""

    def __init__(
        self, run_levels: Sequence[int], lookup_merge: bool, on_window: WindowObserver | None
    ) -> None:
        self.run_levels = list(run_levels)
        self.lookup_merge = lookup_merge
        self.on_window = on_window

    def of_window(self, live: list[_RunCursor]) -> np.ndarray:
        return np.concatenate([np.full(c.rows, self.run_levels[c.index], dtype=np.int32) for c in live])


def newest_upper_level_only(
    order: np.ndarray, starts: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The merge order without each key's rows above level 0 except the newest one (Paimon's
    `LookupMergeFunction`: that row already holds the older ones), and the new group starts."""
    n = len(order)
    if n == 0:
        return order, starts
    upper = levels[order] > 0
    positions = np.arange(n)
    newest = np.maximum.reduceat(np.where(upper, positions, -1), starts)
    sizes = np.append(starts[1:], n) - starts
    keep = ~upper | (positions == np.repeat(newest, sizes))
    kept = np.add.reduceat(keep.astype(np.int64), starts)
    return order[keep], (np.cumsum(kept) - kept).astype(np.int64)


def _merge(
    runs: Sequence[Iterable[pa.RecordBatch]],
    schema: TableSchema,
    options: CoreOptions,
    engine: MergeEngine,
    layout: pa.Schema,
    drop_deletes: bool,
    batch_rows: int,
    levels: _Levels | None = None,
) -> Iterator[pa.RecordBatch]:
    key_names = key_column_names(schema, options)
    cursors = [_RunCursor(i, run, layout, key_names) for i, run in enumerate(runs)]
    key_sort = [(name, "ascending") for name in key_names]
    output = _Batcher(layout, batch_rows)
    while True:
        for cursor in cursors:
            cursor.fill(batch_rows)
        live = [c for c in cursors if c.rows]
        if not live:
            break
        window = pa.concat_tables([c.table() for c in live])
        order, starts = sort_and_group(window, schema, options)
        end = _final_prefix(live, key_names, key_sort, order, starts)
        if end < len(order):
            order = order[:end]
            starts = starts[starts < end]
        counts = _rows_per_run(live, order)
        if levels is None:
            merged = engine.merge(window, order, starts)
        else:
            row_levels = levels.of_window(live)
            if levels.lookup_merge:
                merged = engine.merge(window, *newest_upper_level_only(order, starts, row_levels))
            else:
                merged = engine.merge(window, order, starts)
            if levels.on_window is not None:
                levels.on_window(window, row_levels, order, starts, merged)
        if drop_deletes:
            merged = _drop_retractions(merged)
        yield from output.add(merged)
        for cursor, count in zip(live, counts, strict=True):
            cursor.drop_front(int(count))
    yield from output.finish()


def _final_prefix(
    live: list[_RunCursor],
    key_names: list[str],
    key_sort: list[tuple[str, str]],
    order: np.ndarray,
    starts: np.ndarray,
) -> int:
    """How many rows of the sorted window are final: those whose key <= the smallest last
    buffered key among runs that may still deliver rows (all rows once every run is drained)."""
    open_runs = [i for i, c in enumerate(live) if not c.exhausted]
    if not open_runs:
        return len(order)
    lasts = pa.concat_tables([live[i].last_row() for i in open_runs]).select(key_names)
    first = pc.sort_indices(lasts, sort_keys=key_sort, null_placement="at_start")[0].as_py()
    smallest = open_runs[first]
    offset = sum(c.rows for c in live[:smallest])
    bound_row = offset + live[smallest].rows - 1
    position = int(np.flatnonzero(order == bound_row)[0])
    group = int(np.searchsorted(starts, position, side="right"))
    return int(starts[group]) if group < len(starts) else len(order)


def _rows_per_run(live: list[_RunCursor], order: np.ndarray) -> np.ndarray:
    """How many of each run's buffered rows the window prefix `order` consumed."""
    bounds = np.cumsum([c.rows for c in live])
    run_of_row = np.searchsorted(bounds, order, side="right")
    return np.bincount(run_of_row, minlength=len(live))
