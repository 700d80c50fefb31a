"""The changelog a primary-key compaction produces (`changelog-producer` lookup / full-compaction).

On such tables Paimon writes changelog files while it compacts, and a streaming reader takes a
COMPACT snapshot's changelog as the table's changes. Our compaction rewrites a whole bucket into
the top level, so each key's rows from every level meet in one merge window (`merge.sorted_runs`); this
module derives, per window, the changelog Paimon's merge-function wrappers emit for those rows:

* `lookup` (Paimon's `LookupChangelogMergeFunctionWrapper`): only keys that have a level-0 row
  get changelog. "Before" is the key's newest row above level 0 (what Paimon's lookup finds in
  the upper levels), "after" the merged result. No before (or a retraction) and an added after:
  +I(after); an added before and a retracted after: -D(before); both added: -U(before),
  +U(after). The merged result itself merges the level-0 rows with that one upper row only
  (`merge.newest_upper_level_only`), and that value is what the compaction writes.
* `lookup` under the first-row engine (`FirstRowMergeFunctionWrapper`): +I(first row) for a key
  with no added row above level 0 (a key new to the table); nothing else, as first-row never
  changes a key it already has.
* `full-compaction` (`FullChangelogMergeFunctionWrapper`): every key, "before" its row at the top
  level `num-levels - 1`. A key met once passes through: +I when it is not at the top and is an
  add. A key met several times: no top row and an added result: +I(result); a top row and a
  retracted result: -D(top); a top row and an added result: -U(top), +U(result).

`changelog-producer.row-deduplicate` (with `.row-deduplicate-ignore-fields`) leaves out the
-U/+U pair when before and after hold equal values (all table columns but the ignored ones).
Changelog rows keep the sequence number of the row they copy, and carry their row kind in
`_VALUE_KIND` (+I 0, -U 1, +U 2, -D 3). Paimon writes them with its changelog file writer:
`changelog-` files at the compaction's output level with file source APPEND, committed in the
COMPACT snapshot's changelog manifest list (`ChangelogSink` writes them, the job commits them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.data.writer import BucketWriter
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.merge.interface import option_flag
from paimon_format.model.file_layout import RETRACT_KINDS, VALUE_KIND, file_arrow_schema, key_column_names
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
CHANGELOG_FILE_SOURCE = 0  # Paimon's changelog file writer marks its files APPEND
PRODUCERS_AT_COMPACTION = ("lookup", "full-compaction")
ROW_DEDUPLICATE = "changelog-producer.row-deduplicate"
ROW_DEDUPLICATE_IGNORE_FIELDS = "changelog-producer.row-deduplicate-ignore-fields"


@dataclass(frozen=True)
class ChangelogRule:
    """How one table's compaction derives its changelog (small and picklable)."""

    producer: str  # "lookup" | "full-compaction"
    first_row: bool
    top_level: int
    compared_columns: tuple[str, ...] | None  # row-deduplicate: the columns compared; None = off


def changelog_rule(schema: TableSchema, options: CoreOptions, top_level: int) -> ChangelogRule | None:
    """The table's rule, or None when its compaction produces no changelog (no primary key,
    `changelog-producer` none or input)."""
    if not schema.primary_keys or options.changelog_producer not in PRODUCERS_AT_COMPACTION:
        return None
    compared: tuple[str, ...] | None = None
    if option_flag(options, ROW_DEDUPLICATE):
        ignored = {
            name.strip() for name in (options.get(ROW_DEDUPLICATE_IGNORE_FIELDS) or "").split(",") if name
        }
        unknown = ignored - set(schema.field_names())
        if unknown:
            raise ValueError(
                f"{ROW_DEDUPLICATE_IGNORE_FIELDS}: no column {', '.join(sorted(map(repr, unknown)))}"
            )
        compared = tuple(name for name in schema.field_names() if name not in ignored)
    return ChangelogRule(
        producer=options.changelog_producer,
        first_row=options.merge_engine == "first-row",
        top_level=top_level,
        compared_columns=compared,
    )


def window_changelog(
    rule: ChangelogRule,
    window: pa.Table,
    levels: np.ndarray,
    order: np.ndarray,
    starts: np.ndarray,
    merged: pa.Table,
    key_names: Sequence[str],
) -> pa.Table:
    """The changelog rows of one merge window, in key order (before ahead of after per key).

    `window` holds the rows in the data-file layout, `levels[i]` the level of window row i,
    `order` the merge order of the window's final keys with `starts` where each key's group
    begins (every row of the key, as the merge read them), `merged` the merge result: one row
    per key in key order, retractions kept (a key whose merge yields nothing has no row).
    """
    groups = len(starts)
    if groups == 0:
        return window.slice(0, 0)
    n = len(order)
    sizes = np.append(starts[1:], n) - starts
    sorted_levels = levels[order]
    positions = np.arange(n)
    sorted_add = ~np.isin(window.column(VALUE_KIND).to_numpy()[order], RETRACT_KINDS)
    after = _merged_row_of_group(window, order, starts, merged, key_names)
    merged_add = ~np.isin(merged.column(VALUE_KIND).to_numpy(), RETRACT_KINDS)
    after_add = np.zeros(groups, dtype=bool)
    after_add[after >= 0] = merged_add[after[after >= 0]]

    if rule.producer == "lookup" and rule.first_row:
        upper_add = np.maximum.reduceat((sorted_levels > 0) & sorted_add, starts).astype(bool)
        inserts = ~upper_add & after_add
        return _assemble(window, merged, order, after, np.full(groups, -1), inserts, None, None, rule)

    if rule.producer == "lookup":
        has_level0 = np.maximum.reduceat(sorted_levels == 0, starts).astype(bool)
        before = np.maximum.reduceat(np.where(sorted_levels > 0, positions, -1), starts)
        before_add = np.zeros(groups, dtype=bool)
        before_add[before >= 0] = sorted_add[before[before >= 0]]
        inserts = has_level0 & ~before_add & after_add
        deletes = has_level0 & before_add & ~after_add
        updates = has_level0 & before_add & after_add
    else:
        before = np.maximum.reduceat(np.where(sorted_levels == rule.top_level, positions, -1), starts)
        several = sizes > 1
        inserts = (before < 0) & after_add
        deletes = several & (before >= 0) & ~after_add
        updates = several & (before >= 0) & after_add
    if rule.compared_columns is not None and updates.any():
        updates &= ~_equal_values(window, merged, order, before, after, updates, rule.compared_columns)
    return _assemble(window, merged, order, after, before, inserts, deletes, updates, rule)


