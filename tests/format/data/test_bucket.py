"""Bucket assignment: Java's hash vectors, pypaimon's sample buckets, vectorised == per-row on random data."""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import paimon_format.data.bucket as bucket_module
from paimon_format.data.bucket import (
    BucketError,
    bucket_array,
    bucket_from_hash,
    bucket_key_columns,
    bucket_of,
    hash_array,
    hash_row,
    murmur3_x86_32,
)
from paimon_format.model.arrow_types import to_arrow
from paimon_format.model.binary_row import deserialize_row, encode_row
from paimon_format.model.type_parsing import parse_type
from tests.support.samples import SAMPLES, needs_samples

T = parse_type
INT, STRING = T("INT"), T("STRING")


# -- MurmurHash3 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [  # the reference implementation's whole-word vectors
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"", 0xFFFFFFFF, 0x81F16F39),
        (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
        (b"\xff\xff\xff\xff", 0, 0x76293B50),
        (b"\x21\x43\x65\x87", 0, 0xF55B516B),
        (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
        (b"aaaa", 0x9747B28C, 0x5A97808A),
    ],
)
def test_murmur3_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_x86_32(data, seed) & 0xFFFFFFFF == expected


def test_murmur3_is_signed_and_refuses_partial_words() -> None:
    assert -(2**31) <= murmur3_x86_32(b"\xff" * 8) < 2**31
    with pytest.raises(BucketError):
        murmur3_x86_32(b"abc")


# -- Java's vectors (§6) --------------------------------------------------------------------------------


def test_fixed_bucket_row_key_extractor_vectors() -> None:
    """FixedBucketRowKeyExtractorTest: row (a=5, b=6, c=7) of INTs, 100 buckets."""
    assert hash_row(encode_row([5], [INT])) == 260196596
    assert bucket_of([5], [INT], 100) == 96
    assert bucket_of([5, 6], [INT, INT], 100) == 27
    assert bucket_of([5, 6, 7], [INT, INT, INT], 100) == 40


def test_pypaimon_java_generated_string_vectors() -> None:
    assert hash_row(encode_row(["hello"], [STRING])) == 243722546
    assert hash_row(encode_row(["hello-java"], [STRING])) == -201703277
    assert bucket_of(["hello-java"], [STRING], 4) == 1


def test_vectorised_path_reproduces_the_java_vectors() -> None:
    a, b, c = pa.array([5], pa.int32()), pa.array([6], pa.int32()), pa.array([7], pa.int32())
    assert hash_array([a], [INT]).tolist() == [260196596]
    assert bucket_array([a], [INT], 100).tolist() == [96]
    assert bucket_array([a, b], [INT, INT], 100).tolist() == [27]
    assert bucket_array([a, b, c], [INT, INT, INT], 100).tolist() == [40]
    words = pa.array(["hello", "hello-java"])
    assert hash_array([words], [STRING]).tolist() == [243722546, -201703277]
    assert bucket_array([words], [STRING], 4).tolist()[1] == 1


def test_bucket_is_javas_truncating_abs_remainder() -> None:
    assert bucket_from_hash(-201703277, 4) == 1
    assert bucket_from_hash(-7, 5) == 2  # Java: Math.abs(-7 % 5) = 2, not Python's -7 % 5 = 3
    assert bucket_from_hash(-(2**31), 7) == 2**31 % 7


@needs_samples
def test_pypaimon_fixed_bucket_files_hold_keys_of_their_bucket() -> None:
    manifest = json.loads((SAMPLES / "manifest.pk_fixed.snap3-delta.json").read_text())
    key_types = [T("BIGINT NOT NULL")]
    seen = set()
    for record in manifest["records"]:
        meta = record["_FILE"]
        for name in ("_MIN_KEY", "_MAX_KEY"):
            key = deserialize_row(bytes.fromhex(meta[name][2:]), key_types)
            assert bucket_of(key, key_types, record["_TOTAL_BUCKETS"]) == record["_BUCKET"]
            seen.add(record["_BUCKET"])
    assert len(seen) > 1


# -- bucket key ---------------------------------------------------------------------------------------


def schema(options: dict[str, str] | None = None, pk: tuple = (), partitions: tuple = ()) -> Any:
    return SimpleNamespace(options=options or {}, primary_keys=pk, partition_keys=partitions)


