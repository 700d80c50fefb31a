"""TableSchema JSON (pypaimon 2.1.0 samples, Java's layout, old versions), new schemas, SchemaManager."""

from __future__ import annotations

import json

import pytest

from paimon_format.errors import CorruptFileError, InvalidTableStateError, TableNotFoundError
from paimon_format.model.json import jackson_json
from paimon_format.model.options import InvalidOptionError
from paimon_format.model.schema import (
    InvalidSchemaError,
    SchemaManager,
    TableSchema,
    new_table_schema,
)
from paimon_format.model.type_parsing import parse_type
from tests.support.samples import SAMPLES, needs_samples

SCHEMA_SAMPLES = sorted(SAMPLES.glob("schema.*.json"))


def normalised(schema_json: dict) -> dict:
    """A schema JSON object with types parsed, so alias spellings ('TIMESTAMP_LTZ(6)') compare equal."""
    result = dict(schema_json)
    result["fields"] = [{**f, "type": parse_type(f["type"])} for f in schema_json["fields"]]
    if result.get("comment") is None:
        result.pop("comment", None)
    return result


def T(text: str | dict):  # noqa: N802 - reads like a type literal
    return parse_type(text)


def row(*fields: tuple[str, str | dict]) -> dict:
    """JSON of a ROW type with placeholder ids (new_table_schema reassigns them)."""
    return {"type": "ROW", "fields": [{"id": 0, "name": n, "type": t} for n, t in fields]}


# -- samples and JSON layout -----------------------------------------------------------------------


@needs_samples
def test_samples_exist():
    assert len(SCHEMA_SAMPLES) >= 4


@pytest.mark.parametrize("sample", SCHEMA_SAMPLES, ids=lambda p: p.name)
def test_sample_parses_and_round_trips(sample):
    text = sample.read_text()
    schema = TableSchema.from_json(text, str(sample))
    original = json.loads(text)
    assert schema.id == original["id"] and schema.version == 3
    assert schema.field_names() == [f["name"] for f in original["fields"]]
    assert schema.highest_field_id == original["highestFieldId"]
    assert schema.options == original["options"]

    rewritten = schema.to_json()
    assert normalised(json.loads(rewritten)) == normalised(original)
    assert TableSchema.from_json(rewritten) == schema
    assert '"comment"' not in rewritten  # null comment is omitted, like Java


@needs_samples
def test_sample_details():
    pk = TableSchema.from_json((SAMPLES / "schema.pk_fixed.0.json").read_text())
    assert pk.primary_keys == ("id",) and pk.options == {"bucket": "4"}
    assert pk.field("id").type.nullable is False
    assert pk.trimmed_primary_keys() == ["id"] and pk.bucket_keys() == ["id"]
    parted = TableSchema.from_json((SAMPLES / "schema.append_parted.0.json").read_text())
    assert parted.partition_keys == ("dt",)
    assert [t.root for t in parted.partition_types()] == ["VARCHAR"]
    more = TableSchema.from_json((SAMPLES / "schema.more_types.0.json").read_text())
    nested = more.field("c_row").type
    assert [f.id for f in nested.fields] == [13, 14] and more.highest_field_id == 14


@needs_samples
def test_to_json_is_jacksons_layout():
    schema = TableSchema(
        id=0,
        fields=(TableSchema.from_json((SAMPLES / "schema.pk_fixed.0.json").read_text()).fields[0],),
        partition_keys=(),
        primary_keys=("id",),
        options={"bucket": "4", "file.format": "parquet"},
        comment="orders",
        highest_field_id=0,
        time_millis=1700000000000,
    )
    assert schema.to_json() == (
        "{\n"
        '  "version" : 3,\n'
        '  "id" : 0,\n'
        '  "fields" : [ {\n'
        '    "id" : 0,\n'
        '    "name" : "id",\n'
        '    "type" : "BIGINT NOT NULL"\n'
        "  } ],\n"
        '  "highestFieldId" : 0,\n'
        '  "partitionKeys" : [ ],\n'
        '  "primaryKeys" : [ "id" ],\n'
        '  "options" : {\n'
        '    "bucket" : "4",\n'
        '    "file.format" : "parquet"\n'
        "  },\n"
        '  "comment" : "orders",\n'
        '  "timeMillis" : 1700000000000\n'
        "}"
    )


