"""Avro manifests: Java's writer shape, round trips, every reader shape, and broken files.

The reader-shape tests build Avro files with the writer schemas pypaimon 2.1.0 really wrote
(shared/spec/samples/avro-writer-schema.*.json) filled with the sample records decoded from real
files, plus hand-made older (0.5) and nullable (paimon-rust) shapes.
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import math
import os
import pickle
import time
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest

from paimon_format.errors import CorruptFileError, MissingFileError
from paimon_format.manifest.codec import (
    avro_codec,
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_index_manifest,
    encode_manifest,
    encode_manifest_list,
    iter_manifest_entries,
    read_index_manifest,
    read_manifest,
    read_manifest_list,
    write_index_manifest,
    write_manifest,
    write_manifest_list,
)
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    DataFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    delete_entry,
)
from paimon_format.manifest.files import manifest_file_meta, rolling_write_manifests
from paimon_format.manifest.schemas import MANIFEST_FILE_META_SCHEMA
from paimon_format.model.binary_row import EMPTY_ROW, deserialize_row, serialize_row
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from tests.support.samples import SAMPLES

needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared/spec/samples not present")

BIGINT, STRING, INT = parse_type("BIGINT"), parse_type("STRING"), parse_type("INT")

# DataFileMeta attribute -> Avro field, in Java's field-id order (§4.5).
FILE_FIELDS = {
    "file_name": "_FILE_NAME",
    "file_size": "_FILE_SIZE",
    "row_count": "_ROW_COUNT",
    "min_key": "_MIN_KEY",
    "max_key": "_MAX_KEY",
    "key_stats": "_KEY_STATS",
    "value_stats": "_VALUE_STATS",
    "min_sequence_number": "_MIN_SEQUENCE_NUMBER",
    "max_sequence_number": "_MAX_SEQUENCE_NUMBER",
    "schema_id": "_SCHEMA_ID",
    "level": "_LEVEL",
    "extra_files": "_EXTRA_FILES",
    "creation_time": "_CREATION_TIME",
    "delete_row_count": "_DELETE_ROW_COUNT",
    "embedded_index": "_EMBEDDED_FILE_INDEX",
    "file_source": "_FILE_SOURCE",
    "value_stats_cols": "_VALUE_STATS_COLS",
    "external_path": "_EXTERNAL_PATH",
    "first_row_id": "_FIRST_ROW_ID",
    "write_cols": "_WRITE_COLS",
    "write_cols_sequences": "_WRITE_COLS_SEQUENCES",
}
META_FIELDS = {
    "file_name": "_FILE_NAME",
    "file_size": "_FILE_SIZE",
    "num_added_files": "_NUM_ADDED_FILES",
    "num_deleted_files": "_NUM_DELETED_FILES",
    "partition_stats": "_PARTITION_STATS",
    "schema_id": "_SCHEMA_ID",
    "min_bucket": "_MIN_BUCKET",
    "max_bucket": "_MAX_BUCKET",
    "min_level": "_MIN_LEVEL",
    "max_level": "_MAX_LEVEL",
    "min_row_id": "_MIN_ROW_ID",
    "max_row_id": "_MAX_ROW_ID",
    "total_buckets": "_TOTAL_BUCKETS",
    "extra_files": "_EXTRA_FILES",
}
OPTIONAL_FILE_FIELDS = [name for name in FILE_FIELDS if list(FILE_FIELDS).index(name) >= 12]


def full_file(**changes: Any) -> DataFileMeta:
    """A DataFileMeta with every optional field set (override with keyword arguments)."""
    values: dict[str, Any] = dict(
        file_name="data-x-0.parquet",
        file_size=123,
        row_count=4,
        min_key=serialize_row([1], [BIGINT]),
        max_key=serialize_row([4], [BIGINT]),
        key_stats=SimpleStats(serialize_row([1], [BIGINT]), serialize_row([4], [BIGINT]), [0]),
        value_stats=SimpleStats(
            serialize_row([1, "a"], [BIGINT, STRING]), serialize_row([4, "z"], [BIGINT, STRING]), [None, 2]
        ),
        min_sequence_number=1,
        max_sequence_number=4,
        schema_id=3,
        level=1,
        extra_files=["data-x-0.parquet.index"],
        creation_time=dt.datetime(2024, 1, 2, 3, 4, 5, 6000),
        delete_row_count=1,
        embedded_index=b"\x01\x02",
        file_source=1,
        value_stats_cols=["id", "v"],
        external_path="s3://bucket/x/data-x-0.parquet",
        first_row_id=10,
        write_cols=["id", "v"],
        write_cols_sequences=[7, 8],
    )
    values.update(changes)
    return DataFileMeta(**values)


def bare_file(**changes: Any) -> DataFileMeta:
    """A DataFileMeta with every optional field unset."""
    return full_file(**{**{name: None for name in OPTIONAL_FILE_FIELDS}, "extra_files": [], **changes})


# -- round trips ------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["zstd", "none", "deflate", "snappy", "bzip2", "xz"])
def test_manifest_entries_round_trip_with_every_optional_field_set_and_unset(compression):
    entries = [
        ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file()),
        ManifestEntry(DELETE, serialize_row(["2024-01-01"], [STRING]), 3, 4, bare_file()),
        ManifestEntry(ADD, EMPTY_ROW, 1, 2, full_file(key_stats=SimpleStats.empty(), value_stats_cols=[])),
    ]
    data = encode_manifest(entries, compression)
    assert fastavro.reader(io.BytesIO(data)).codec == avro_codec(compression)
    assert decode_manifest(data, "m") == entries
    assert list(iter_manifest_entries(data, "m")) == entries


def test_each_optional_file_field_round_trips_alone():
    for name in OPTIONAL_FILE_FIELDS:
        only = bare_file(**{name: getattr(full_file(), name)})
        (entry,) = decode_manifest(encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, 1, only)]))
        assert entry.file == only, name


def test_manifest_list_round_trips_with_optional_fields_set_and_unset():
    stats = SimpleStats(
        serialize_row(["a", 1], [STRING, INT]), serialize_row(["b", None], [STRING, INT]), [0, 2]
    )
    metas = [
        ManifestFileMeta("manifest-a-0", 10, 2, 1, stats, 0, 0, 3, 0, 1, 100, 199),
        ManifestFileMeta("manifest-a-1", 20, 0, 0, SimpleStats.empty(), 5),
    ]
    data = encode_manifest_list(metas)
    assert decode_manifest_list(data) == metas
    fields = [f["name"] for f in fastavro.reader(io.BytesIO(data)).writer_schema["fields"]]
    assert fields[-1] == "_MAX_ROW_ID"  # Java's layout when nothing needs the pypaimon extras

    extended = [
        *metas,
        ManifestFileMeta(
            "manifest-a-2",
            5,
            1,
            0,
            SimpleStats.empty(),
            0,
            total_buckets=4,
            extra_files=["manifest-a-2.avro.sidecar"],
        ),
    ]
    data = encode_manifest_list(extended)
    assert decode_manifest_list(data) == extended
    fields = [f["name"] for f in fastavro.reader(io.BytesIO(data)).writer_schema["fields"]]
    assert fields[-3:] == ["_MAX_ROW_ID", "_TOTAL_BUCKETS", "_EXTRA_FILES"]


def test_index_manifest_round_trips_with_optional_fields_set_and_unset():
    partition = serialize_row(["a"], [STRING])
    index = [
        IndexManifestEntry(ADD, partition, 0, "HASH", "index-a-0", 8, 2),
        IndexManifestEntry(
            DELETE,
            EMPTY_ROW,
            1,
            "DELETION_VECTORS",
            "index-a-1",
            30,
            1,
            [
                {"f0": "data-1.parquet", "f1": 1, "f2": 20, "_CARDINALITY": 3},
                {"f0": "data-2.parquet", "f1": 21, "f2": 9, "_CARDINALITY": None},
            ],
            "s3://b/index-a-1",
            None,
        ),
        IndexManifestEntry(
            ADD,
            EMPTY_ROW,
            0,
            "btree",
            "index-a-2",
            99,
            7,
            None,
            None,
            {
                "_ROW_RANGE_START": 0,
                "_ROW_RANGE_END": 99,
                "_INDEX_FIELD_ID": 2,
                "_EXTRA_FIELD_IDS": [3],
                "_INDEX_META": b"\x00",
                "_SOURCE_META": None,
            },
        ),
    ]
    data = encode_index_manifest(index)
    assert decode_index_manifest(data) == index
    record = next(iter(fastavro.reader(io.BytesIO(data))))
    assert record["_VERSION"] == 1


def test_index_manifest_fills_absent_optional_subfields():
    short = IndexManifestEntry(
        ADD, EMPTY_ROW, 0, "DELETION_VECTORS", "index-0", 1, 1, [{"f0": "d", "f1": 1, "f2": 2}]
    )
    (decoded,) = decode_index_manifest(encode_index_manifest([short]))
    assert decoded.deletion_vector_ranges == [{"f0": "d", "f1": 1, "f2": 2, "_CARDINALITY": None}]


def test_write_and_read_through_fileio_report_exact_sizes(tmp_path):
    file_io = FileIO.for_path(str(tmp_path))
    entries = [ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())]
    size = write_manifest(file_io, str(tmp_path / "manifest-0"), entries, "zstd")
    assert size == (tmp_path / "manifest-0").stat().st_size
    assert read_manifest(file_io, str(tmp_path / "manifest-0"), expected_size=size) == entries
    metas = [manifest_file_meta("manifest-0", size, entries, 0, [])]
    list_size = write_manifest_list(file_io, str(tmp_path / "manifest-list-0"), metas, "zstd")
    assert list_size == (tmp_path / "manifest-list-0").stat().st_size
    assert read_manifest_list(file_io, str(tmp_path / "manifest-list-0"), expected_size=list_size) == metas
    index = [IndexManifestEntry(ADD, EMPTY_ROW, 0, "HASH", "index-0", 8, 2)]
    index_size = write_index_manifest(file_io, str(tmp_path / "index-manifest-0"), index, "none")
    assert index_size == (tmp_path / "index-manifest-0").stat().st_size
    assert read_index_manifest(file_io, str(tmp_path / "index-manifest-0")) == index


def test_models_pickle_and_entries_identify_files():
    entry = ManifestEntry(ADD, EMPTY_ROW, 2, 4, full_file())
    assert pickle.loads(pickle.dumps(entry)) == entry
    meta = ManifestFileMeta("m", 1, 1, 0, SimpleStats.empty(), 0, total_buckets=2, extra_files=["s"])
    assert pickle.loads(pickle.dumps(meta)) == meta

    deleted = delete_entry(entry)
    assert deleted.kind == DELETE and entry.is_add and not deleted.is_add
    assert deleted.file is entry.file and deleted.identifier() == entry.identifier()
    assert entry.identifier() == (
        EMPTY_ROW,
        2,
        1,
        "data-x-0.parquet",
        ("data-x-0.parquet.index",),
        b"\x01\x02",
        "s3://bucket/x/data-x-0.parquet",
    )
    upgraded = ManifestEntry(ADD, EMPTY_ROW, 2, 4, full_file(level=2))
    assert upgraded.identifier() != entry.identifier()  # same name, other level: another file
    with pytest.raises(ValueError):
        deleted.as_delete()
    assert SimpleStats.EMPTY == SimpleStats.empty() == SimpleStats(EMPTY_ROW, EMPTY_ROW, [])


# -- creation time ------------------------------------------------------------------------------------


@pytest.fixture
def tokyo_local_time() -> Iterator[None]:
    """Run with a non-UTC local time zone: nothing may depend on the process's zone."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_creation_time_is_wall_clock_stored_as_utc_millis(tokyo_local_time):
    wall_clock = dt.datetime(2024, 1, 2, 3, 4, 5, 678_999)
    data = encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(creation_time=wall_clock))])
    raw = next(iter(fastavro.reader(io.BytesIO(data))))["_FILE"]["_CREATION_TIME"]
    assert raw == dt.datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=dt.timezone.utc)  # millis, as UTC
    (entry,) = decode_manifest(data)
    assert entry.file.creation_time == dt.datetime(2024, 1, 2, 3, 4, 5, 678_000)
    assert entry.file.creation_time.tzinfo is None
    assert decode_manifest(encode_manifest([entry])) == [entry]  # re-encodes to the same millis


