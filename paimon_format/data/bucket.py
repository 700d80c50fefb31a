"""Bucket assignment for fixed-bucket tables (spec §6).

Paimon hashes the BinaryRow of the bucket-key values with MurmurHash3 (x86, 32 bit, seed 42) and
takes `abs(hash % buckets)` with Java's truncating remainder. A writer that computes another bucket
puts a key in two buckets, and primary-key readers then return both versions, so this must match
Java bit for bit.

`bucket_array` is the vectorised form the write job runs over every row: it lays the BinaryRows of a
whole batch out in one numpy buffer (same bytes as `encode_row`) and runs MurmurHash over all rows at
once, one 32-bit word position at a time. Types it cannot lay out that way fall back to the per-row path.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.errors import PaimonFormatError
from paimon_format.model.arrow_types import to_arrow
from paimon_format.model.binary_row import (
    COMPACT_DECIMAL_PRECISION,
    COMPACT_TIMESTAMP_PRECISION,
    bitset_width,
    encode_row,
)
from paimon_format.model.types import DataType

SEED = 42
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_MASK = 0xFFFFFFFF
_WORD_STRUCTS: dict[int, struct.Struct] = {}
_CHUNK_ROWS = 1 << 17  # bounds the temporaries of the vectorised path


class BucketError(PaimonFormatError, ValueError):
    """A bucket count or key that bucket assignment cannot work with."""


# -- scalar ------------------------------------------------------------------------------------------


def _words(length: int) -> struct.Struct:
    packer = _WORD_STRUCTS.get(length)
    if packer is None:
        packer = _WORD_STRUCTS[length] = struct.Struct(f"<{length // 4}I")
    return packer


def murmur3_x86_32(data: bytes, seed: int = SEED) -> int:
    """MurmurHash3 over whole little-endian 32-bit words, as Java's `MurmurHashUtils.hashBytesByWords`.

    Paimon only hashes BinaryRows, whose length is a multiple of 8, so there is no tail to mix.
    """
    length = len(data)
    if length % 4:
        raise BucketError(f"Paimon hashes whole 4-byte words; got {length} bytes")
    h = seed & _MASK
    for word in _words(length).unpack(data):
        k = (word * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * _C2) & _MASK
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def hash_row(row_bytes: bytes) -> int:
    """Java's `BinaryRow.hashCode()`: the hash of the row bytes (no arity prefix)."""
    return murmur3_x86_32(row_bytes)


def bucket_from_hash(hash_value: int, num_buckets: int) -> int:
    """Java's `Math.abs(hash % n)`: the remainder truncates toward zero, so `abs(h) % n` in Python."""
    return abs(hash_value) % num_buckets


def bucket_of(key_values: Sequence[Any], key_types: Sequence[DataType], num_buckets: int) -> int:
    """The bucket of one row's bucket-key values (typed with the table's column types)."""
    _check_buckets(num_buckets)
    return bucket_from_hash(hash_row(encode_row(key_values, key_types)), num_buckets)


def _check_buckets(num_buckets: int) -> None:
    if not isinstance(num_buckets, (int, np.integer)) or num_buckets <= 0:
        raise BucketError(f"bucket assignment needs a positive bucket count, got {num_buckets!r}")


def bucket_key_columns(schema: Any) -> list[str]:
    """Option `bucket-key` (comma list, in order) when set, else the primary key without partition columns.

    Takes anything with `.options`, `.primary_keys` and `.partition_keys` (a TableSchema).
    """
    explicit = (schema.options or {}).get("bucket-key")
    if explicit and explicit.strip():
        return [name.strip() for name in explicit.split(",") if name.strip()]
    partition = set(schema.partition_keys)
    return [key for key in schema.primary_keys if key not in partition]


# -- vectorised ----------------------------------------------------------------------------------------


class _NotVectorisable(Exception):
    """This key (type or Arrow layout) takes the per-row path."""