def test_jackson_json_details():
    assert jackson_json({}) == "{ }"
    assert jackson_json([]) == "[ ]"
    assert jackson_json({"a": [1, 2], "b": {}, "c": None, "d": True}) == (
        '{\n  "a" : [ 1, 2 ],\n  "b" : { },\n  "c" : null,\n  "d" : true\n}'
    )
    assert jackson_json({"a": [{"x": 1}, {"y": {"z": 2}}]}) == (
        '{\n  "a" : [ {\n    "x" : 1\n  }, {\n    "y" : {\n      "z" : 2\n    }\n  } ]\n}'
    )
    assert jackson_json('q"\\\n\t\x01é/') == '"q\\"\\\\\\n\\t\\u0001é/"'


# -- old versions and defaults ---------------------------------------------------------------------


def minimal_schema(**overrides) -> dict:
    data = {
        "id": 0,
        "fields": [{"id": 0, "name": "a", "type": "INT"}],
        "highestFieldId": 0,
        "partitionKeys": [],
        "primaryKeys": [],
        "options": {},
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not ...}


def test_missing_version_is_paimon_07_with_one_bucket_and_orc():
    schema = TableSchema.from_json(json.dumps(minimal_schema()))
    assert schema.version == 1
    assert schema.options == {"bucket": "1", "file.format": "orc"}
    assert schema.time_millis == 0 and schema.comment is None


def test_version_2_defaults_to_orc_but_not_to_one_bucket():
    schema = TableSchema.from_json(json.dumps(minimal_schema(version=2)))
    assert schema.options == {"file.format": "orc"}


def test_version_1_keeps_explicit_options():
    schema = TableSchema.from_json(
        json.dumps(minimal_schema(version=1, options={"bucket": "3", "file.format": "avro"}))
    )
    assert schema.options == {"bucket": "3", "file.format": "avro"}


def test_version_3_gets_no_implied_options():
    schema = TableSchema.from_json(json.dumps(minimal_schema(version=3, comment="c", timeMillis=5)))
    assert schema.options == {} and schema.comment == "c" and schema.time_millis == 5
    assert schema.core_options().file_format == "parquet" and schema.core_options().bucket == -1


def test_non_string_option_values_are_read_as_text():
    schema = TableSchema.from_json(
        json.dumps(minimal_schema(version=3, options={"bucket": 2, "write-only": True}))
    )
    assert schema.options == {"bucket": "2", "write-only": "true"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps(minimal_schema(fields=...)), "'fields'"),
        (json.dumps(minimal_schema(id=...)), "'id'"),
        (json.dumps(minimal_schema(highestFieldId=...)), "'highestFieldId'"),
        (json.dumps(minimal_schema(partitionKeys=...)), "'partitionKeys'"),
        (json.dumps(minimal_schema(options=...)), "'options'"),
        (json.dumps(minimal_schema(id="0")), "'id'"),
        (json.dumps(minimal_schema(primaryKeys="id")), "'primaryKeys'"),
        (json.dumps(minimal_schema(options={"bucket": None})), "'bucket'"),
        (json.dumps(minimal_schema(fields=[{"id": 0, "name": "a", "type": "NOT_A_TYPE"}])), "invalid schema"),
    ],
)
def test_bad_schema_json_is_corrupt_and_names_the_path(text, match):
    with pytest.raises(CorruptFileError, match=match) as raised:
        TableSchema.from_json(text, "/t/schema/schema-0")
    assert raised.value.path == "/t/schema/schema-0"


def test_schema_id_must_match_file_name():
    with pytest.raises(CorruptFileError, match="file name"):
        TableSchema.from_json(json.dumps(minimal_schema(id=1)), "/t/schema/schema-0")


# -- new schemas -----------------------------------------------------------------------------------


def test_field_ids_count_nested_row_fields_after_their_parent():
    schema = new_table_schema(
        [("a", T("INT")), ("b", T(row(("x", "INT"), ("y", "STRING")))), ("c", T("INT"))]
    )
    assert [f.id for f in schema.fields] == [0, 1, 4]
    assert [(f.name, f.id) for f in schema.field("b").type.fields] == [("x", 2), ("y", 3)]
    assert schema.highest_field_id == 4