def test_aware_creation_time_is_written_as_its_utc_wall_clock():
    aware = dt.datetime(2024, 1, 2, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    (entry,) = decode_manifest(
        encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(creation_time=aware))])
    )
    assert entry.file.creation_time == dt.datetime(2024, 1, 2, 10, 0)


# -- Java's writer shape --------------------------------------------------------------------------------


def _shape(avro_type: Any) -> Any:
    """A schema type reduced to what readers compare: type names, union branches, record field lists."""
    if isinstance(avro_type, list):
        return [_shape(t) for t in avro_type]
    if isinstance(avro_type, dict):
        if avro_type["type"] == "record":
            return [(f["name"], _shape(f["type"])) for f in avro_type["fields"]]
        if avro_type["type"] == "array":
            return {"array": _shape(avro_type["items"])}
        return (
            avro_type["type"]
            if "logicalType" not in avro_type
            else (avro_type["type"], avro_type["logicalType"])
        )
    return avro_type


def test_written_manifest_has_javas_layout_and_record_names():
    data = encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())])
    reader = fastavro.reader(io.BytesIO(data))
    schema = reader.writer_schema
    assert reader.codec == "zstandard"
    assert [
        (f["name"], f["type"] if isinstance(f["type"], str) else f["type"]["type"]) for f in schema["fields"]
    ] == [
        ("_VERSION", "int"),
        ("_KIND", "int"),
        ("_PARTITION", "bytes"),
        ("_BUCKET", "int"),
        ("_TOTAL_BUCKETS", "int"),
        ("_FILE", "record"),  # a plain record, not a union
    ]
    file_record = schema["fields"][5]["type"]
    assert [f["name"] for f in file_record["fields"]] == list(FILE_FIELDS.values())
    header = json.loads(reader.metadata["avro.schema"])
    assert header["name"] == "org.apache.paimon.avro.generated.record"
    names = {f["name"]: f["type"] for f in header["fields"][5]["type"]["fields"]}
    assert header["fields"][5]["type"]["name"] == "org.apache.paimon.avro.generated.record__FILE"
    assert names["_KEY_STATS"]["name"] == "org.apache.paimon.avro.generated.record__FILE__KEY_STATS"
    assert names["_VALUE_STATS"]["name"] == "org.apache.paimon.avro.generated.record__FILE__VALUE_STATS"
    assert names["_CREATION_TIME"] == ["null", {"type": "long", "logicalType": "timestamp-millis"}]
    assert names["_EXTRA_FILES"] == {"type": "array", "items": "string"}
    assert names["_KEY_STATS"]["fields"][2] == {
        "name": "_NULL_COUNTS",
        "type": ["null", {"type": "array", "items": ["null", "long"]}],
        "default": None,
    }
    for field in header["fields"][5]["type"]["fields"][12:]:
        assert field["type"][0] == "null" and len(field["type"]) == 2 and field["default"] is None, field

    list_header = json.loads(
        fastavro.reader(io.BytesIO(encode_manifest_list([manifest_file_meta("m", 1, [], 0, [])]))).metadata[
            "avro.schema"
        ]
    )
    assert (
        list_header["fields"][5]["type"]["name"] == "org.apache.paimon.avro.generated.record__PARTITION_STATS"
    )