def test_bucket_key_columns() -> None:
    assert bucket_key_columns(schema({"bucket-key": "b, a"}, pk=("a", "b", "c"))) == ["b", "a"]
    assert bucket_key_columns(schema(pk=("dt", "id", "seq"), partitions=("dt",))) == ["id", "seq"]
    assert bucket_key_columns(schema({"bucket-key": " "}, pk=("id",))) == ["id"]
    assert bucket_key_columns(schema({"bucket": "4"})) == []


def test_bad_bucket_counts_and_columns() -> None:
    column = pa.array([1], pa.int32())
    for bad in (0, -1, 1.5):
        with pytest.raises(BucketError):
            bucket_array([column], [INT], bad)  # type: ignore[arg-type]
        with pytest.raises(BucketError):
            bucket_of([1], [INT], bad)  # type: ignore[arg-type]
    with pytest.raises(BucketError):
        bucket_array([column, pa.array([1, 2], pa.int32())], [INT, INT], 4)
    with pytest.raises(BucketError):
        bucket_array([column], [INT, INT], 4)
    with pytest.raises(BucketError):
        bucket_array([], [], 4)


# -- vectorised == per-row ------------------------------------------------------------------------------

RNG = random.Random(20240101)


def _text(max_len: int = 40) -> str:
    length = RNG.choice([0, 1, 6, 7, 8, 9, 15, 16, 17, RNG.randint(0, max_len)])
    return "".join(RNG.choice("az09 é€😀") for _ in range(length))


GENERATORS = {
    "BOOLEAN": lambda: RNG.random() < 0.5,
    "TINYINT": lambda: RNG.randint(-128, 127),
    "SMALLINT": lambda: RNG.randint(-(2**15), 2**15 - 1),
    "INT": lambda: RNG.randint(-(2**31), 2**31 - 1),
    "BIGINT": lambda: RNG.randint(-(2**63), 2**63 - 1),
    "DATE": lambda: dt.date(1970, 1, 1) + dt.timedelta(days=RNG.randint(-40000, 40000)),
    "STRING": _text,
    "VARCHAR(20)": lambda: _text(20),
    "CHAR(3)": lambda: _text(3)[:3],
    "BYTES": lambda: _text().encode()[: RNG.randint(0, 30)],
    "BINARY(9)": lambda: bytes(RNG.randrange(256) for _ in range(9)),
    "DECIMAL(18, 4)": lambda: Decimal(RNG.randint(-(10**18) + 1, 10**18 - 1)).scaleb(-4),
    "DECIMAL(5, 0)": lambda: Decimal(RNG.randint(-99999, 99999)),
    "TIMESTAMP(3)": lambda: dt.datetime(1900, 1, 1) + dt.timedelta(milliseconds=RNG.randint(0, 10**13)),
    "TIMESTAMP(6)": lambda: dt.datetime(1900, 1, 1) + dt.timedelta(microseconds=RNG.randint(0, 10**16)),
    "TIMESTAMP(0)": lambda: dt.datetime(1900, 1, 1) + dt.timedelta(seconds=RNG.randint(0, 10**10)),
    "TIMESTAMP(6) WITH LOCAL TIME ZONE": lambda: (
        dt.datetime(1950, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=RNG.randint(0, 10**16))
    ),
    "TIMESTAMP(3) WITH LOCAL TIME ZONE": lambda: (
        dt.datetime(1950, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=RNG.randint(0, 10**12))
    ),
    # per-row fallback types, mixed in to check the fallback is seamless
    "DOUBLE": lambda: RNG.uniform(-1e6, 1e6),
    "DECIMAL(38, 10)": lambda: Decimal(RNG.randint(-(10**37), 10**37)).scaleb(-10),
    "TIME(3)": lambda: dt.time(
        RNG.randint(0, 23), RNG.randint(0, 59), RNG.randint(0, 59), 1000 * RNG.randint(0, 999)
    ),
}
VECTORISED = [name for name in GENERATORS if name not in ("DOUBLE", "DECIMAL(38, 10)", "TIME(3)")]


def _per_row(columns: list[pa.Array | pa.ChunkedArray], types: list, buckets: int) -> list[int]:
    rows = zip(*(column.to_pylist() for column in columns), strict=True)
    return [bucket_of(list(row), types, buckets) for row in rows]


def _random_columns(names: list[str], rows: int) -> tuple[list, list]:
    types = [T(name) for name in names]
    columns = []
    for name, data_type in zip(names, types, strict=True):
        null_rate = RNG.choice([0.0, 0.0, 0.2, 1.0])
        values = [None if RNG.random() < null_rate else GENERATORS[name]() for _ in range(rows)]
        columns.append(pa.array(values, to_arrow(data_type)))
    return columns, types