def bucket_array(
    columns: Sequence[pa.Array | pa.ChunkedArray], key_types: Sequence[DataType], num_buckets: int
) -> np.ndarray:
    """The bucket of every row of the key columns, as an int32 numpy array.

    Vectorised for BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, DATE, compact DECIMAL (p <= 18),
    TIMESTAMP/TIMESTAMP_LTZ of any precision, CHAR/VARCHAR/BINARY/VARBINARY; other key types (FLOAT,
    DOUBLE, TIME, DECIMAL p > 18) go row by row through `bucket_of`, with identical results.
    """
    _check_buckets(num_buckets)
    hashes = hash_array(columns, key_types)
    return (np.abs(hashes.astype(np.int64)) % int(num_buckets)).astype(np.int32)


def hash_array(columns: Sequence[pa.Array | pa.ChunkedArray], key_types: Sequence[DataType]) -> np.ndarray:
    """`hash_row(encode_row(row))` of every row of the key columns, as an int32 numpy array."""
    if len(columns) != len(key_types):
        raise BucketError(f"{len(columns)} key columns for {len(key_types)} key types")
    if not columns:
        raise BucketError("bucket assignment needs at least one key column")
    rows = len(columns[0])
    if any(len(column) != rows for column in columns):
        raise BucketError(f"key columns differ in length: {[len(c) for c in columns]}")
    result = np.empty(rows, dtype=np.int32)
    for start in range(0, rows, _CHUNK_ROWS):
        chunk = [column.slice(start, _CHUNK_ROWS) for column in columns]
        try:
            prepared = [_prepare(column, t) for column, t in zip(chunk, key_types, strict=True)]
            result[start : start + len(chunk[0])] = _hash_rows(prepared, key_types)
        except _NotVectorisable:
            result[start : start + len(chunk[0])] = _hash_per_row(chunk, key_types)
    return result


def _hash_per_row(columns: Sequence[pa.Array | pa.ChunkedArray], key_types: Sequence[DataType]) -> np.ndarray:
    values = [column.to_pylist() for column in columns]
    return np.fromiter(
        (hash_row(encode_row(row, key_types)) for row in zip(*values, strict=True)),
        dtype=np.int32,
        count=len(values[0]),
    )


_FIXED_ROOTS = {"BOOLEAN": 1, "TINYINT": 1, "SMALLINT": 2, "INT": 4, "DATE": 4, "BIGINT": 8}
_TEXT_ROOTS = ("CHAR", "VARCHAR", "BINARY", "VARBINARY")
_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


class _Column:
    """One key column ready for the row layout: null mask plus slot words or text bytes."""

    __slots__ = ("nulls", "slot", "lengths", "starts", "data", "var_millis")

    def __init__(self, nulls: np.ndarray) -> None:
        self.nulls = nulls
        self.slot: np.ndarray | None = None  # uint64 slot value for fixed-size fields
        self.lengths: np.ndarray | None = None  # text: byte length per row (0 for nulls)
        self.starts: np.ndarray | None = None  # text: start of each value in `data`
        self.data: np.ndarray | None = None  # text: uint8 value bytes
        self.var_millis: np.ndarray | None = None  # non-compact timestamp: millis in the var part


