"""Types, BinaryRow and bucket hashing against the spec's worked examples and pypaimon's sample bytes."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from paimon_format.data.bucket import bucket_array, bucket_of, hash_row
from paimon_format.model.arrow_types import from_arrow, to_arrow
from paimon_format.model.binary_row import (
    EMPTY_ROW,
    BinaryRowError,
    deserialize_row,
    encode_row,
    serialize_row,
)
from paimon_format.model.type_parsing import parse_type
from paimon_format.model.types import TypeParseError, assign_field_ids
from tests.support.samples import SAMPLES

T = parse_type


def test_spec_worked_examples_are_byte_exact():
    assert EMPTY_ROW.hex() == "00000000" + "00" * 8
    assert serialize_row([5, "ab"], [T("INT"), T("STRING")]).hex() == (
        "00000002" + "0000000000000000" + "0500000000000000" + "6162000000000082"
    )
    assert serialize_row([None, "ab"], [T("INT"), T("STRING")]).hex()[8:24] == "0001000000000000"
    long_row = serialize_row([1, "hello world!"], [T("INT"), T("STRING")])
    assert long_row[4 + 16 : 4 + 24].hex() == "0c00000018000000"
    assert long_row[4 + 24 :] == b"hello world!\0\0\0\0"


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared/spec/samples not present")
def test_sample_partitions_and_keys_round_trip_byte_for_byte():
    listing = json.loads((SAMPLES / "manifest-list.append_parted.snap5-base.json").read_text())
    for record in listing["records"]:
        raw = bytes.fromhex(record["_PARTITION_STATS"]["_MIN_VALUES"][2:])
        values = deserialize_row(raw, [T("STRING")])
        assert values == record["_PARTITION_STATS"]["_MIN_VALUES__decoded"]
        assert serialize_row(values, [T("STRING")]) == raw
    manifest = json.loads((SAMPLES / "manifest.pk_fixed.snap3-delta.json").read_text())
    for record in manifest["records"]:
        raw = bytes.fromhex(record["_FILE"]["_MIN_KEY"][2:])
        assert serialize_row(deserialize_row(raw, [T("BIGINT")]), [T("BIGINT")]) == raw


ALL_TYPES = [
    (T("BOOLEAN"), True),
    (T("TINYINT"), -5),
    (T("SMALLINT"), 300),
    (T("INT"), -70000),
    (T("BIGINT"), 2**40),
    (T("FLOAT"), 1.5),
    (T("DOUBLE"), -2.25),
    (T("DATE"), dt.date(2024, 2, 29)),
    (T("TIME(0)"), dt.time(23, 59, 58)),
    (T("DECIMAL(10, 2)"), Decimal("-12345.67")),
    (T("DECIMAL(38, 18)"), Decimal("-123456789.000000000000000001")),
    (T("TIMESTAMP(3)"), dt.datetime(2024, 1, 1, 10, 0, 0, 123000)),
    (T("TIMESTAMP(9)"), dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
    (T("TIMESTAMP(6) WITH LOCAL TIME ZONE"), dt.datetime(2024, 5, 1, 1, 2, 3, 4)),
    (T("STRING"), "short"),
    (T("STRING"), "a string longer than seven bytes ✓"),
    (T("BYTES"), b"\x00\x01\xff" * 5),
]


def test_every_key_type_round_trips_with_and_without_nulls():
    types = [t for t, _ in ALL_TYPES]
    values = [v for _, v in ALL_TYPES]
    assert deserialize_row(serialize_row(values, types), types) == values
    nulls = [None] * len(types)
    assert deserialize_row(serialize_row(nulls, types), types) == nulls


def test_null_large_decimal_still_reserves_its_bytes():
    row = serialize_row([None], [T("DECIMAL(38, 18)")])
    assert len(row) == 4 + 8 + 8 + 16
    assert row[4 + 8 : 4 + 16].hex() == "0000000010000000"


def test_values_that_do_not_fit_are_refused():
    with pytest.raises(BinaryRowError):
        serialize_row([Decimal("1.234")], [T("DECIMAL(10, 2)")])
    with pytest.raises(BinaryRowError):
        serialize_row([2**40], [T("INT")])
    with pytest.raises(BinaryRowError):
        deserialize_row(b"\x00\x00", [T("INT")])


def test_hash_vectors_of_java():
    ints = [T("INT")] * 3
    assert hash_row(encode_row([5], ints[:1])) == 260196596
    assert bucket_of([5], ints[:1], 100) == 96
    assert bucket_of([5, 6], ints[:2], 100) == 27
    assert bucket_of([5, 6, 7], ints, 100) == 40
    assert hash_row(encode_row(["hello"], [T("STRING")])) == 243722546
    assert hash_row(encode_row(["hello-java"], [T("STRING")])) == -201703277
    assert bucket_of(["hello-java"], [T("STRING")], 4) == 1


def test_bucket_array_matches_the_scalar_function():
    ids = pa.array(list(range(-50, 50)), pa.int64())
    names = pa.array([f"name-{i}" * (i % 3) for i in range(100)])
    buckets = bucket_array([ids, names], [T("BIGINT"), T("STRING")], 7)
    expected = [
        bucket_of([i, n], [T("BIGINT"), T("STRING")], 7)
        for i, n in zip(ids.to_pylist(), names.to_pylist(), strict=True)
    ]
    assert buckets.tolist() == expected


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared/spec/samples not present")
def test_sample_schema_types_print_back_canonically():
    for path in SAMPLES.glob("schema.*.json"):
        for field in json.loads(path.read_text())["fields"]:
            parsed = T(field["type"])
            again = T(parsed.to_json())
            assert again == parsed, path.name
            assert to_arrow(parsed) is not None


def test_aliases_parse_to_canonical_forms():
    assert T("INTEGER NOT NULL").to_json() == "INT NOT NULL"
    assert T("TIMESTAMP_LTZ(6)").to_json() == "TIMESTAMP(6) WITH LOCAL TIME ZONE"
    assert T("VARCHAR(2147483647)").to_json() == "STRING"
    assert T("DEC(5,1)").to_json() == "DECIMAL(5, 1)"
    assert T({"type": "ARRAY NOT NULL", "element": "INT"}).to_json() == {
        "type": "ARRAY NOT NULL",
        "element": "INT",
    }
    with pytest.raises(TypeParseError):
        T("NOT A TYPE(")


def test_arrow_mapping_and_nested_field_ids():
    assert from_arrow(pa.timestamp("us", tz="UTC")).to_json() == "TIMESTAMP(6) WITH LOCAL TIME ZONE"
    assert from_arrow(pa.decimal128(12, 3), nullable=False).to_json() == "DECIMAL(12, 3) NOT NULL"
    fields, highest = assign_field_ids(
        [
            ("a", T("INT")),
            (
                "b",
                T(
                    {
                        "type": "ROW",
                        "fields": [
                            {"id": 0, "name": "x", "type": "INT"},
                            {"id": 0, "name": "y", "type": "STRING"},
                        ],
                    }
                ),
            ),
            ("c", T("INT")),
        ]
    )
    assert [f.id for f in fields] == [0, 1, 4] and [f.id for f in fields[1].type.fields] == [2, 3]
    assert highest == 4
