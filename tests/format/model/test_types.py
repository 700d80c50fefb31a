"""Type strings <-> DataType <-> pyarrow: Java's canonical forms, every alias, the sample schemas."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_format.errors import PaimonFormatError
from paimon_format.model.arrow_types import from_arrow, to_arrow
from paimon_format.model.type_parsing import parse_field, parse_type
from paimon_format.model.types import (
    BIGINT,
    DECIMAL,
    INT,
    STRING,
    TIMESTAMP,
    DataField,
    DataType,
    TypeParseError,
    assign_field_ids,
    max_field_id,
)
from tests.support.samples import SAMPLES, needs_samples

T = parse_type


# -- parsing: aliases and defaults -> Java's canonical strings ------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("INT", "INT"),
        ("INTEGER", "INT"),
        ("integer not null", "INT NOT NULL"),
        ("INT NULL", "INT"),
        ("BIGINT NOT NULL", "BIGINT NOT NULL"),
        ("BOOLEAN", "BOOLEAN"),
        ("TINYINT", "TINYINT"),
        ("SMALLINT", "SMALLINT"),
        ("FLOAT", "FLOAT"),
        ("DOUBLE", "DOUBLE"),
        ("DOUBLE PRECISION", "DOUBLE"),
        ("DATE", "DATE"),
        ("STRING", "STRING"),
        ("STRING NOT NULL", "STRING NOT NULL"),
        ("VARCHAR(2147483647)", "STRING"),
        ("VARCHAR(10)", "VARCHAR(10)"),
        ("VARCHAR", "VARCHAR(1)"),  # Java's VarCharType() default length
        ("CHAR", "CHAR(1)"),
        ("CHAR(3) NOT NULL", "CHAR(3) NOT NULL"),
        ("BYTES", "BYTES"),
        ("VARBINARY(2147483647)", "BYTES"),
        ("VARBINARY(10)", "VARBINARY(10)"),
        ("BINARY(4)", "BINARY(4)"),
        ("DECIMAL", "DECIMAL(10, 0)"),
        ("DECIMAL(5)", "DECIMAL(5, 0)"),
        ("DECIMAL(10,2)", "DECIMAL(10, 2)"),
        ("DEC(38, 18)", "DECIMAL(38, 18)"),
        ("NUMERIC(12, 3) NOT NULL", "DECIMAL(12, 3) NOT NULL"),
        ("TIME", "TIME(0)"),
        ("TIME(3)", "TIME(3)"),
        ("TIME(3) WITHOUT TIME ZONE", "TIME(3)"),
        ("TIMESTAMP", "TIMESTAMP(6)"),
        ("TIMESTAMP(3)", "TIMESTAMP(3)"),
        ("TIMESTAMP(9) WITHOUT TIME ZONE", "TIMESTAMP(9)"),
        ("TIMESTAMP_LTZ(6)", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        ("TIMESTAMP_LTZ", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        ("TIMESTAMP_LTZ(3) NOT NULL", "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL"),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
        ("timestamp with local time zone", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        ("VARIANT", "VARIANT"),
        ("BLOB NOT NULL", "BLOB NOT NULL"),
    ],
)
def test_atomic_aliases_print_as_java_does(text: str, canonical: str) -> None:
    parsed = T(text)
    assert parsed.to_json() == canonical
    assert T(canonical) == parsed


def test_parsed_parameters() -> None:
    assert T("STRING") == STRING() == DataType("VARCHAR", True, length=2147483647)
    assert T("BYTES").root == "VARBINARY" and T("BYTES").is_binary()
    assert T("DECIMAL(38, 18)") == DECIMAL(38, 18)
    assert T("TIMESTAMP") == TIMESTAMP(6)
    assert T("TIMESTAMP_LTZ(3)").root == "TIMESTAMP_LTZ"
    assert T("TIME").precision == 0
    assert T("INT NOT NULL") == INT(False) and not T("INT NOT NULL").nullable
    assert T("CHAR(2)").is_string() and not T("BINARY(2)").is_string()


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("INT ARRAY", {"type": "ARRAY", "element": "INT"}),
        ("INT NOT NULL ARRAY NOT NULL", {"type": "ARRAY NOT NULL", "element": "INT NOT NULL"}),
        ("STRING MULTISET", {"type": "MULTISET", "element": "STRING"}),
        ("ARRAY<BIGINT NOT NULL>", {"type": "ARRAY", "element": "BIGINT NOT NULL"}),
        (
            "array<array<int>> not null",
            {"type": "ARRAY NOT NULL", "element": {"type": "ARRAY", "element": "INT"}},
        ),
        (
            "MAP<STRING NOT NULL, DECIMAL(5,1)>",
            {"type": "MAP", "key": "STRING NOT NULL", "value": "DECIMAL(5, 1)"},
        ),
        ("MULTISET<DATE>", {"type": "MULTISET", "element": "DATE"}),
        ("VECTOR<FLOAT, 3>", {"type": "VECTOR", "element": "FLOAT", "length": 3}),
    ],
)
def test_string_nested_forms(text: str, canonical: dict) -> None:
    parsed = T(text)
    assert parsed.to_json() == canonical
    assert T(canonical) == parsed


def test_row_string_form_keeps_names_comments_and_keywords_as_names() -> None:
    row = T("ROW<a INT NOT NULL, `date` STRING 'the day', key ROW<`x``y` BIGINT>>")
    assert [f.name for f in row.fields] == ["a", "date", "key"]
    assert row.fields[0].type == INT(False)
    assert row.fields[1].description == "the day"
    assert row.fields[2].type.fields[0].name == "x`y"
    assert {f.id for f in row.fields} == {-1}  # numbered later by assign_field_ids
    assert row.sql() == "ROW<`a` INT NOT NULL, `date` STRING 'the day', `key` ROW<`x``y` BIGINT>>"
    assert T(row.sql()) == row


def test_nested_json_objects() -> None:
    array = T({"type": "ARRAY NOT NULL", "element": "INT"})
    assert not array.nullable and array.element == INT()
    assert array.to_json() == {"type": "ARRAY NOT NULL", "element": "INT"}
    mapping = T({"type": "MAP", "key": "STRING NOT NULL", "value": {"type": "ARRAY", "element": "INT"}})
    assert mapping.key == STRING(False) and mapping.value.root == "ARRAY"
    row = T(
        {
            "type": "ROW NOT NULL",
            "fields": [
                {"id": 7, "name": "a", "type": "INT", "description": "doc"},
                {"id": 8, "name": "b", "type": "STRING", "defaultValue": "x"},
            ],
        }
    )
    assert not row.nullable
    assert row.fields == (DataField(7, "a", INT(), "doc"), DataField(8, "b", STRING(), None, "x"))
    assert row.to_json() == {
        "type": "ROW NOT NULL",
        "fields": [
            {"id": 7, "name": "a", "type": "INT", "description": "doc"},
            {"id": 8, "name": "b", "type": "STRING", "defaultValue": "x"},
        ],
    }


def test_pypaimon_nullable_key_is_read_but_never_written() -> None:
    """pypaimon adds "nullable" to nested objects; Java puts NOT NULL in "type" and ignores the key."""
    written_by_pypaimon = {
        "type": "MAP NOT NULL",
        "key": "STRING NOT NULL",
        "value": "BIGINT",
        "nullable": False,
    }
    parsed = T(written_by_pypaimon)
    assert not parsed.nullable
    assert parsed.to_json() == {"type": "MAP NOT NULL", "key": "STRING NOT NULL", "value": "BIGINT"}
    assert T({"type": "ARRAY", "element": "INT", "nullable": True}).nullable
    assert not T({"type": "ARRAY", "element": "INT", "nullable": False}).nullable


def test_nested_fields_without_ids_are_numbered_like_java() -> None:
    row = T({"type": "ROW", "fields": [{"name": "a", "type": "INT"}, {"name": "b", "type": "INT"}]})
    assert [f.id for f in row.fields] == [0, 1]
    with pytest.raises(TypeParseError):
        T({"type": "ROW", "fields": [{"name": "a", "type": "INT"}, {"id": 5, "name": "b", "type": "INT"}]})


def test_data_field_json_round_trip() -> None:
    data = {"id": 3, "name": "c", "type": "DECIMAL(10, 2) NOT NULL", "description": "money"}
    field = parse_field(data)
    assert field == DataField(3, "c", DECIMAL(10, 2, nullable=False), "money")
    assert field.to_json() == data
    assert DataField(0, "x", BIGINT()).to_json() == {"id": 0, "name": "x", "type": "BIGINT"}


@needs_samples
@pytest.mark.parametrize("path", sorted(SAMPLES.glob("schema.*.json")), ids=lambda p: p.name)
def test_sample_schemas_parse_and_print_back(path: Path) -> None:
    """Fields written by pypaimon read back; printing gives Java's form, which parses to the same type."""
    aliases = {"TIMESTAMP_LTZ(6)": "TIMESTAMP(6) WITH LOCAL TIME ZONE"}
    for raw in json.loads(path.read_text())["fields"]:
        field = parse_field(raw)
        printed = field.to_json()
        assert parse_field(printed) == field
        expected = raw["type"]
        if isinstance(expected, str):
            assert printed["type"] == aliases.get(expected, expected)
        else:  # nested: same content without pypaimon's "nullable" key
            assert "nullable" not in printed["type"]
            assert printed["type"] == {k: v for k, v in expected.items() if k != "nullable"}
        assert to_arrow(field.type) is not None