def _arrow_array(column: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if column.type != target:
        try:
            column = column.cast(target)  # safe cast: out-of-range values fail and go row by row
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            raise _NotVectorisable from None
    return column


def _null_mask(array: pa.Array) -> np.ndarray:
    if array.null_count == 0:
        return np.zeros(len(array), dtype=bool)
    return np.asarray(pc.is_null(array).to_numpy(zero_copy_only=False), dtype=bool)


def _int_values(array: pa.Array) -> np.ndarray:
    values = pc.fill_null(array, 0) if array.null_count else array
    return np.asarray(values.to_numpy(zero_copy_only=False)).astype(np.int64)


def _prepare(column: pa.Array | pa.ChunkedArray, data_type: DataType) -> _Column:
    root = data_type.root
    if root in _FIXED_ROOTS:
        array = _arrow_array(column, to_arrow(data_type))
        nulls = _null_mask(array)
        prepared = _Column(nulls)
        if root == "BOOLEAN":
            values = pc.fill_null(array, False) if array.null_count else array
            ints = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.uint64)
        else:
            if root == "DATE":
                array = array.view(pa.int32())
            ints = _int_values(array).view(np.uint64)
        width = _FIXED_ROOTS[root]
        prepared.slot = ints if width == 8 else ints & np.uint64((1 << (8 * width)) - 1)
        return prepared
    if root == "DECIMAL" and (data_type.precision or 0) <= COMPACT_DECIMAL_PRECISION:
        array = _arrow_array(column, to_arrow(data_type))
        prepared = _Column(_null_mask(array))
        # decimal128 values are 16-byte little-endian two's complement; p <= 18 fits the low 8 bytes
        raw = np.frombuffer(array.buffers()[1], dtype="<u8")
        slot = raw[2 * array.offset : 2 * (array.offset + len(array)) : 2].copy()
        slot[prepared.nulls] = 0
        prepared.slot = slot
        return prepared
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _prepare_timestamp(column, data_type)
    if root in _TEXT_ROOTS:
        return _prepare_text(column, data_type)
    raise _NotVectorisable