@needs_samples
@pytest.mark.parametrize(
    ("kind", "encode", "extra_ours"),
    [
        ("manifest", lambda: encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())]), []),
        (
            "manifest-list",
            lambda: encode_manifest_list([manifest_file_meta("m", 1, [], 0, [])]),
            ["_TOTAL_BUCKETS", "_EXTRA_FILES"],
        ),
        (
            "index-manifest",
            lambda: encode_index_manifest([IndexManifestEntry(ADD, EMPTY_ROW, 0, "HASH", "i", 1, 1)]),
            [],
        ),
    ],
)
def test_written_layout_matches_the_real_writer_schemas(kind, encode, extra_ours):
    """Same field names, order and types as the files pypaimon 2.1.0 wrote (bar the pypaimon-only extras)."""
    theirs = json.loads((SAMPLES / f"avro-writer-schema.{kind}.json").read_text())["writer_schema"]
    ours = fastavro.reader(io.BytesIO(encode())).writer_schema
    their_shape = [f for f in _shape(theirs) if f[0] not in extra_ours]
    assert _shape(ours) == their_shape


@needs_samples
def test_record_bytes_identical_to_the_real_writer_schema():
    """The block payload equals what the real writer schema encodes: Java's raw block copy applies."""
    document = json.loads((SAMPLES / "manifest.pk_fixed.snap3-delta.json").read_text())
    theirs = json.loads((SAMPLES / "avro-writer-schema.manifest.json").read_text())["writer_schema"]
    records = [_from_sample(r) for r in document["records"]]
    ours = encode_manifest(decode_manifest(_avro(theirs, records, "null")), "none")
    assert _block_payload(ours) == _block_payload(_avro(theirs, records, "null"))


