"""Vectorised partial-update and aggregation: a key's rows reduced column by column.

`row_functions.py` follows Paimon's merge functions row by row in Python, which is exact but ~50x slower
than the deduplicate path. For most groups of rows of one key the result is a per-column reduction
that Arrow and numpy compute for all groups at once:

* partial-update without sequence groups, for groups without -U/-D (or all groups with
  `ignore-delete`, where retractions only matter through Paimon's "first row initialises" rule):
  each field's last non-null value among the adds, else the first row's value if that row is a
  retraction, else null;
* aggregation (groups without a -D under `aggregation.remove-record-on-delete`): sum/min/max/
  bool_and/bool_or as Arrow hash aggregates (skip nulls, null when every input is null; sum signed by
  the row kind), first/last(_non_null)_value and the key columns by index arithmetic, listagg as a
  list aggregate joined with the delimiter (blank strings skipped); `ignore-retract` fields see the
  adds only.

Whatever cannot be computed exactly this way -- sequence groups, a retraction a function refuses
(the row-wise path raises Paimon's error), DECIMAL/FLOAT sums (Java rounds/overflows per step),
integer sums that could overflow on the way, listagg distinct -- returns None and is merged by the
row-wise path instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.merge.aggregates import PRIMARY_KEY, FieldAggregator
from paimon_format.merge.interface import MergeFunctionError
from paimon_format.merge.row_functions import Aggregation, PartialUpdate

_GROUP = "__merge_group"
_INTEGER_BITS = {"TINYINT": 7, "SMALLINT": 15, "INT": 31, "BIGINT": 63}
_HASH_FUNCTIONS = {"sum": "sum", "min": "min", "max": "max", "bool_and": "all", "bool_or": "any"}
_SKIP_NULLS = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)


def _last_where(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per group, the index of the last row where `mask` holds, or -1."""
    positions = np.where(mask, np.arange(len(mask)), -1)
    return np.maximum.reduceat(positions, starts)


