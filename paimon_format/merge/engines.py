"""The picking merge engines: deduplicate and first-row (Paimon's `MergeFunction`s).

`sorted_runs.py` sorts a window of rows by (key, sequence) and hands each engine the sorted order and
where each key's group starts; the engine returns one row per key (or none, when Paimon's merge
function yields nothing). Semantics follow Paimon's Java classes:

* a key met once is passed through unchanged (`ReducerMergeFunctionWrapper`), whatever its kind;
* `deduplicate` keeps the last row (`ignore-delete`: the last non-retract row);
* `first-row` keeps the first row; a retraction among several rows is an error unless
  `ignore-delete`, which skips it;
* `partial-update` and `aggregation` build the row field by field (see `row.py`); `table_engine.py`
  picks the engine of a table.

Deduplicate and first-row are vectorised (numpy over the group boundaries); they are the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from paimon_format.merge.interface import MergeFunctionError
from paimon_format.model.file_layout import RETRACT_KINDS, VALUE_KIND


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