def _block_payload(data: bytes) -> bytes:
    return b"".join(block.bytes_.getvalue() for block in fastavro.block_reader(io.BytesIO(data)))


# -- reading every writer's shape -----------------------------------------------------------------------


def _from_sample(value: Any) -> Any:
    """A sample record as fastavro takes it: hex "0x.." -> bytes, ISO time -> datetime, no *__decoded."""
    if isinstance(value, dict):
        result = {
            k: _from_sample(v) for k, v in value.items() if not k.endswith("__decoded") and k != "__columns"
        }
        if isinstance(result.get("_CREATION_TIME"), str):
            result["_CREATION_TIME"] = dt.datetime.fromisoformat(result["_CREATION_TIME"])
        return result
    if isinstance(value, list):
        return [_from_sample(v) for v in value]
    if isinstance(value, str) and value.startswith("0x"):
        return bytes.fromhex(value[2:])
    return value


def _avro(schema: Any, records: list[Any], codec: str = "null") -> bytes:
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(copy.deepcopy(schema)), records, codec=codec)
    return buffer.getvalue()


def _assert_stats(stats: SimpleStats, record: dict[str, Any]) -> None:
    assert (stats.min_values, stats.max_values) == (record["_MIN_VALUES"], record["_MAX_VALUES"])
    assert stats.null_counts == (record["_NULL_COUNTS"] or [])


def _assert_file(meta: DataFileMeta, record: dict[str, Any]) -> None:
    for name, avro_name in FILE_FIELDS.items():
        value = getattr(meta, name)
        if avro_name in ("_KEY_STATS", "_VALUE_STATS"):
            _assert_stats(value, record[avro_name])
        elif avro_name == "_CREATION_TIME":
            assert value == record[avro_name].astimezone(dt.timezone.utc).replace(tzinfo=None)
        else:
            assert value == record.get(avro_name), avro_name


@needs_samples
@pytest.mark.parametrize(
    "sample",
    [
        "manifest.append_parted.json",
        "manifest.dropped_part.snap4-delete.json",
        "manifest.pk_fixed.snap3-delta.json",
    ],
)
def test_manifests_in_the_real_writer_schema_decode(sample):
    schema = json.loads((SAMPLES / "avro-writer-schema.manifest.json").read_text())
    document = json.loads((SAMPLES / sample).read_text())
    records = [_from_sample(r) for r in document["records"]]
    entries = decode_manifest(_avro(schema["writer_schema"], records, schema["codec"]), sample)
    assert len(entries) == document["record_count"] == len(records)
    for entry, record in zip(entries, records, strict=True):
        assert (entry.kind, entry.partition, entry.bucket, entry.total_buckets) == (
            record["_KIND"],
            record["_PARTITION"],
            record["_BUCKET"],
            record["_TOTAL_BUCKETS"],
        )
        _assert_file(entry.file, record["_FILE"])


@needs_samples
def test_sample_values_decode_as_documented():
    document = json.loads((SAMPLES / "manifest.pk_fixed.snap3-delta.json").read_text())
    schema = json.loads((SAMPLES / "avro-writer-schema.manifest.json").read_text())["writer_schema"]
    entry = decode_manifest(_avro(schema, [_from_sample(r) for r in document["records"]]))[0]
    assert deserialize_row(entry.file.min_key, [BIGINT]) == [1]
    assert deserialize_row(entry.file.max_key, [BIGINT]) == [4]
    assert entry.total_buckets == 4 and entry.file.value_stats_cols == [] and entry.file.file_source == 0
    assert entry.file.creation_time == dt.datetime(2026, 11, 22, 10, 44, 1, 285_000)


@needs_samples
@pytest.mark.parametrize(
    "sample", ["manifest-list.append_parted.snap5-base.json", "manifest-list.pk_fixed.snap3-delta.json"]
)
def test_manifest_lists_in_the_real_writer_schema_decode(sample):
    schema = json.loads((SAMPLES / "avro-writer-schema.manifest-list.json").read_text())
    document = json.loads((SAMPLES / sample).read_text())
    records = [_from_sample(r) for r in document["records"]]
    metas = decode_manifest_list(_avro(schema["writer_schema"], records, schema["codec"]), sample)
    assert len(metas) == document["record_count"] == len(records)
    for meta, record in zip(metas, records, strict=True):
        for name, avro_name in META_FIELDS.items():
            if avro_name == "_PARTITION_STATS":
                _assert_stats(meta.partition_stats, record[avro_name])
            else:
                assert getattr(meta, name) == record.get(avro_name), avro_name
    if sample.startswith("manifest-list.append_parted"):
        assert deserialize_row(metas[0].partition_stats.min_values, [STRING]) == ["2024-01-01"]


