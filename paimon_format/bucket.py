"""Bucket assignment for fixed-bucket tables (spec §6).

Paimon hashes the BinaryRow of the bucket-key values with MurmurHash3 (x86, 32 bit, seed 42) and
takes `abs(hash % buckets)` with Java's truncating remainder. A writer that computes another bucket
puts a key in two buckets, and primary-key readers then return both versions, so this must match
Java bit for bit. `bucket_array` is the vectorised form used by the write job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from paimon_format.binary_row import encode_row
from paimon_format.types import DataType

_SEED = 42
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_MASK = 0xFFFFFFFF


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h


def murmur3_x86_32(data: bytes, seed: int = _SEED) -> int:
    """MurmurHash3 over whole little-endian 32-bit words (BinaryRow lengths are multiples of 8)."""
    if len(data) % 4:
        raise ValueError(f"Paimon hashes whole 4-byte words; got {len(data)} bytes")
    h = seed
    for (word,) in np.frombuffer(data, dtype="<u4").reshape(-1, 1).tolist():
        k = (word * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * _C2) & _MASK
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    h = _fmix(h ^ len(data))
    return h - (1 << 32) if h & 0x80000000 else h


def hash_row(row_bytes: bytes) -> int:
    return murmur3_x86_32(row_bytes)


def bucket_from_hash(hash_value: int, num_buckets: int) -> int:
    """Java's `Math.abs(hash % n)`: the remainder truncates toward zero."""
    return abs(hash_value) % num_buckets


def bucket_of(key_values: Sequence[Any], key_types: Sequence[DataType], num_buckets: int) -> int:
    return bucket_from_hash(hash_row(encode_row(key_values, key_types)), num_buckets)


def bucket_key_columns(schema: Any) -> list[str]:
    """Option `bucket-key` (comma list) when set, else the primary key without partition columns."""
    explicit = schema.options.get("bucket-key")
    if explicit:
        return [name.strip() for name in explicit.split(",") if name.strip()]
    partition = set(schema.partition_keys)
    return [key for key in schema.primary_keys if key not in partition]


def bucket_array(columns: Sequence[pa.Array], key_types: Sequence[DataType], num_buckets: int) -> np.ndarray:
    """The bucket of every row of the key columns, as an int32 numpy array."""
    rows = len(columns[0]) if columns else 0
    pylists = [column.to_pylist() for column in columns]
    buckets = np.empty(rows, dtype=np.int32)
    for index in range(rows):
        buckets[index] = bucket_of([values[index] for values in pylists], key_types, num_buckets)
    return buckets