def test_field_ids_deeply_nested_like_java():
    # Inside a ROW, a field's own nested fields take ids before the field (Java ReassignFieldId order).
    schema = new_table_schema(
        [
            ("a", T("INT")),
            ("b", T(row(("x", row(("p", "INT"))), ("y", "INT")))),
            ("arr", T({"type": "ARRAY", "element": row(("e", "INT"))})),
            ("m", T({"type": "MAP", "key": "STRING NOT NULL", "value": row(("v", "INT"))})),
            ("z", T("STRING")),
        ]
    )
    b = schema.field("b").type
    x = b.fields[0]
    assert (schema.field("b").id, x.type.fields[0].id, x.id, b.fields[1].id) == (1, 2, 3, 4)
    assert schema.field("arr").id == 5 and schema.field("arr").type.element.fields[0].id == 6
    assert schema.field("m").id == 7 and schema.field("m").type.value.fields[0].id == 8
    assert schema.field("z").id == 9 and schema.highest_field_id == 9
    reread = TableSchema.from_json(schema.to_json())
    assert reread == schema


def test_primary_key_columns_become_not_null_and_options_strings():
    schema = new_table_schema(
        [("id", T("BIGINT")), ("dt", T("STRING")), ("v", T("STRING"))],
        partition_keys=["dt"],
        primary_keys=["dt", "id"],
        options={"bucket": 2, "write-only": True},
        comment="pk table",
    )
    assert [f.type.nullable for f in schema.fields] == [False, False, True]
    assert schema.options == {"bucket": "2", "write-only": "true"}
    assert schema.trimmed_primary_keys() == ["id"] and schema.bucket_keys() == ["id"]
    assert schema.id == 0 and schema.version == 3 and schema.time_millis > 0
    assert json.loads(schema.to_json())["fields"][0]["type"] == "BIGINT NOT NULL"
    assert json.loads(schema.to_json())["comment"] == "pk table"


def test_primary_key_nullable_option_keeps_nullability():
    schema = new_table_schema(
        [("id", T("BIGINT")), ("v", T("INT"))], primary_keys=["id"], options={"primary-key.nullable": "true"}
    )
    assert schema.field("id").type.nullable is True


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"partition_keys": ["nope"]}, "partition key"),
        ({"primary_keys": ["nope"]}, "primary key"),
        ({"primary_keys": ["id", "id"]}, "duplicates"),
        ({"partition_keys": ["dt", "dt"]}, "duplicates"),
        ({"partition_keys": ["dt"], "primary_keys": ["dt"]}, "one record per partition"),
        ({"options": {"bucket": "0"}}, "number of buckets"),
        ({"options": {"bucket": "-3"}}, "number of buckets"),
        ({"options": {"bucket": "4"}}, "bucket-key"),
        ({"options": {"bucket": "-2"}}, "postpone"),
        ({"options": {"bucket-key": "id"}}, "bucket = -1"),
        ({"options": {"bucket": "4", "bucket-key": "nope"}}, "bucket-key columns"),
        ({"options": {"bucket": "4", "bucket-key": "id, v"}}, "bucket-key columns"),
        ({"options": {"bucket": "4", "bucket-key": "dt"}, "partition_keys": ["dt"]}, "partition keys"),
        ({"options": {"bucket": "4", "bucket-key": "v"}, "primary_keys": ["id"]}, "part of the primary key"),
        ({"options": {"bucket": "4"}, "partition_keys": ["dt"], "primary_keys": ["id"]}, "bucket = -1"),
        ({"options": {"changelog-producer": "input"}}, "changelog-producer"),
        ({"options": {"sequence.field": "nope"}, "primary_keys": ["id"]}, "sequence.field"),
        ({"partition_keys": ["tags"]}, "not allowed in keys"),
    ],
)
def test_invalid_new_schemas_are_refused(kwargs, match):
    columns = [
        ("id", T("BIGINT")),
        ("dt", T("STRING")),
        ("v", T("STRING")),
        ("tags", T({"type": "ARRAY", "element": "STRING"})),
    ]
    with pytest.raises(InvalidSchemaError, match=match):
        new_table_schema(columns, **kwargs)


def test_invalid_option_value_is_refused_naming_the_option():
    with pytest.raises(InvalidOptionError, match="'bucket'"):
        new_table_schema([("id", T("BIGINT"))], options={"bucket": "abc"})