@needs_samples
def test_index_manifest_in_the_real_writer_schema_decodes():
    schema = json.loads((SAMPLES / "avro-writer-schema.index-manifest.json").read_text())
    document = json.loads((SAMPLES / "index-manifest.pk_dynamic.snap2.json").read_text())
    records = [_from_sample(r) for r in document["records"]]
    records.append(
        {
            **records[0],
            "_INDEX_TYPE": "DELETION_VECTORS",
            "_DELETIONS_VECTORS_RANGES": [{"f0": "data-1.parquet", "f1": 1, "f2": 24, "_CARDINALITY": 5}],
            "_GLOBAL_INDEX": {"_ROW_RANGE_START": 0, "_ROW_RANGE_END": 9, "_INDEX_FIELD_ID": 1},
        }
    )
    entries = decode_index_manifest(
        _avro(schema["writer_schema"], records, schema["codec"]), "index-manifest"
    )
    assert [
        (e.kind, e.partition, e.bucket, e.index_type, e.file_name, e.file_size, e.row_count) for e in entries
    ] == [
        (
            r["_KIND"],
            r["_PARTITION"],
            r["_BUCKET"],
            r["_INDEX_TYPE"],
            r["_FILE_NAME"],
            r["_FILE_SIZE"],
            r["_ROW_COUNT"],
        )
        for r in records
    ]
    assert deserialize_row(entries[1].partition, [STRING]) == ["b"]
    assert entries[0].deletion_vector_ranges is None and entries[0].global_index is None
    assert entries[2].deletion_vector_ranges == [
        {"f0": "data-1.parquet", "f1": 1, "f2": 24, "_CARDINALITY": 5}
    ]
    assert entries[2].global_index == {
        "_ROW_RANGE_START": 0,
        "_ROW_RANGE_END": 9,
        "_INDEX_FIELD_ID": 1,
        "_EXTRA_FIELD_IDS": None,
        "_INDEX_META": None,
        "_SOURCE_META": None,
    }


def _stats_schema(name: str, nullable: bool) -> Any:
    record = {
        "type": "record",
        "name": name,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            {
                "name": "_NULL_COUNTS",
                "type": ["null", {"type": "array", "items": ["null", "long"]}],
                "default": None,
            },
        ],
    }
    return ["null", record] if nullable else record