@needs_samples
def test_more_types_sample_values() -> None:
    fields = {
        f["name"]: parse_field(f)
        for f in json.loads((SAMPLES / "schema.more_types.0.json").read_text())["fields"]
    }
    assert fields["c_ts_ltz"].type.root == "TIMESTAMP_LTZ" and fields["c_ts_ltz"].type.precision == 6
    assert fields["c_ts9"].type.precision == 9
    assert fields["c_dec38"].type == DECIMAL(38, 18)
    assert fields["c_map"].type.key == STRING(False)
    assert [f.id for f in fields["c_row"].type.fields] == [13, 14]
    assert max_field_id(list(fields.values())) == 14


@pytest.mark.parametrize(
    "bad",
    [
        "NOT A TYPE(",
        "",
        "   ",
        "FOO",
        "INT(3)",
        "INT NOT",
        "INT INT",
        "DECIMAL(39, 2)",
        "DECIMAL(0)",
        "DECIMAL(5, 6)",
        "DECIMAL(5, 2, 1)",
        "TIMESTAMP(10)",
        "TIME(12)",
        "CHAR(0)",
        "VARCHAR(2147483648)",
        "ARRAY<INT",
        "ARRAY<>",
        "MAP<INT>",
        "ROW<a INT, a STRING>",
        "ROW a INT",
        "VECTOR<FLOAT, 0>",
        "TIMESTAMP_LTZ(3) WITH LOCAL TIME ZONE",
        "INT 'comment'",
        42,
        None,
        ["INT"],
        {"element": "INT"},
        {"type": "ARRAY"},
        {"type": "MAP", "key": "INT"},
        {"type": "ROW", "fields": [{"id": 1, "type": "INT"}]},
        {"type": "ROW", "fields": [{"id": "x", "name": "a", "type": "INT"}]},
        {"type": "ROW", "fields": "nope"},
        {"type": "VECTOR", "element": "FLOAT", "length": "many"},
        {"type": "WHAT"},
    ],
)
def test_garbage_types_raise_a_clear_error(bad: object) -> None:
    with pytest.raises(TypeParseError) as info:
        T(bad)  # type: ignore[arg-type]
    assert isinstance(info.value, PaimonFormatError) and isinstance(info.value, ValueError)
    if isinstance(bad, str) and bad.strip():
        assert repr(bad) in str(info.value) or bad in str(info.value)


