"""Merge engines: what one primary key's rows merge into (Paimon's `MergeFunction`s).

`merge.py` sorts a window of rows by (key, sequence) and hands each engine the sorted order and
where each key's group starts; the engine returns one row per key (or none, when Paimon's merge
function yields nothing). Semantics follow Paimon's Java classes:

* a key met once is passed through unchanged (`ReducerMergeFunctionWrapper`), whatever its kind;
* `deduplicate` keeps the last row (`ignore-delete`: the last non-retract row);
* `first-row` keeps the first row; a retraction among several rows is an error unless
  `ignore-delete`, which skips it;
* `partial-update` and `aggregation` build the row field by field (see `row_merge.py`).

Deduplicate and first-row are vectorised (numpy over the group boundaries); they are the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from paimon_format.data.writer import VALUE_KIND
from paimon_format.errors import InvalidTableStateError, UnsupportedOperationError
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema

RETRACT_KINDS = (1, 3)
"""`_VALUE_KIND` codes of retractions: -U (1) and -D (3)."""


class MergeFunctionError(InvalidTableStateError):
    """Rows that Paimon's merge function refuses to merge (e.g. a delete under first-row)."""


class MergeEngine(Protocol):
    def merge(self, window: pa.Table, order: np.ndarray, starts: np.ndarray) -> pa.Table:
        """One row per key group of `window.take(order)` (groups start at `starts`), in order."""
        ...


def option_flag(options: CoreOptions, key: str, *fallbacks: str) -> bool:
    """A boolean option read like Java's `Options.get` with fallback keys."""
    for name in (key, *fallbacks):
        raw = options.get(name)
        if raw is not None:
            text = raw.strip().lower()
            if text not in ("true", "false"):
                raise UnsupportedOperationError(f"option {name}={raw!r}: expected true or false")
            return text == "true"
    return False


def ignore_delete(options: CoreOptions) -> bool:
    return option_flag(
        options,
        "ignore-delete",
        "first-row.ignore-delete",
        "deduplicate.ignore-delete",
        "partial-update.ignore-delete",
    )


def _group_ends(starts: np.ndarray, total: int) -> np.ndarray:
    return np.append(starts[1:], total).astype(np.int64)


def _is_add(window: pa.Table, order: np.ndarray) -> np.ndarray:
    kinds = window.column(VALUE_KIND).to_numpy()
    return ~np.isin(kinds[order], RETRACT_KINDS)


def _single_rows(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per sorted row: does its key occur once in the window (passed through unchanged)?"""
    sizes = ends - starts
    return np.repeat(sizes == 1, sizes)


@dataclass(frozen=True)
class Deduplicate:
    """The last row per key wins; with `ignore-delete` the last row that is not a retraction."""

    ignore_delete: bool

    def merge(self, window: pa.Table, order: np.ndarray, starts: np.ndarray) -> pa.Table:
        n = len(order)
        if n == 0:
            return window.slice(0, 0)
        ends = _group_ends(starts, n)
        if not self.ignore_delete:
            return window.take(order[ends - 1])
        eligible = _is_add(window, order) | _single_rows(starts, ends)
        positions = np.where(eligible, np.arange(n), -1)
        last = np.maximum.reduceat(positions, starts)
        return window.take(order[last[last >= starts]])


@dataclass(frozen=True)
class FirstRow:
    """The first row per key wins; retractions are refused, or skipped with `ignore-delete`."""

    ignore_delete: bool

    def merge(self, window: pa.Table, order: np.ndarray, starts: np.ndarray) -> pa.Table:
        n = len(order)
        if n == 0:
            return window.slice(0, 0)
        ends = _group_ends(starts, n)
        eligible = _is_add(window, order) | _single_rows(starts, ends)
        if not self.ignore_delete and not eligible.all():
            bad = int(order[np.flatnonzero(~eligible)[0]])
            raise MergeFunctionError(
                "merge-engine=first-row cannot merge DELETE/UPDATE_BEFORE rows (set ignore-delete=true "
                f"to skip them): a retraction with _SEQUENCE_NUMBER "
                f"{window.column('_SEQUENCE_NUMBER')[bad].as_py()} meets other rows of its key"
            )
        positions = np.where(eligible, np.arange(n), n)
        first = np.minimum.reduceat(positions, starts)
        return window.take(order[first[first < ends]])


def uses_lookup_merge(options: CoreOptions) -> bool:
    """Does Paimon merge this table's rows through its `LookupMergeFunction`?

    It does where its writer looks keys up in the upper levels (`changelog-producer: lookup`,
    deletion vectors, `force-lookup`), except under first-row, whose merge is left unwrapped.
    That function merges, per key, the level-0 rows with only the newest row above level 0: a
    lookup compaction writes a key's merged value (including what it looked up below) above the
    older rows, which stay, so merging them all again would count the older ones twice.
    """
    if options.merge_engine == "first-row":
        return False
    return (
        options.changelog_producer == "lookup"
        or options.deletion_vectors_enabled
        or option_flag(options, "force-lookup")
    )


def merge_engine_for(schema: TableSchema, options: CoreOptions) -> MergeEngine:
    """The merge engine of the table's options (validated by `check_merge_supported`)."""
    check_merge_supported(schema, options)
    engine = options.merge_engine
    if engine == "deduplicate":
        return Deduplicate(ignore_delete(options))
    if engine == "first-row":
        return FirstRow(ignore_delete(options))
    from paimon_format.merge.row import row_merge_engine

    return row_merge_engine(schema, options)


def check_merge_supported(schema: TableSchema, options: CoreOptions | None = None) -> None:
    """Raise `UnsupportedOperationError` naming the option when this table cannot be merged here.

    Jobs call it before any work, so a table with an unknown aggregate function or conflicting
    merge options fails with exit 2 before anything is read or written.
    """
    options = options or CoreOptions(schema.options)
    if not schema.primary_keys:
        raise UnsupportedOperationError("merging sorted runs needs a primary-key table")
    try:
        engine = options.merge_engine
    except ValueError as error:
        raise UnsupportedOperationError(str(error)) from None
    names = set(schema.field_names())
    for name in options.sequence_field:
        if name not in names:
            raise UnsupportedOperationError(f"sequence.field: {name!r} is not a column of the table")
        if options.get(f"fields.{name}.aggregate-function") is not None:
            raise UnsupportedOperationError(
                f"fields.{name}.aggregate-function: a sequence field must not be aggregated (as in Paimon)"
            )
    if option_flag(options, "sequence.snapshot-ordering"):
        raise UnsupportedOperationError("sequence.snapshot-ordering=true is not supported by this merge")
    ignore_delete(options)
    if engine == "first-row" and options.sequence_field:
        raise UnsupportedOperationError("merge-engine=first-row does not allow sequence.field (as in Paimon)")
    if engine in ("partial-update", "aggregation"):
        from paimon_format.merge.row import check_row_merge_supported

        check_row_merge_supported(schema, options)