def _merged_row_of_group(
    window: pa.Table, order: np.ndarray, starts: np.ndarray, merged: pa.Table, key_names: Sequence[str]
) -> np.ndarray:
    """Per key group, the index of its row in `merged` (-1: the merge yielded none)."""
    groups = len(starts)
    if merged.num_rows == groups:
        return np.arange(groups)
    group_keys = window.take(order[starts]).select(list(key_names))
    group_keys = group_keys.append_column("__group", pa.array(np.arange(groups)))
    merged_keys = merged.select(list(key_names)).append_column(
        "__merged", pa.array(np.arange(merged.num_rows))
    )
    joined = group_keys.join(merged_keys, keys=list(key_names), join_type="inner", use_threads=False)
    found = np.full(groups, -1, dtype=np.int64)
    found[joined.column("__group").to_numpy()] = joined.column("__merged").to_numpy()
    return found


def _equal_values(
    window: pa.Table,
    merged: pa.Table,
    order: np.ndarray,
    before: np.ndarray,
    after: np.ndarray,
    candidates: np.ndarray,
    columns: Sequence[str],
) -> np.ndarray:
    """Per group: do before and after hold equal values in `columns` (null equals null)?"""
    chosen = np.flatnonzero(candidates)
    old = window.take(order[before[chosen]])
    new = merged.take(after[chosen])
    equal = np.ones(len(chosen), dtype=bool)
    for name in columns:
        a, b = old.column(name), new.column(name)
        try:
            same = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
            equal &= same | both_null
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested types: compare as values
            equal &= np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], dtype=bool)
    result = np.zeros(len(candidates), dtype=bool)
    result[chosen] = equal
    return result


def _assemble(
    window: pa.Table,
    merged: pa.Table,
    order: np.ndarray,
    after: np.ndarray,
    before: np.ndarray,
    inserts: np.ndarray,
    deletes: np.ndarray | None,
    updates: np.ndarray | None,
    rule: ChangelogRule,
) -> pa.Table:
    """The changelog rows: copies of before rows (from the window) and after rows (from the
    merge result) with their row kind, ordered by key group, before ahead of after."""
    layout = window.schema
    parts: list[tuple[np.ndarray, int, pa.Table, int]] = []  # (groups, slot, rows, kind)

    def add(groups: np.ndarray, slot: int, source: pa.Table, rows: np.ndarray, kind: int) -> None:
        if len(groups):
            parts.append((groups, slot, source.take(rows), kind))

    inserted = np.flatnonzero(inserts)
    add(inserted, 1, merged, after[inserted], INSERT)
    if deletes is not None and updates is not None:
        deleted = np.flatnonzero(deletes)
        add(deleted, 0, window, order[before[deleted]], DELETE)
        updated = np.flatnonzero(updates)
        add(updated, 0, window, order[before[updated]], UPDATE_BEFORE)
        add(updated, 1, merged, after[updated], UPDATE_AFTER)
    if not parts:
        return window.slice(0, 0)
    tables = []
    for _groups, _slot, rows, kind in parts:
        rows = rows.select(layout.names).cast(layout)
        kinds = pa.array(np.full(rows.num_rows, kind), type=layout.field(VALUE_KIND).type)
        tables.append(rows.set_column(rows.schema.get_field_index(VALUE_KIND), VALUE_KIND, kinds))
    combined = pa.concat_tables(tables)
    group_of = np.concatenate([groups for groups, _, _, _ in parts])
    slot_of = np.concatenate([np.full(len(groups), slot) for groups, slot, _, _ in parts])
    return combined.take(np.lexsort((slot_of, group_of)))


class ChangelogSink:
    """The `merge.WindowObserver` of one compaction task: the changelog rows of each merge
    window, written as they come into changelog files by a `BucketWriter` (so a bucket's
    changelog is never held whole), which the caller closes or aborts with the data files."""

    def __init__(
        self, rule: ChangelogRule, schema: TableSchema, options: CoreOptions, writer: BucketWriter
    ) -> None:
        self._rule = rule
        self._key_names = key_column_names(schema, options)
        self._layout = file_arrow_schema(schema, options)
        self._writer = writer
        self.rows = 0

    def __call__(
        self, window: pa.Table, levels: np.ndarray, order: np.ndarray, starts: np.ndarray, merged: pa.Table
    ) -> None:
        rows = window_changelog(self._rule, window, levels, order, starts, merged, self._key_names)
        if rows.num_rows:
            self._writer.write_key_values(rows.select(self._layout.names).cast(self._layout))
            self.rows += rows.num_rows

    def close(self) -> list[DataFileMeta]:
        return self._writer.close()

    def abort(self) -> None:
        self._writer.abort()