def _first_where(mask: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per group, the index of the first row where `mask` holds, or -1."""
    positions = np.where(mask, np.arange(len(mask)), len(mask))
    first = np.minimum.reduceat(positions, starts)
    return np.where(first < ends, first, -1)


def _take_or_null(column: pa.ChunkedArray | pa.Array, indices: np.ndarray) -> pa.Array:
    """`column[indices]`, null where the index is -1."""
    return pc.take(column, pa.array(indices, mask=indices < 0, type=pa.int64()))


def _valid(column: pa.ChunkedArray) -> np.ndarray:
    return pc.is_valid(column).to_numpy(zero_copy_only=False)


def partial_update_columns(
    function: PartialUpdate, rows: pa.Table, starts: np.ndarray, is_add: np.ndarray
) -> tuple[dict[str, pa.Array], np.ndarray, np.ndarray] | None:
    """Merged value columns, sequence numbers and kinds of each group, or None (row-wise path)."""
    if function.groups.enabled:
        return None
    if not function.ignore_delete and not is_add.all():
        return None
    first_is_retract = ~is_add[starts]
    columns: dict[str, pa.Array] = {}
    for name, nullable in zip(function.names, function.nullables, strict=True):
        column = rows.column(name)
        valid = _valid(column)
        if not nullable and not (valid[is_add].all() and valid[starts[first_is_retract]].all()):
            raise MergeFunctionError(f"field {name} can not be null")
        last = _last_where(valid & is_add, starts)
        fallback = np.where(first_is_retract, starts, -1)
        columns[name] = _take_or_null(column, np.where(last >= 0, last, fallback))
    last_add = _last_where(is_add, starts)
    sequences = rows.column("_SEQUENCE_NUMBER").to_numpy()
    sequence = np.where(last_add >= 0, sequences[np.maximum(last_add, 0)], 0)
    kinds = np.where(last_add >= 0, 0, 3).astype(np.int8)
    return columns, sequence, kinds


def _sum_is_exact(aggregator: FieldAggregator, column: pa.ChunkedArray, max_group: int) -> bool:
    """Integer sums are exact when no partial sum can leave the type's range; FLOAT and DECIMAL
    round per step in Java, so they go the row-wise way."""
    root = aggregator.data_type.root
    if root == "DOUBLE":
        return True
    bits = _INTEGER_BITS.get(root)
    if bits is None:
        return False
    extremes = pc.min_max(column)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    if low is None:
        return True
    return max(abs(low), abs(high)) * max_group < 2**bits - 1


_RETRACTABLE = ("sum", "last_value", "last_non_null_value", PRIMARY_KEY)
"""Functions whose retraction Paimon defines (the others refuse one unless ignore-retract)."""


def aggregation_columns(
    function: Aggregation, rows: pa.Table, starts: np.ndarray, is_add: np.ndarray
) -> tuple[dict[str, pa.Array], np.ndarray, np.ndarray] | None:
    """Merged value columns, sequence numbers and kinds of the groups, or None (row-wise path).

    Retractions (-U/-D, no remove-record-on-delete: the caller routes those groups row-wise) fold
    as Paimon's aggregators do: sum subtracts (a signed sum), last_value is null after a trailing
    retraction, last_non_null_value is null when its last non-null input is a retraction, key
    columns take the newest row; with `ignore-retract` a function sees only the adds. A function
    that refuses retractions returns None so the row-wise path raises Paimon's error.
    """
    n = rows.num_rows
    ends = np.append(starts[1:], n)
    max_group = int((ends - starts).max())
    group_ids = np.repeat(np.arange(len(starts)), ends - starts)
    has_retract = not is_add.all()
    retract_mask = pa.array(~is_add)
    hashed: dict[str, tuple[pa.Array | pa.ChunkedArray, str]] = {}
    columns: dict[str, pa.Array] = {}
    for aggregator in function.aggregators:
        name, kind = aggregator.name, aggregator.function
        column = rows.column(name)
        adds_only = aggregator.ignore_retract
        if has_retract and not adds_only and kind not in _RETRACTABLE:
            return None
        if has_retract and adds_only:  # retractions leave the accumulator as it is
            column = pc.if_else(retract_mask, pa.scalar(None, column.type), column)
            valid, counted = _valid(column), is_add
        else:
            valid, counted = _valid(column), np.ones(n, dtype=bool)
        if kind == PRIMARY_KEY:
            newest = _last_where(is_add, starts) if adds_only else ends - 1
            columns[name] = _take_or_null(column, newest)
        elif kind == "last_value":
            last = _last_where(counted, starts)
            columns[name] = _take_or_null(column, np.where(is_add[np.maximum(last, 0)], last, -1))
        elif kind == "last_non_null_value":
            last = _last_where(valid & counted, starts)
            columns[name] = _take_or_null(column, np.where(is_add[np.maximum(last, 0)], last, -1))
        elif kind == "first_value":
            columns[name] = _take_or_null(column, _first_where(is_add, starts, ends))
        elif kind in ("first_non_null_value", "first_not_null_value"):
            columns[name] = _take_or_null(column, _first_where(valid & is_add, starts, ends))
        elif kind == "listagg" and not aggregator.distinct:
            columns[name] = _listagg(column, group_ids, len(starts), aggregator.delimiter)
        elif kind in _HASH_FUNCTIONS:
            if kind == "sum" and not _sum_is_exact(aggregator, column, max_group):
                return None
            if kind == "sum" and has_retract and not adds_only:
                column = pc.if_else(retract_mask, pc.negate(column), column)
            hashed[name] = (column, _HASH_FUNCTIONS[kind])
        else:
            return None
    if hashed:
        table = pa.table({_GROUP: group_ids, **{name: column for name, (column, _) in hashed.items()}})
        result = table.group_by(_GROUP, use_threads=False).aggregate(
            [(name, fn, _SKIP_NULLS) for name, (_, fn) in hashed.items()]
        )
        result = result.sort_by(_GROUP)
        for name, (_, fn) in hashed.items():
            target = rows.schema.field(name).type
            columns[name] = result.column(f"{name}_{fn}").cast(target)
    sequence = rows.column("_SEQUENCE_NUMBER").to_numpy()[ends - 1]
    return columns, sequence, np.zeros(len(starts), dtype=np.int8)


def _listagg(column: pa.ChunkedArray, group_ids: np.ndarray, groups: int, delimiter: str) -> pa.Array:
    """Non-blank strings of each group joined with the delimiter; null when a group has none."""
    text = column.cast(pa.string())
    keep = pc.fill_null(pc.invert(pc.utf8_is_space(text)), False)
    keep = pc.and_(keep, pc.greater(pc.utf8_length(text), 0))
    mask = pc.fill_null(keep, False).to_numpy(zero_copy_only=False)
    kept = pa.table({_GROUP: group_ids[mask], "text": pc.filter(text, pa.array(mask))})
    lists = kept.group_by(_GROUP, use_threads=False).aggregate([("text", "list")]).sort_by(_GROUP)
    joined = pc.binary_join(lists.column("text_list"), delimiter)
    position = np.full(groups, -1, dtype=np.int64)
    position[lists.column(_GROUP).to_numpy()] = np.arange(lists.num_rows)
    return _take_or_null(joined, position).cast(column.type)