def _old_file_schema(nullable_stats: bool) -> dict[str, Any]:
    """DataFileMeta as Paimon 0.5-0.7 wrote it: fields 0-12 only."""
    return {
        "type": "record",
        "name": "record__FILE",
        "fields": [
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_ROW_COUNT", "type": "long"},
            {"name": "_MIN_KEY", "type": "bytes"},
            {"name": "_MAX_KEY", "type": "bytes"},
            {"name": "_KEY_STATS", "type": _stats_schema("record__FILE__KEY_STATS", nullable_stats)},
            {"name": "_VALUE_STATS", "type": _stats_schema("record__FILE__VALUE_STATS", nullable_stats)},
            {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
            {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
            {"name": "_SCHEMA_ID", "type": "long"},
            {"name": "_LEVEL", "type": "int"},
            {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
            {
                "name": "_CREATION_TIME",
                "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
                "default": None,
            },
        ],
    }


def _old_file_record(**changes: Any) -> dict[str, Any]:
    record = {
        "_FILE_NAME": "data-old.orc",
        "_FILE_SIZE": 9,
        "_ROW_COUNT": 1,
        "_MIN_KEY": EMPTY_ROW,
        "_MAX_KEY": EMPTY_ROW,
        "_KEY_STATS": {"_MIN_VALUES": EMPTY_ROW, "_MAX_VALUES": EMPTY_ROW, "_NULL_COUNTS": []},
        "_VALUE_STATS": {"_MIN_VALUES": EMPTY_ROW, "_MAX_VALUES": EMPTY_ROW, "_NULL_COUNTS": None},
        "_MIN_SEQUENCE_NUMBER": 0,
        "_MAX_SEQUENCE_NUMBER": 0,
        "_SCHEMA_ID": 0,
        "_LEVEL": 0,
        "_EXTRA_FILES": [],
        "_CREATION_TIME": dt.datetime(2023, 6, 1, 8, 0, tzinfo=dt.timezone.utc),
    }
    record.update(changes)
    return record


def _entry_schema(
    file_schema: Any, total_buckets: bool = True, extra: list[Any] | None = None
) -> dict[str, Any]:
    fields = [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
    ]
    if total_buckets:
        fields.append({"name": "_TOTAL_BUCKETS", "type": "int"})
    fields.append({"name": "_FILE", "type": file_schema})
    return {"type": "record", "name": "record", "fields": fields + (extra or [])}


def test_old_0_5_data_file_shape_decodes_with_defaults():
    schema = _entry_schema(_old_file_schema(nullable_stats=False))
    record = {
        "_VERSION": 2,
        "_KIND": 0,
        "_PARTITION": EMPTY_ROW,
        "_BUCKET": 0,
        "_TOTAL_BUCKETS": 2,
        "_FILE": _old_file_record(),
    }
    (entry,) = decode_manifest(_avro(schema, [record]), "manifest-old")
    f = entry.file
    assert (f.file_name, f.file_size, f.row_count, f.level, entry.total_buckets) == (
        "data-old.orc",
        9,
        1,
        0,
        2,
    )
    assert f.creation_time == dt.datetime(2023, 6, 1, 8, 0)
    assert f.value_stats.null_counts == []  # `_NULL_COUNTS` null -> []
    for name in OPTIONAL_FILE_FIELDS[1:]:
        assert getattr(f, name) is None, name


def test_nullable_top_level_and_nested_records_decode():
    """paimon-rust style: `["null", record]` at the top level and for the stats records."""
    schema = ["null", _entry_schema(_old_file_schema(nullable_stats=True), total_buckets=False)]
    record = {
        "_VERSION": 2,
        "_KIND": 1,
        "_PARTITION": EMPTY_ROW,
        "_BUCKET": 3,
        "_FILE": _old_file_record(_KEY_STATS=None, _CREATION_TIME=None),
    }
    (entry,) = decode_manifest(_avro(schema, [record]), "manifest-rust")
    assert (entry.kind, entry.bucket, entry.total_buckets) == (DELETE, 3, -1)
    assert entry.file.key_stats == SimpleStats.empty() and entry.file.creation_time is None


def test_nullable_partition_stats_in_a_manifest_list_decode():
    list_schema = copy.deepcopy(MANIFEST_FILE_META_SCHEMA)
    stats_field = list_schema["fields"][5]
    stats_field["type"] = ["null", stats_field["type"]]
    record = {
        "_VERSION": 2,
        "_FILE_NAME": "m",
        "_FILE_SIZE": 1,
        "_NUM_ADDED_FILES": 1,
        "_NUM_DELETED_FILES": 0,
        "_PARTITION_STATS": {"_MIN_VALUES": EMPTY_ROW, "_MAX_VALUES": EMPTY_ROW, "_NULL_COUNTS": None},
        "_SCHEMA_ID": 0,
    }
    metas = decode_manifest_list(_avro(["null", list_schema], [record, {**record, "_PARTITION_STATS": None}]))
    assert [m.partition_stats for m in metas] == [SimpleStats.empty()] * 2
    assert metas[0].min_bucket is None and metas[0].total_buckets is None


def test_unknown_fields_are_ignored():
    file_schema = _old_file_schema(nullable_stats=False)
    file_schema["fields"].append({"name": "_SOME_FUTURE_FIELD", "type": ["null", "string"], "default": None})
    schema = _entry_schema(file_schema, extra=[{"name": "_ANOTHER", "type": "long"}])
    record = {
        "_VERSION": 2,
        "_KIND": 0,
        "_PARTITION": EMPTY_ROW,
        "_BUCKET": 0,
        "_TOTAL_BUCKETS": 1,
        "_ANOTHER": 5,
        "_FILE": _old_file_record(_SOME_FUTURE_FIELD="x"),
    }
    (entry,) = decode_manifest(_avro(schema, [record]))
    assert entry.file.file_name == "data-old.orc"


# -- broken files -----------------------------------------------------------------------------------------


def test_truncated_and_garbage_manifests_raise_naming_the_path(tmp_path):
    entries = [ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(file_name=f"d{i}")) for i in range(50)]
    data = encode_manifest(entries)
    broken = [
        data[: len(data) // 2],
        data[:-3],
        data[:20],
        b"garbage bytes that are not avro",
        b"",
        data + b"xyz",
    ]
    for blob in broken:
        with pytest.raises(CorruptFileError, match="manifest-broken"):
            decode_manifest(blob, "manifest-broken")
        with pytest.raises(CorruptFileError, match="list-broken"):
            decode_manifest_list(blob, "list-broken")
        with pytest.raises(CorruptFileError, match="index-broken"):
            decode_index_manifest(blob, "index-broken")
    with pytest.raises(MissingFileError):
        read_manifest(FileIO.for_path(str(tmp_path)), str(tmp_path / "manifest-missing"))


def test_truncation_at_a_block_boundary_is_caught_by_the_recorded_size(tmp_path):
    """Avro cut after a whole block is still valid Avro; the size in the referencing metadata catches it."""
    file_io = FileIO.for_path(str(tmp_path))
    data = encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())])
    header_only = encode_manifest([])
    (tmp_path / "manifest-cut").write_bytes(header_only)
    with pytest.raises(CorruptFileError, match="manifest-cut"):
        read_manifest(file_io, str(tmp_path / "manifest-cut"), expected_size=len(data))


def test_manifest_file_is_checked_for_corrupt_content_in_the_middle():
    data = bytearray(encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())] * 20, "none"))
    data[len(data) - 10] ^= 0xFF  # the trailing sync marker
    with pytest.raises(CorruptFileError, match="m-sync"):
        decode_manifest(bytes(data), "m-sync")


def _entry_record(**changes: Any) -> dict[str, Any]:
    record = {
        "_VERSION": 2,
        "_KIND": 0,
        "_PARTITION": EMPTY_ROW,
        "_BUCKET": 0,
        "_TOTAL_BUCKETS": 1,
        "_FILE": _old_file_record(),
    }
    record.update(changes)
    return record


def test_wrong_version_kind_null_record_and_missing_fields_are_corrupt():
    schema = _entry_schema(_old_file_schema(nullable_stats=False))
    with pytest.raises(CorruptFileError, match="m-v1.*recreate the table"):
        decode_manifest(_avro(schema, [_entry_record(_VERSION=1)]), "m-v1")
    with pytest.raises(CorruptFileError, match="m-v3.*_VERSION 2, got 3"):
        decode_manifest(_avro(schema, [_entry_record(), _entry_record(_VERSION=3)]), "m-v3")
    with pytest.raises(CorruptFileError, match="m-kind"):
        decode_manifest(_avro(schema, [_entry_record(_KIND=7)]), "m-kind")
    with pytest.raises(CorruptFileError, match="m-null.*null"):
        decode_manifest(_avro(["null", schema], [None]), "m-null")

    no_name = _old_file_schema(nullable_stats=False)
    no_name["fields"] = no_name["fields"][1:]
    record = _entry_record(_FILE={k: v for k, v in _old_file_record().items() if k != "_FILE_NAME"})
    with pytest.raises(CorruptFileError, match="m-missing.*_FILE_NAME"):
        decode_manifest(_avro(_entry_schema(no_name), [record]), "m-missing")

    index = [IndexManifestEntry(ADD, EMPTY_ROW, 0, "HASH", "i", 1, 1)]
    with pytest.raises(CorruptFileError, match="index-as-manifest"):
        decode_manifest(encode_index_manifest(index), "index-as-manifest")  # _VERSION 1, no _FILE
    with pytest.raises(CorruptFileError, match="list-as-index"):
        decode_index_manifest(encode_manifest_list([manifest_file_meta("m", 1, [], 0, [])]), "list-as-index")


