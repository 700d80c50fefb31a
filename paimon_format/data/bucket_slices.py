"""Input rows grouped by partition and bucket: the slices a write turns into one bucket's files.

Vectorised: rows are coded per group with numpy (mixed-radix codes over the partition columns'
distinct values and the bucket), stably sorted only when the input is not already grouped, and
sliced without copying.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.data.bucket import bucket_array, bucket_key_columns
from paimon_format.errors import DataWriteError, UnsupportedOperationError
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema


class BucketSlice(NamedTuple):
    """The rows of one partition and bucket (unpacks as the tuple the write path passes around)."""

    partition_values: list[Any]
    partition: bytes
    bucket: int
    data: pa.Table


def _dense_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, int]:
    """Per row, the index of its value among the column's distinct values (nulls are a value)."""
    distinct = pc.unique(column)
    codes = pc.index_in(column, value_set=distinct, skip_nulls=False)
    return codes.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), len(distinct)


def _group_codes(
    data: pa.Table, columns: Sequence[str], extra: np.ndarray | None, extra_size: int
) -> tuple[np.ndarray, int]:
    """Per row an int64 that is equal exactly for rows with equal values in `columns` (+ `extra`),
    and the bound all codes are below."""
    codes = np.zeros(data.num_rows, dtype=np.int64)
    parts: list[tuple[np.ndarray, int]] = [_dense_codes(data.column(name)) for name in columns]
    if extra is not None:
        parts.append((extra.astype(np.int64, copy=False), max(extra_size, 1)))
    span = 1
    for part, size in parts:
        if span * size >= 2**62:  # keep the mixed-radix number in int64: renumber densely first
            _, codes = np.unique(codes, return_inverse=True)
            codes = codes.astype(np.int64, copy=False)
            span = int(codes.max()) + 1 if len(codes) else 1
        codes = codes * size + part
        span *= size
    return codes, span


def _stable_order(codes: np.ndarray, span: int) -> np.ndarray:
    """Stable argsort; numpy radix-sorts 16-bit keys, ten times faster than sorting int64."""
    if span <= 2**16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    return np.argsort(codes, kind="stable")


def check_bucket_mode(schema: TableSchema, num_buckets: int) -> None:
    """Fixed buckets, or bucket-unaware append tables: the layouts this writer can produce.

    Dynamic-bucket (-1) primary-key tables need a hash index, postpone (-2) tables a later
    compaction; writing them like fixed-bucket tables would put one key in several buckets.
    """
    if num_buckets > 0 or (num_buckets == -1 and not schema.primary_keys):
        return
    raise UnsupportedOperationError(
        f"bucket={num_buckets} is not supported by this writer: use a fixed bucket count for "
        "primary-key tables, or bucket=-1 for append tables"
    )


def _buckets_of(data: pa.Table, schema: TableSchema, num_buckets: int) -> np.ndarray:
    if num_buckets <= 0:
        return np.zeros(data.num_rows, dtype=np.int32)
    keys = bucket_key_columns(schema)
    if not keys:
        raise DataWriteError(f"bucket={num_buckets} needs a primary key or the bucket-key option")
    key_types = [schema.field(k).type for k in keys]
    return bucket_array([data.column(k) for k in keys], key_types, num_buckets)


def split_by_partition_and_bucket(
    data: pa.Table,
    schema: TableSchema,
    num_buckets: int | None = None,
    buckets: np.ndarray | pa.Array | pa.ChunkedArray | None = None,
) -> Iterator[BucketSlice]:
    """Group rows by partition and bucket, keeping input order inside each group.

    `num_buckets` defaults to the table's `bucket` option; `buckets` may carry precomputed bucket
    numbers (the write job computes them before its shuffle). Input that is already grouped --
    the write job sorts by partition -- is sliced without copying. Dynamic-bucket primary-key
    tables (bucket -1) take only precomputed buckets (assigned from the table's hash index,
    `hash_index.PartitionAssigner`).
    """
    if num_buckets is None:
        num_buckets = CoreOptions(schema.options).bucket
    if not (buckets is not None and num_buckets == -1 and schema.primary_keys):
        check_bucket_mode(schema, num_buckets)
    if data.num_rows == 0:
        return
    if buckets is None:
        bucket_numbers = _buckets_of(data, schema, num_buckets)
    elif isinstance(buckets, np.ndarray):
        bucket_numbers = buckets
    else:
        bucket_numbers = buckets.to_numpy(zero_copy_only=False)
    bucket_numbers = np.asarray(bucket_numbers, dtype=np.int64)
    if len(bucket_numbers) != data.num_rows:
        raise DataWriteError(f"{len(bucket_numbers)} bucket numbers for {data.num_rows} rows")
    partition_keys = list(schema.partition_keys)
    bucket_span = int(bucket_numbers.max()) + 1 if bucket_numbers.min() >= 0 else 0
    if bucket_span == 0:
        raise DataWriteError("bucket numbers must not be negative")
    codes, span = _group_codes(data, partition_keys, bucket_numbers, bucket_span)
    if len(codes) > 1 and not bool(np.all(codes[1:] >= codes[:-1])):
        # one gather of the whole table: ~2x faster than a gather per group (memory: one copy)
        order = _stable_order(codes, span)
        data, codes, bucket_numbers = data.take(pa.array(order)), codes[order], bucket_numbers[order]
    starts = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [data.num_rows]))
    partition_types = schema.partition_types()
    for start, end in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        part = data.slice(start, end - start)
        values = [part.column(k)[0].as_py() for k in partition_keys]
        yield BucketSlice(values, serialize_row(values, partition_types), int(bucket_numbers[start]), part)