def _prepare_timestamp(column: pa.Array | pa.ChunkedArray, data_type: DataType) -> _Column:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_timestamp(array.type):
        array = _arrow_array(array, to_arrow(data_type))
    nulls = _null_mask(array)
    # int64 storage is epoch time in the array's unit (UTC for zoned arrays), as `encode_row` computes it
    ticks = _int_values(array.view(pa.int64()))
    per_tick = _UNIT_NANOS[array.type.unit]
    if per_tick >= 1_000_000:
        millis, nanos = ticks * (per_tick // 1_000_000), np.zeros_like(ticks)
    else:
        millis, rest = np.divmod(ticks, 1_000_000 // per_tick)
        nanos = rest * per_tick
    prepared = _Column(nulls)
    if (data_type.precision or 0) <= COMPACT_TIMESTAMP_PRECISION:
        prepared.slot = millis.view(np.uint64)
    else:
        prepared.slot = nanos.astype(np.uint64)  # offset (high word) is filled in by the layout
        prepared.var_millis = millis.view(np.uint64)
    return prepared


def _prepare_text(column: pa.Array | pa.ChunkedArray, data_type: DataType) -> _Column:
    is_string = data_type.is_string()
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    wanted = (pa.string(), pa.large_string()) if is_string else (pa.binary(), pa.large_binary())
    if array.type not in wanted:
        array = _arrow_array(array, wanted[0])
    nulls = _null_mask(array)
    offset_type = np.int32 if array.type in (pa.string(), pa.binary()) else np.int64
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[array.offset : array.offset + len(array) + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    lengths[nulls] = 0
    prepared = _Column(nulls)
    prepared.lengths = lengths
    prepared.starts = offsets[:-1]
    prepared.data = data
    return prepared


def _hash_rows(columns: list[_Column], key_types: Sequence[DataType]) -> np.ndarray:
    """Lay out every row's BinaryRow in one buffer (as `encode_row` does) and hash all rows."""
    arity = len(columns)
    rows = len(columns[0].nulls)
    header = bitset_width(arity)
    fixed = header + 8 * arity
    # variable-part size per row and field, in field order (Java writes them in that order)
    var_sizes = []
    for column in columns:
        if column.lengths is not None:
            long = column.lengths > 7
            var_sizes.append(np.where(long, (column.lengths + 7) & ~7, 0))
        elif column.var_millis is not None:
            var_sizes.append(np.full(rows, 8, dtype=np.int64))
        else:
            var_sizes.append(None)
    row_len = np.full(rows, fixed, dtype=np.int64)
    for size in var_sizes:
        if size is not None:
            row_len += size
    row_start = np.zeros(rows, dtype=np.int64)
    np.cumsum(row_len[:-1], out=row_start[1:])
    total = int(row_start[-1] + row_len[-1]) if rows else 0
    buf = np.zeros(total, dtype=np.uint8)
    words64 = buf.view("<u8")
    base64 = row_start // 8

    header_words = np.zeros((header // 8, rows), dtype=np.uint64)
    var_cursor = np.full(rows, fixed, dtype=np.int64)
    for index, column in enumerate(columns):
        bit = index + 8
        if column.nulls.any():
            header_words[bit // 64] |= column.nulls.astype(np.uint64) << np.uint64(bit % 64)
        slot_word = base64 + header // 8 + index
        if column.lengths is not None:
            _layout_text(buf, words64, column, row_start, slot_word, var_cursor, header + 8 * index)
            var_cursor += var_sizes[index]
        elif column.var_millis is not None:
            words64[slot_word] = column.slot | (var_cursor.astype(np.uint64) << np.uint64(32))
            millis = column.var_millis.copy()
            millis[column.nulls] = 0
            words64[(row_start + var_cursor) // 8] = millis
            var_cursor += 8
        else:
            words64[slot_word] = np.where(column.nulls, np.uint64(0), column.slot)
    for word in range(header // 8):
        words64[base64 + word] = header_words[word]
    return _murmur_rows(buf.view("<u4"), row_start // 4, row_len)


def _layout_text(
    buf: np.ndarray,
    words64: np.ndarray,
    column: _Column,
    row_start: np.ndarray,
    slot_word: np.ndarray,
    var_cursor: np.ndarray,
    slot_offset: int,
) -> None:
    lengths = column.lengths
    assert lengths is not None and column.starts is not None and column.data is not None
    inline = lengths <= 7
    # slot: inline -> marker 0x80|len in byte 7 (data bytes copied below); else offset << 32 | length
    slot = np.where(
        inline,
        (np.uint64(0x80) | lengths.astype(np.uint64)) << np.uint64(56),
        (var_cursor.astype(np.uint64) << np.uint64(32)) | lengths.astype(np.uint64),
    )
    slot[column.nulls] = 0
    words64[slot_word] = slot
    destination = row_start + np.where(inline, slot_offset, var_cursor)
    count = int(lengths.sum())
    if count == 0:
        return
    has_bytes = lengths > 0
    lengths, starts, destination = lengths[has_bytes], column.starts[has_bytes], destination[has_bytes]
    first = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=first[1:])
    within = np.arange(count, dtype=np.int64) - np.repeat(first, lengths)
    buf[np.repeat(destination, lengths) + within] = column.data[np.repeat(starts, lengths) + within]


def _mix(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One MurmurHash3 round over a word of every row (uint32 arithmetic wraps like Java's int)."""
    k = k * np.uint32(_C1)
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    k = k * np.uint32(_C2)
    h = h ^ k
    h = (h << np.uint32(13)) | (h >> np.uint32(19))
    return h * np.uint32(5) + np.uint32(0xE6546B64)


def _murmur_rows(words: np.ndarray, word_start: np.ndarray, row_len: np.ndarray) -> np.ndarray:
    """MurmurHash3 x86_32 of every row at once, one word position per step over all rows that long."""
    rows = len(row_len)
    row_words = row_len // 4
    h = np.full(rows, SEED, dtype=np.uint32)
    if rows and bool((row_words == row_words[0]).all()):
        matrix = words.reshape(rows, int(row_words[0]))
        for j in range(matrix.shape[1]):
            h = _mix(h, matrix[:, j])
    elif rows:
        order = np.argsort(-row_words, kind="stable")  # longest rows first: the active rows are a prefix
        starts = word_start[order]
        sorted_words = row_words[order]
        positions = np.arange(int(sorted_words[0]))
        active = np.searchsorted(-sorted_words, -positions, side="left")  # rows longer than j words
        sorted_h = h.copy()
        for j, count in enumerate(active.tolist()):
            sorted_h[:count] = _mix(sorted_h[:count], words[starts[:count] + j])
        h[order] = sorted_h
    h ^= row_len.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h.view(np.int32)