def test_streaming_yields_entries_then_raises_on_the_broken_tail():
    schema = _entry_schema(_old_file_schema(nullable_stats=False))
    entries = [ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(file_name=f"d{i}")) for i in range(3)]
    good = _avro(schema, [_entry_record(), _entry_record(), _entry_record(_VERSION=9)])
    stream = iter_manifest_entries(good, "m-stream")
    assert next(stream).file.file_name == "data-old.orc"
    assert next(stream).file.file_name == "data-old.orc"
    with pytest.raises(CorruptFileError, match="m-stream"):
        next(stream)
    assert [e.file.file_name for e in iter_manifest_entries(encode_manifest(entries))] == ["d0", "d1", "d2"]


def test_unsupported_compression_is_refused():
    with pytest.raises(ValueError, match="manifest.compression"):
        encode_manifest([], "lz4")
    assert avro_codec("ZSTD") == "zstandard" and avro_codec("none") == "null"


# -- manifest file metadata -------------------------------------------------------------------------------


def test_partition_stats_cover_every_entry_with_nulls():
    types = [STRING, INT]
    partitions = [["b", 2], ["a", None], ["c", 1], [None, 5], ["b", 2]]
    entries = [
        ManifestEntry(
            ADD if i != 2 else DELETE,
            serialize_row(p, types),
            i,
            4,
            full_file(file_name=f"f{i}", level=i % 3, schema_id=i),
        )
        for i, p in enumerate(partitions)
    ]
    meta = manifest_file_meta("m", 10, entries, 9, types)
    assert deserialize_row(meta.partition_stats.min_values, types) == ["a", 1]
    assert deserialize_row(meta.partition_stats.max_values, types) == ["c", 5]
    assert meta.partition_stats.null_counts == [1, 1]  # per entry, not per distinct partition
    assert (meta.num_added_files, meta.num_deleted_files) == (4, 1)
    assert (meta.min_bucket, meta.max_bucket, meta.min_level, meta.max_level) == (0, 4, 0, 2)
    assert meta.schema_id == 4  # max over entries
    assert (meta.total_buckets, meta.extra_files) == (None, None)


def test_partition_stats_all_null_column_and_java_float_order():
    types = [INT, parse_type("DOUBLE")]
    entries = [
        ManifestEntry(ADD, serialize_row([None, d], types), 0, 1, full_file(file_name=str(i)))
        for i, d in enumerate([1.5, float("nan"), -0.0, 0.0])
    ]
    stats = manifest_file_meta("m", 1, entries, 0, types).partition_stats
    minimum = deserialize_row(stats.min_values, types)
    maximum = deserialize_row(stats.max_values, types)
    assert minimum[0] is None and maximum[0] is None and stats.null_counts == [4, 0]
    assert minimum[1] == 0.0 and math.copysign(1.0, minimum[1]) == -1.0  # Double.compare: -0.0 < 0.0
    assert math.isnan(maximum[1])  # NaN sorts above everything


def test_manifest_meta_row_ids_and_empty_manifests():
    with_ids = [
        ManifestEntry(ADD, EMPTY_ROW, 0, 1, full_file(first_row_id=100, row_count=10)),
        ManifestEntry(ADD, EMPTY_ROW, 0, 1, full_file(first_row_id=50, row_count=5)),
    ]
    meta = manifest_file_meta("m", 1, with_ids, 0, [])
    assert (meta.min_row_id, meta.max_row_id) == (50, 109)
    mixed = [*with_ids, ManifestEntry(ADD, EMPTY_ROW, 0, 1, full_file(first_row_id=None))]
    meta = manifest_file_meta("m", 1, mixed, 0, [])
    assert (meta.min_row_id, meta.max_row_id) == (None, None)
    empty = manifest_file_meta("m", 1, [], 7, [STRING])
    assert empty.schema_id == 7 and empty.min_bucket is None and empty.min_level is None
    assert empty.partition_stats.null_counts == [0] and deserialize_row(
        empty.partition_stats.min_values, [STRING]
    ) == [None]
    assert manifest_file_meta("m", 1, with_ids, 0, []).partition_stats == SimpleStats.empty()


# -- rolling writes ------------------------------------------------------------------------------------


def test_rolling_write_splits_at_the_target_size(tmp_path):
    file_io = FileIO.for_path(str(tmp_path))
    names = iter(f"manifest-r-{i}" for i in range(100))
    types = [STRING]
    entries = [
        ManifestEntry(
            ADD, serialize_row([f"p{i // 1000}"], types), i % 3, 3, full_file(file_name=f"data-{i}.parquet")
        )
        for i in range(3000)
    ]
    target = 16_000
    metas = rolling_write_manifests(
        file_io, str(tmp_path), lambda: next(names), entries, target, "zstd", types, 0
    )
    assert len(metas) > 1
    assert sum(m.num_added_files for m in metas) == 3000
    assert [
        e for m in metas for e in read_manifest(file_io, str(tmp_path / m.file_name), m.file_size)
    ] == entries
    for meta in metas:
        size = (tmp_path / meta.file_name).stat().st_size
        assert size == meta.file_size
        assert size < 2 * target  # rolled within about one block of the target
        assert meta == manifest_file_meta(
            meta.file_name, size, read_manifest(file_io, str(tmp_path / meta.file_name)), 0, types
        )
    assert (
        rolling_write_manifests(file_io, str(tmp_path), lambda: next(names), [], target, "zstd", types, 0)
        == []
    )