def test_types_are_hashable_and_picklable_for_executors() -> None:
    row = T("ROW<a INT, b MAP<STRING, ARRAY<DECIMAL(20, 2)>>>")
    assert pickle.loads(pickle.dumps(row)) == row
    assert len({row, T(row.to_json()), INT()}) == 2


# -- field ids ----------------------------------------------------------------------------------------


def test_assign_field_ids_spec_example() -> None:
    fields, highest = assign_field_ids([("a", INT()), ("b", T("ROW<x INT, y STRING>")), ("c", INT())])
    assert [(f.name, f.id) for f in fields] == [("a", 0), ("b", 1), ("c", 4)]
    assert [(f.name, f.id) for f in fields[1].type.fields] == [("x", 2), ("y", 3)]
    assert highest == 4 == max_field_id(fields)


def test_assign_field_ids_numbers_nested_children_first_like_java() -> None:
    fields, highest = assign_field_ids(
        [("a", INT()), ("b", T("ROW<x ROW<p INT>, y INT>")), ("m", T("MAP<STRING, ROW<q INT>>"))]
    )
    b = fields[1]
    assert b.id == 1
    x, y = b.type.fields
    assert (x.type.fields[0].id, x.id, y.id) == (2, 3, 4)
    m = fields[2]
    assert m.id == 5 and m.type.value.fields[0].id == 6
    assert highest == 6