def test_duplicate_columns_and_empty_schema_are_refused():
    with pytest.raises(InvalidSchemaError, match="duplicate column"):
        new_table_schema([("a", T("INT")), ("a", T("STRING"))])
    with pytest.raises(InvalidSchemaError, match="at least one column"):
        new_table_schema([])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"options": {"bucket": "4", "bucket-key": "id"}},
        {"options": {"bucket": "4", "bucket-key": "id,v"}, "partition_keys": ["dt"]},
        {"primary_keys": ["id"], "options": {"bucket": "4"}},
        {"primary_keys": ["id"], "partition_keys": ["dt"]},  # cross-partition update, dynamic bucket
        {"primary_keys": ["id"], "options": {"bucket": "-2"}},
        {"primary_keys": ["id", "dt"], "partition_keys": ["dt"], "options": {"bucket": "3"}},
        {"options": {"my.own.option": "x"}},
    ],
)
def test_valid_new_schemas(kwargs):
    schema = new_table_schema([("id", T("BIGINT")), ("dt", T("STRING")), ("v", T("STRING"))], **kwargs)
    assert TableSchema.from_json(schema.to_json()) == schema


def test_cross_partition_update_flag():
    columns = [("id", T("BIGINT")), ("dt", T("STRING"))]
    assert new_table_schema(columns, ["dt"], ["id"]).cross_partition_update()
    assert not new_table_schema(columns, ["dt"], ["id", "dt"]).cross_partition_update()


# -- SchemaManager ---------------------------------------------------------------------------------


def sample_schema() -> TableSchema:
    return new_table_schema([("id", T("BIGINT")), ("dt", T("STRING"))], partition_keys=["dt"])


def test_manager_on_a_missing_table(storage):
    table_root, file_io = storage
    manager = SchemaManager(file_io, table_root)
    assert manager.list_ids() == []
    assert manager.latest() is None
    with pytest.raises(TableNotFoundError, match="schema-0"):
        manager.schema(0)


def test_create_table_writes_schema_0_and_reads_it_back(storage):
    table_root, file_io = storage
    manager = SchemaManager(file_io, table_root)
    schema = sample_schema()
    assert manager.create_table(schema) == schema
    path = file_io.join(table_root, "schema", "schema-0")
    assert manager.schema_path(0) == path
    assert file_io.read_bytes(path).decode() == schema.to_json()
    assert manager.list_ids() == [0]
    assert manager.latest() == schema


def test_create_table_is_idempotent_but_refuses_a_different_schema(storage):
    table_root, file_io = storage
    manager = SchemaManager(file_io, table_root)
    first = manager.create_table(sample_schema())
    again = new_table_schema([("id", T("BIGINT")), ("dt", T("STRING"))], partition_keys=["dt"])
    assert manager.create_table(again) == first  # same definition, other timestamp: a retry
    different = new_table_schema([("id", T("BIGINT")), ("dt", T("STRING"))])
    with pytest.raises(InvalidTableStateError, match="different schema"):
        manager.create_table(different)
    assert manager.latest() == first


def test_commit_new_schema(storage):
    table_root, file_io = storage
    manager = SchemaManager(file_io, table_root)
    first = manager.create_table(sample_schema())
    altered = TableSchema(
        id=1,
        fields=first.fields,
        partition_keys=first.partition_keys,
        primary_keys=(),
        options={"snapshot.num-retained.min": "5"},
        comment=None,
        highest_field_id=first.highest_field_id,
        time_millis=1,
    )
    assert manager.commit_new_schema(altered) is True
    assert manager.commit_new_schema(altered) is False
    assert manager.list_ids() == [0, 1]
    assert manager.latest() == altered
    with pytest.raises(ValueError, match="gap"):
        manager.commit_new_schema(TableSchema(**{**vars(altered), "id": 3}))


def test_listing_ignores_other_files_and_corrupt_schema_raises(storage):
    table_root, file_io = storage
    manager = SchemaManager(file_io, table_root)
    manager.create_table(sample_schema())
    file_io.write_bytes(file_io.join(manager.schema_dir(), ".schema-1.tmp"), b"x")
    file_io.write_bytes(file_io.join(manager.schema_dir(), "schema-x"), b"x")
    assert manager.list_ids() == [0]
    file_io.write_bytes(manager.schema_path(1), b'{"id": 1, "fields": [')
    with pytest.raises(CorruptFileError) as raised:
        manager.latest()
    assert raised.value.path == manager.schema_path(1)


def test_branch_schema_dir(storage):
    table_root, file_io = storage
    manager = SchemaManager(file_io, table_root, branch="dev")
    assert manager.schema_dir() == file_io.join(table_root, "branch", "branch-dev", "schema")
    manager.create_table(sample_schema())
    assert SchemaManager(file_io, table_root).latest() is None
    assert manager.list_ids() == [0]