def test_rolling_write_removes_its_files_when_a_write_fails(tmp_path):
    real = FileIO.for_path(str(tmp_path))

    class FailingSecondWrite:
        """Delegates to a real FileIO; the second write fails."""

        writes = 0

        def join(self, *parts: str) -> str:
            return real.join(*parts)

        def delete(self, path: str) -> bool:
            return real.delete(path)

        def write_bytes(self, path: str, data: bytes) -> None:
            self.writes += 1
            if self.writes == 2:
                raise OSError("disk full")
            real.write_bytes(path, data)

    file_io: Any = FailingSecondWrite()
    names = iter(f"manifest-f-{i}" for i in range(10))
    entries = [ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(file_name=f"data-{i}")) for i in range(2000)]
    with pytest.raises(OSError, match="disk full"):
        rolling_write_manifests(file_io, str(tmp_path), lambda: next(names), entries, 8_000, "zstd", [], 0)
    assert not list(tmp_path.glob("manifest-f-*"))


# -- pypaimon reads what we write ---------------------------------------------------------------------


def test_pypaimon_reads_our_manifest_manifest_list_and_index_manifest(tmp_path):
    pytest.importorskip("pypaimon")
    import pypaimon
    from pypaimon.manifest.index_manifest_file import IndexManifestFile
    from pypaimon.manifest.manifest_file_manager import ManifestFileManager
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    from tests.support.factories import make_table

    root = f"{tmp_path}/db.db/t"
    make_table(root, primary_keys=("id", "dt"), options={"bucket": "2"})
    types = [BIGINT, STRING, STRING]
    partition = serialize_row(["2024-01-01"], [STRING])
    ours = [
        ManifestEntry(
            ADD,
            partition,
            1,
            2,
            full_file(
                value_stats=SimpleStats(
                    serialize_row([1, "2024-01-01", "a"], types),
                    serialize_row([4, "2024-01-01", "z"], types),
                    [0, 0, 1],
                ),
                value_stats_cols=None,
                write_cols=None,
                first_row_id=None,
                creation_time=dt.datetime(2024, 5, 6, 7, 8, 9, 123_000),
                schema_id=0,
            ),
        ),
        ManifestEntry(
            DELETE,
            partition,
            0,
            2,
            bare_file(
                file_name="data-y-0.parquet",
                value_stats_cols=[],
                schema_id=0,
                value_stats=SimpleStats.empty(),
            ),
        ),
    ]
    file_io = FileIO.for_path(root)
    size = write_manifest(file_io, f"{root}/manifest/manifest-ours-0", ours, "zstd")
    metas = [manifest_file_meta("manifest-ours-0", size, ours, 0, [STRING])]
    list_size = write_manifest_list(file_io, f"{root}/manifest/manifest-list-ours-0", metas, "zstd")
    index = [
        IndexManifestEntry(
            ADD,
            partition,
            1,
            "DELETION_VECTORS",
            "index-ours-0",
            40,
            2,
            [{"f0": "data-x-0.parquet", "f1": 1, "f2": 30, "_CARDINALITY": 2}],
            None,
            None,
        )
    ]
    write_index_manifest(file_io, f"{root}/manifest/index-manifest-ours-0", index, "zstd")

    table = pypaimon.CatalogFactory.create({"warehouse": str(tmp_path)}).get_table("db.t")
    theirs = ManifestFileManager(table).read("manifest-ours-0", drop_stats=False, file_size=size)
    assert len(theirs) == len(ours)
    for their, our in zip(theirs, ours, strict=True):
        assert (their.kind, their.bucket, their.total_buckets) == (our.kind, our.bucket, our.total_buckets)
        assert their.partition.values == ["2024-01-01"]
        f, g = their.file, our.file
        for name in FILE_FIELDS:
            if name in ("min_key", "max_key"):
                assert getattr(f, name).values == deserialize_row(getattr(g, name), [BIGINT])
            elif name in ("key_stats", "value_stats"):
                assert list(getattr(f, name).null_counts) == getattr(g, name).null_counts
            elif name == "creation_time":
                expected = (
                    None
                    if g.creation_time is None
                    else (g.creation_time - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
                )
                assert (None if f.creation_time is None else f.creation_time.get_millisecond()) == expected
            else:
                assert getattr(f, name) == getattr(g, name), name

    (their_meta,) = ManifestListManager(table).read("manifest-list-ours-0", list_size)
    for name in META_FIELDS:
        if name == "partition_stats":
            assert their_meta.partition_stats.null_counts == metas[0].partition_stats.null_counts
            assert their_meta.partition_stats.min_values.get_field(0) == "2024-01-01"
        else:
            assert getattr(their_meta, name) == getattr(metas[0], name), name

    (their_index,) = IndexManifestFile(table).read("index-manifest-ours-0")
    assert (their_index.kind, their_index.bucket, their_index.partition.values) == (ADD, 1, ["2024-01-01"])
    meta = their_index.index_file
    assert (meta.index_type, meta.file_name, meta.file_size, meta.row_count) == (
        "DELETION_VECTORS",
        "index-ours-0",
        40,
        2,
    )
    dv = meta.dv_ranges["data-x-0.parquet"]
    assert (dv.offset, dv.length, dv.cardinality) == (1, 30, 2)