def test_assign_field_ids_start_descriptions_and_empty() -> None:
    fields, highest = assign_field_ids([("a", INT(), "doc"), ("b", STRING())], start=10)
    assert [(f.id, f.description) for f in fields] == [(10, "doc"), (11, None)]
    assert highest == 11
    assert assign_field_ids([]) == ((), -1)


# -- pyarrow ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "arrow"),
    [
        ("BOOLEAN", pa.bool_()),
        ("TINYINT", pa.int8()),
        ("SMALLINT", pa.int16()),
        ("INT", pa.int32()),
        ("BIGINT", pa.int64()),
        ("FLOAT", pa.float32()),
        ("DOUBLE", pa.float64()),
        ("DATE", pa.date32()),
        ("STRING", pa.string()),
        ("BYTES", pa.binary()),
        ("DECIMAL(38, 18)", pa.decimal128(38, 18)),
        ("TIMESTAMP(0)", pa.timestamp("s")),
        ("TIMESTAMP(3)", pa.timestamp("ms")),
        ("TIMESTAMP(6)", pa.timestamp("us")),
        ("TIMESTAMP(9)", pa.timestamp("ns")),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", pa.timestamp("ms", tz="UTC")),
        ("TIMESTAMP(6) WITH LOCAL TIME ZONE", pa.timestamp("us", tz="UTC")),
        ("ARRAY<INT>", pa.list_(pa.field("element", pa.int32()))),
        (
            "MAP<STRING NOT NULL, BIGINT>",
            pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.int64())),
        ),
    ],
)
def test_arrow_round_trip(text: str, arrow: pa.DataType) -> None:
    assert to_arrow(T(text)) == arrow
    assert from_arrow(arrow) == T(text)
    assert from_arrow(arrow, nullable=False) == T(text).with_nullable(False)


def test_to_arrow_other_types() -> None:
    assert to_arrow(T("TIMESTAMP(4)")) == pa.timestamp("us")
    assert to_arrow(T("TIME(0)")) == pa.time32("ms")
    assert to_arrow(T("TIME(9)")) == pa.time64("ns")
    assert to_arrow(T("CHAR(3)")) == pa.string()
    struct = to_arrow(T("ROW<a INT NOT NULL, b STRING>"))
    assert struct == pa.struct([pa.field("a", pa.int32(), False), pa.field("b", pa.string())])
    assert to_arrow(T("VECTOR<FLOAT, 3>")) == pa.list_(pa.field("element", pa.float32()), 3)


def test_from_arrow_other_types() -> None:
    assert from_arrow(pa.large_string()) == STRING()
    assert from_arrow(pa.large_binary()).to_json() == "BYTES"
    assert from_arrow(pa.binary(4)).to_json() == "BINARY(4)"
    assert from_arrow(pa.dictionary(pa.int32(), pa.string())) == STRING()
    assert from_arrow(pa.timestamp("s", tz="Europe/Paris")).to_json() == "TIMESTAMP(0) WITH LOCAL TIME ZONE"
    assert from_arrow(pa.timestamp("ns")).to_json() == "TIMESTAMP(9)"
    assert from_arrow(pa.time32("s")).to_json() == "TIME(0)"
    assert from_arrow(pa.time32("ms")).to_json() == "TIME(3)"
    assert from_arrow(pa.time64("us")).to_json() == "TIME(6)"
    assert from_arrow(pa.date64()).to_json() == "DATE"
    listed = from_arrow(pa.large_list(pa.field("item", pa.int64(), nullable=False)))
    assert listed.to_json() == {"type": "ARRAY", "element": "BIGINT NOT NULL"}
    row = from_arrow(
        pa.struct([pa.field("a", pa.int32(), False), pa.field("b", pa.list_(pa.string()))]), False
    )
    assert not row.nullable and [f.id for f in row.fields] == [-1, -1]
    assert row.fields[0].type == INT(False)
    fields, highest = assign_field_ids([("s", row)])
    assert [f.id for f in fields[0].type.fields] == [1, 2] and highest == 2


def test_unmappable_arrow_types_raise() -> None:
    with pytest.raises(TypeParseError):
        from_arrow(pa.null())
    with pytest.raises(TypeParseError):
        from_arrow(pa.decimal256(60, 2))
    with pytest.raises(TypeParseError):
        from_arrow(pa.uint64())
