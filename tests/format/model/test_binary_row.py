"""BinaryRow bytes: the spec's worked examples, pypaimon's sample bytes, every type, nulls, bad input."""

from __future__ import annotations

import datetime as dt
import json
import pickle
import random
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from paimon_format.errors import PaimonFormatError, UnsupportedOperationError
from paimon_format.model.binary_row import (
    EMPTY_ROW,
    BinaryRowError,
    PreciseDatetime,
    UnsupportedTypeError,
    bitset_width,
    deserialize_row,
    encode_row,
    row_arity,
    serialize_row,
)
from paimon_format.model.type_parsing import parse_type
from tests.support.samples import SAMPLES, needs_samples

T = parse_type
INT, STRING, BIGINT = T("INT"), T("STRING"), T("BIGINT")


def row_hex(values: list[Any], types: list[Any]) -> str:
    return serialize_row(values, [T(t) if isinstance(t, str) else t for t in types]).hex()


# -- the spec's worked examples (§5) --------------------------------------------------------------------


def test_empty_row() -> None:
    assert EMPTY_ROW == bytes.fromhex("00000000" + "00" * 8)
    assert len(EMPTY_ROW) == 12
    assert deserialize_row(EMPTY_ROW, []) == []
    assert row_arity(EMPTY_ROW) == 0


def test_int_and_inline_string() -> None:
    assert (
        row_hex([5, "ab"], [INT, STRING])
        == "00000002" + "0000000000000000" + "0500000000000000" + "6162000000000082"
    )


def test_null_int_sets_bit_8_and_zeroes_the_slot() -> None:
    assert row_hex([None, "ab"], [INT, STRING]) == (
        "00000002" + "0001000000000000" + "0000000000000000" + "6162000000000082"
    )


def test_long_string_goes_to_the_variable_part() -> None:
    data = serialize_row([1, "hello world!"], [INT, STRING])
    assert data.hex() == (
        "00000002"
        + "0000000000000000"
        + "0100000000000000"
        + "0c00000018000000"  # length 12, offset 24
        + "68656c6c6f20776f726c6421"
        + "00000000"
    )
    assert len(data) - 4 == 40


def test_brief_partition_example() -> None:
    raw = bytes.fromhex("0000000100000000000000000a00000010000000323032342d30312d3031000000000000")
    assert deserialize_row(raw, [STRING]) == ["2024-01-01"]
    assert serialize_row(["2024-01-01"], [STRING]) == raw


# -- pypaimon's bytes ---------------------------------------------------------------------------------