@pytest.mark.parametrize("name", list(GENERATORS))
def test_each_type_vectorised_equals_per_row(name: str) -> None:
    columns, types = _random_columns([name], 300)
    assert bucket_array(columns, types, 13).tolist() == _per_row(columns, types, 13)
    columns, types = _random_columns([name, "INT", name], 200)
    assert bucket_array(columns, types, 7).tolist() == _per_row(columns, types, 7)


def test_random_key_combinations_vectorised_equals_per_row() -> None:
    for _ in range(150):
        names = [RNG.choice(list(GENERATORS)) for _ in range(RNG.randint(1, 5))]
        rows = RNG.randint(1, 80)
        columns, types = _random_columns(names, rows)
        layout = RNG.choice(["plain", "chunked", "sliced"])
        if layout == "chunked":
            columns = [pa.chunked_array([c.slice(0, rows // 3), c.slice(rows // 3)], c.type) for c in columns]
        elif layout == "sliced":
            columns = [c.slice(1) for c in columns]
        buckets = RNG.choice([1, 2, 3, 16, 100, 1024])
        expected = _per_row(columns, types, buckets)
        result = bucket_array(columns, types, buckets)
        assert result.dtype == np.int32
        assert result.tolist() == expected, (names, layout)


def test_vectorised_types_never_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("fell back to the per-row path")

    monkeypatch.setattr(bucket_module, "_hash_per_row", refuse)
    columns, types = _random_columns(VECTORISED, 50)
    assert len(bucket_array(columns, types, 8)) == 50
    int32_for_bigint = pa.array([1, None, -3], pa.int32())  # safe cast to the key's Arrow type
    assert len(bucket_array([int32_for_bigint], [T("BIGINT")], 8)) == 3


def test_other_arrow_layouts_give_the_same_buckets() -> None:
    words = ["a", "bbbbbbbbbbbb", None, "a", "ccccccc"]
    expected = _per_row([pa.array(words)], [STRING], 5)
    for column in (
        pa.array(words, pa.large_string()),
        pa.array(words).dictionary_encode(),
        pa.chunked_array([pa.array(words[:2]), pa.array(words[2:])]),
    ):
        assert bucket_array([column], [STRING], 5).tolist() == expected
    ints = [1, None, 2**40]
    assert bucket_array([pa.array(ints, pa.int64())], [T("BIGINT")], 9).tolist() == _per_row(
        [pa.array(ints, pa.int64())], [T("BIGINT")], 9
    )
    nanos = pa.array([0, 1_234_567_891, -1, None], pa.timestamp("ns"))
    t9 = [T("TIMESTAMP(9)")]
    assert hash_array([nanos], t9).tolist() == [hash_row(encode_row(v, t9)) for v in _nano_rows()]


def _nano_rows() -> list[list[Any]]:
    from paimon_format.model.binary_row import PreciseDatetime

    epoch = dt.datetime(1970, 1, 1)
    return [
        [epoch],
        [PreciseDatetime.of(epoch + dt.timedelta(seconds=1, microseconds=234567), 891)],
        [PreciseDatetime.of(epoch - dt.timedelta(microseconds=1), 999)],
        [None],
    ]


def test_values_that_do_not_fit_the_key_type_raise_like_the_scalar_path() -> None:
    too_big = pa.array([1, 2**40], pa.int64())
    with pytest.raises(ValueError):
        bucket_array([too_big], [INT], 4)


def test_empty_and_large_batches() -> None:
    assert bucket_array([pa.array([], pa.int64())], [T("BIGINT")], 4).tolist() == []
    rows = (1 << 17) + 5  # spans two vectorised chunks
    ids = pa.array(np.arange(rows, dtype=np.int64) * 7919 - 10**9)
    names = pa.array([f"user-{i}" * (i % 4) for i in range(rows)])
    result = bucket_array([ids, names], [T("BIGINT"), STRING], 64)
    sample = np.random.default_rng(1).choice(rows, 300, replace=False)
    ids_list, names_list = ids.to_pylist(), names.to_pylist()
    for index in sample.tolist() + [0, rows - 1]:
        assert result[index] == bucket_of([ids_list[index], names_list[index]], [T("BIGINT"), STRING], 64)
    assert 0 <= result.min() and result.max() < 64