def _encoded_with_decoded(node: Any) -> list[tuple[str, Any]]:
    """Every ("0x..", decoded) pair in a sample: keys `X` next to `X__decoded`."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            decoded_key = key + "__decoded"
            if decoded_key in node and isinstance(value, str) and value.startswith("0x"):
                found.append((value, node[decoded_key]))
            found.extend(_encoded_with_decoded(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_encoded_with_decoded(item))
    return found


@needs_samples
@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*manifest*.json")), ids=lambda p: p.name)
def test_sample_rows_decode_and_reencode_byte_identical(path: Path) -> None:
    pairs = _encoded_with_decoded(json.loads(path.read_text()))
    for encoded, decoded in pairs:
        raw = bytes.fromhex(encoded[2:])
        values = list(decoded.values()) if isinstance(decoded, dict) else decoded
        # the sample tables only have STRING partitions and BIGINT keys
        types = [STRING if isinstance(v, str) else BIGINT for v in values]
        assert deserialize_row(raw, types) == values
        assert serialize_row(values, types) == raw


@needs_samples
def test_sample_partition_stats_are_strings() -> None:
    listing = json.loads((SAMPLES / "manifest-list.append_parted.snap5-base.json").read_text())
    dates = set()
    for record in listing["records"]:
        stats = record["_PARTITION_STATS"]
        low = deserialize_row(bytes.fromhex(stats["_MIN_VALUES"][2:]), [STRING])
        high = deserialize_row(bytes.fromhex(stats["_MAX_VALUES"][2:]), [STRING])
        dates.update(low + high)
    assert dates >= {"2024-01-01", "2024-01-02", "2024-01-03"}


# -- every type ---------------------------------------------------------------------------------------

VALUES = [
    ("BOOLEAN", True),
    ("BOOLEAN", False),
    ("TINYINT", -128),
    ("SMALLINT", 32767),
    ("INT", -(2**31)),
    ("BIGINT", 2**63 - 1),
    ("FLOAT", 1.5),
    ("DOUBLE", -2.25e300),
    ("DATE", dt.date(2024, 2, 29)),
    ("DATE", dt.date(1900, 1, 1)),
    ("TIME(0)", dt.time(23, 59, 58)),
    ("TIME(3)", dt.time(0, 0, 0, 1000)),
    ("DECIMAL(10, 2)", Decimal("-12345.67")),
    ("DECIMAL(18, 0)", Decimal("999999999999999999")),
    ("DECIMAL(38, 18)", Decimal("-12345678901234567890.123456789012345678")),
    ("DECIMAL(38, 0)", Decimal("99999999999999999999999999999999999999")),
    ("DECIMAL(20, 2)", Decimal("0.00")),
    ("TIMESTAMP(0)", dt.datetime(2024, 1, 1, 10, 0, 0)),
    ("TIMESTAMP(3)", dt.datetime(2024, 1, 1, 10, 0, 0, 123000)),
    ("TIMESTAMP(3)", dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
    ("TIMESTAMP(6)", dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
    ("TIMESTAMP(9)", dt.datetime(2262, 4, 11, 23, 47, 16, 854775)),
    ("TIMESTAMP(9)", PreciseDatetime.of(dt.datetime(1960, 6, 1, 1, 2, 3, 4), 567)),
    ("TIMESTAMP(6) WITH LOCAL TIME ZONE", dt.datetime(2024, 5, 1, 1, 2, 3, 4)),
    ("TIMESTAMP(3) WITH LOCAL TIME ZONE", dt.datetime(2024, 5, 1, 1, 2, 3, 4000)),
    ("STRING", ""),
    ("STRING", "seven77"),
    ("STRING", "eight888"),
    ("STRING", "a string longer than seven bytes ✓ with emoji 😀"),
    ("VARCHAR(3)", "é"),
    ("CHAR(2)", "ab"),
    ("BYTES", b""),
    ("BYTES", b"\x00\x01\xff" * 5),
    ("BINARY(2)", b"\xff\x00"),
    ("VARBINARY(9)", b"123456789"),
]


@pytest.mark.parametrize(("type_text", "value"), VALUES, ids=[f"{t}={v!r}"[:60] for t, v in VALUES])
def test_each_type_round_trips_alone_and_as_null(type_text: str, value: Any) -> None:
    types = [T(type_text)]
    data = serialize_row([value], types)
    assert len(data) % 8 == 4  # 4-byte arity + a multiple of 8
    decoded = deserialize_row(data, types)
    assert decoded == [value]
    assert serialize_row(decoded, types) == data
    assert deserialize_row(serialize_row([None], types), types) == [None]


def test_all_types_in_one_row_with_and_without_nulls() -> None:
    types = [T(t) for t, _ in VALUES]
    values = [v for _, v in VALUES]
    data = serialize_row(values, types)
    assert deserialize_row(data, types) == values
    assert serialize_row(deserialize_row(data, types), types) == data
    mixed = [v if i % 2 else None for i, v in enumerate(values)]
    assert deserialize_row(serialize_row(mixed, types), types) == mixed
    assert deserialize_row(serialize_row([None] * len(types), types), types) == [None] * len(types)


@pytest.mark.parametrize(
    ("type_text", "value", "slot_hex"),
    [
        ("BOOLEAN", True, "0100000000000000"),
        ("TINYINT", -1, "ff00000000000000"),
        ("SMALLINT", -2, "feff000000000000"),
        ("INT", -1, "ffffffff00000000"),
        ("BIGINT", -1, "ffffffffffffffff"),
        ("FLOAT", 1.0, struct.pack("<f", 1.0).hex() + "00000000"),
        ("DOUBLE", 1.0, struct.pack("<d", 1.0).hex()),
        ("DATE", dt.date(2024, 1, 1), (19723).to_bytes(4, "little").hex() + "00000000"),
        ("TIME(3)", dt.time(1, 0, 0, 5000), (3_600_005).to_bytes(4, "little").hex() + "00000000"),
        ("DECIMAL(10, 2)", Decimal("-1.5"), (-150).to_bytes(8, "little", signed=True).hex()),
        (
            "TIMESTAMP(3)",
            dt.datetime(2024, 1, 1, 0, 0, 0, 7999),
            (1_704_067_200_007).to_bytes(8, "little").hex(),
        ),
        ("STRING", "1234567", "3132333435363787"),
    ],
)
def test_fixed_slot_bytes(type_text: str, value: Any, slot_hex: str) -> None:
    data = serialize_row([value], [T(type_text)])
    assert data[4:12] == bytes(8)  # RowKind 0, no nulls
    assert data[12:20].hex() == slot_hex
    assert len(data) == 20


def test_large_decimal_is_big_endian_twos_complement_in_16_reserved_bytes() -> None:
    types = [T("DECIMAL(38, 18)")]
    data = serialize_row([Decimal("-1E-18")], types)  # unscaled -1 -> BigInteger.toByteArray() == [0xff]
    assert data[12:20].hex() == "0100000010000000"  # length 1, offset 16
    assert data[20:].hex() == "ff" + "00" * 15
    value = Decimal("-12345678901234567890.123456789012345678")
    unscaled = -12345678901234567890123456789012345678
    width = 16  # 124 bits + sign
    data = serialize_row([value], types)
    assert data[12:16] == width.to_bytes(4, "little")
    assert data[20:36] == unscaled.to_bytes(width, "big", signed=True)
    assert serialize_row([Decimal(128).scaleb(-18)], types)[20:23].hex() == "008000"  # sign byte kept


def test_null_large_decimal_and_timestamp_reserve_their_bytes() -> None:
    data = serialize_row([None, None, 7], [T("DECIMAL(38, 18)"), T("TIMESTAMP(6)"), INT])
    header, slots, var = data[4:12], data[12:36], data[36:]
    assert header.hex() == "0003000000000000"
    assert slots.hex() == "0000000020000000" + "0000000030000000" + "0700000000000000"
    assert var == bytes(24)
    assert len(data) - 4 == 56


def test_timestamp9_stores_millis_in_var_part_and_nanos_of_milli_in_slot() -> None:
    value = PreciseDatetime.of(dt.datetime(1969, 12, 31, 23, 59, 59, 999999), 999)
    data = serialize_row([value], [T("TIMESTAMP(9)")])
    nanos, offset = struct.unpack_from("<II", data, 12)
    assert (nanos, offset) == (999_999, 16)
    assert struct.unpack_from("<q", data, 4 + offset)[0] == -1
    decoded = deserialize_row(data, [T("TIMESTAMP(9)")])[0]
    assert isinstance(decoded, PreciseDatetime) and decoded.nanosecond == 999
    assert pickle.loads(pickle.dumps(decoded)).nanosecond == 999


def test_pandas_timestamps_keep_their_nanoseconds() -> None:
    pd = pytest.importorskip("pandas")
    value = pd.Timestamp("2024-01-01 00:00:00.123456789")
    data = serialize_row([value], [T("TIMESTAMP(9)")])
    assert struct.unpack_from("<I", data, 12)[0] == 456_789
    decoded = deserialize_row(data, [T("TIMESTAMP(9)")])[0]
    assert decoded == value.to_pydatetime(warn=False) and decoded.nanosecond == 789


def test_timestamps_with_a_zone_are_stored_as_utc() -> None:
    paris = dt.timezone(dt.timedelta(hours=1))
    aware = dt.datetime(2024, 1, 1, 1, 0, tzinfo=paris)
    for text in ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP(6) WITH LOCAL TIME ZONE"):
        assert serialize_row([aware], [T(text)]) == serialize_row([dt.datetime(2024, 1, 1)], [T(text)])
        assert deserialize_row(serialize_row([aware], [T(text)]), [T(text)]) == [dt.datetime(2024, 1, 1)]


def test_compact_timestamp_drops_sub_millis_like_java() -> None:
    data = serialize_row([dt.datetime(2024, 1, 1, 0, 0, 0, 999)], [T("TIMESTAMP(3)")])
    assert deserialize_row(data, [T("TIMESTAMP(3)")]) == [dt.datetime(2024, 1, 1)]


def test_inline_boundary_and_utf8_lengths() -> None:
    seven = serialize_row(["1234567"], [STRING])
    eight = serialize_row(["12345678"], [STRING])
    assert len(seven) - 4 == 16 and seven[19] == 0x87
    assert len(eight) - 4 == 24 and eight[12:20].hex() == "0800000010000000"
    accented = serialize_row(["ééé"], [STRING])  # 6 UTF-8 bytes: inline
    assert accented[19] == 0x86
    assert serialize_row(["éééé"], [STRING])[12:16] == (8).to_bytes(4, "little")


def test_wide_rows_use_a_wider_null_bitset() -> None:
    assert [bitset_width(n) for n in (0, 1, 56, 57, 120, 121)] == [8, 8, 8, 16, 16, 24]
    types = [INT] * 57
    values: list[Any] = list(range(56)) + [None]
    data = serialize_row(values, types)
    assert len(data) - 4 == 16 + 8 * 57
    assert data[4 + 8] == 0x01  # bit 64 = field 56
    assert deserialize_row(data, types) == values


def test_var_parts_follow_field_order() -> None:
    types = [STRING, T("DECIMAL(20, 0)"), STRING, T("TIMESTAMP(6)")]
    values = ["first long string", Decimal(1), "x", dt.datetime(2000, 1, 1)]
    data = serialize_row(values, types)
    offsets = [struct.unpack_from("<II", data, 4 + 8 + 8 * i)[1] for i in (0, 1, 3)]
    assert offsets == [40, 64, 80]  # 17 bytes padded to 24, then 16 reserved, then 8
    assert len(data) - 4 == 88
    assert deserialize_row(data, types) == values


def test_nested_types_only_as_null() -> None:
    types = [T("ARRAY<INT>"), T("MAP<STRING, INT>"), T("ROW<a INT>"), T("VARIANT")]
    data = serialize_row([None] * 4, types)
    assert deserialize_row(data, types) == [None] * 4
    with pytest.raises(UnsupportedTypeError) as info:
        serialize_row([[1, 2]], [T("ARRAY<INT>")])
    assert isinstance(info.value, UnsupportedOperationError) and isinstance(info.value, PaimonFormatError)
    assert "ARRAY" in str(info.value)
    with pytest.raises(UnsupportedTypeError):
        deserialize_row(serialize_row([1], [INT]), [T("ROW<a INT>")])


# -- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_text", "value"),
    [
        ("INT", 2**31),
        ("INT", "5"),
        ("INT", 5.0),
        ("TINYINT", 128),
        ("SMALLINT", -(2**15) - 1),
        ("BIGINT", 2**63),
        ("BOOLEAN", "false"),
        ("BOOLEAN", 2),
        ("FLOAT", 1e39),
        ("FLOAT", "1.0"),
        ("DOUBLE", Decimal("1.5")),
        ("DATE", "2024-01-01"),
        ("DATE", dt.datetime(2024, 1, 1)),
        ("TIME(0)", 86_400_000),
        ("TIME(0)", "10:00"),
        ("DECIMAL(10, 2)", Decimal("1.234")),
        ("DECIMAL(5, 2)", Decimal("1000.00")),
        ("DECIMAL(38, 0)", Decimal(10) ** 38),
        ("DECIMAL(10, 2)", Decimal("NaN")),
        ("DECIMAL(10, 2)", Decimal("Infinity")),
        ("DECIMAL(10, 2)", "abc"),
        ("DECIMAL(10, 2)", True),
        ("TIMESTAMP(3)", "2024-01-01 00:00:00"),
        ("TIMESTAMP(6)", dt.date(2024, 1, 1)),
        ("STRING", b"bytes"),
        ("STRING", 5),
        ("STRING", "\ud800"),
        ("BYTES", "text"),
    ],
)
def test_values_that_do_not_fit_are_refused_with_the_field_named(type_text: str, value: Any) -> None:
    with pytest.raises(BinaryRowError) as info:
        serialize_row([1, value], [INT, T(type_text)], names=["id", "col"])
    assert isinstance(info.value, PaimonFormatError) and isinstance(info.value, ValueError)
    assert "'col'" in str(info.value)
    with pytest.raises(BinaryRowError, match="field 1"):
        encode_row([1, value], [INT, T(type_text)])


def test_arity_mismatches() -> None:
    with pytest.raises(BinaryRowError):
        serialize_row([1, 2], [INT])
    with pytest.raises(BinaryRowError, match="arity 2"):
        deserialize_row(serialize_row([1, 2], [INT, INT]), [INT])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x00",
        bytes.fromhex("00000001") + bytes(8),  # slot missing
        bytes.fromhex("00000001") + bytes(8) + bytes.fromhex("2000000010000000"),  # 32 bytes at offset 16
    ],
)
def test_truncated_or_corrupt_rows_raise(data: bytes) -> None:
    with pytest.raises(BinaryRowError):
        deserialize_row(data, [STRING])


def test_corrupt_values_raise() -> None:
    with pytest.raises(BinaryRowError):  # millis of day out of range
        deserialize_row(bytes.fromhex("00000001") + bytes(8) + bytes.fromhex("ffffffff00000000"), [T("TIME")])
    with pytest.raises(BinaryRowError):  # invalid UTF-8
        deserialize_row(bytes.fromhex("00000001") + bytes(8) + bytes.fromhex("ff00000000000081"), [STRING])
    with pytest.raises(BinaryRowError):  # a 17-byte decimal
        big = bytes.fromhex("00000001") + bytes(8) + bytes.fromhex("1100000010000000") + bytes(24)
        deserialize_row(big, [T("DECIMAL(38, 0)")])


# -- pypaimon as an independent oracle ----------------------------------------------------------------


def test_random_rows_match_pypaimons_serializer() -> None:
    """Our bytes equal pypaimon's `GenericRowSerializer` for random non-null rows of every atomic type.

    Non-null only: for a null DECIMAL(p>18)/TIMESTAMP(p>3) pypaimon does not reserve the var-part bytes
    that Java's `RowHelper.writeNulls` does (we follow Java, see test above). Decimal magnitudes that are
    exact powers of two are negligible here (pypaimon sizes -2^k one byte wider than `toByteArray`).
    """
    generic_row = pytest.importorskip("pypaimon.table.row.generic_row")
    data_types = pytest.importorskip("pypaimon.schema.data_types")
    row_kind = pytest.importorskip("pypaimon.table.row.internal_row").RowKind
    rnd = random.Random(20240101)
    epoch = dt.datetime(1970, 1, 1)

    def text() -> str:
        return "".join(rnd.choice("abé漢0") for _ in range(rnd.choice([0, 1, 6, 7, 8, 9, 16, 30])))

    generators: dict[str, Any] = {
        "BOOLEAN": lambda: rnd.random() < 0.5,
        "TINYINT": lambda: rnd.randint(-128, 127),
        "SMALLINT": lambda: rnd.randint(-(2**15), 2**15 - 1),
        "INT": lambda: rnd.randint(-(2**31), 2**31 - 1),
        "BIGINT": lambda: rnd.randint(-(2**63), 2**63 - 1),
        "FLOAT": lambda: rnd.randint(-4000, 4000) / 8,
        "DOUBLE": lambda: rnd.uniform(-1e12, 1e12),
        "STRING": text,
        "VARCHAR(10)": text,
        "BYTES": lambda: text().encode(),
        "DATE": lambda: dt.date(1970, 1, 1) + dt.timedelta(days=rnd.randint(-50_000, 50_000)),
        "TIME(0)": lambda: dt.time(rnd.randint(0, 23), rnd.randint(0, 59), rnd.randint(0, 59)),
        "DECIMAL(10, 2)": lambda: Decimal(rnd.randint(-(10**10) + 1, 10**10 - 1)).scaleb(-2),
        "DECIMAL(38, 18)": lambda: Decimal(rnd.randint(-(10**38) + 1, 10**38 - 1)).scaleb(-18),
        "TIMESTAMP(3)": lambda: epoch + dt.timedelta(milliseconds=rnd.randint(-(2**40), 2**40)),
        "TIMESTAMP(6)": lambda: epoch + dt.timedelta(microseconds=rnd.randint(-(2**50), 2**50)),
        "TIMESTAMP(9)": lambda: epoch + dt.timedelta(microseconds=rnd.randint(-(2**50), 2**50)),
    }
    names = list(generators)
    for _ in range(500):
        columns = [rnd.choice(names) for _ in range(rnd.randint(1, 6))]
        values = [generators[c]() for c in columns]
        fields = [data_types.DataField(i, f"f{i}", data_types.AtomicType(c)) for i, c in enumerate(columns)]
        theirs = generic_row.GenericRowSerializer.to_bytes(
            generic_row.GenericRow(values, fields, row_kind.INSERT)
        )
        types = [T(c) for c in columns]
        assert serialize_row(values, types) == theirs, (columns, values)
        assert deserialize_row(theirs, types) == values
