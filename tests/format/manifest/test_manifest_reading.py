"""Avro manifests: every writer's shape reads, and broken files raise naming the file.

The reader-shape tests build Avro files with the writer schemas pypaimon 2.1.0 really wrote
(shared/spec/samples/avro-writer-schema.*.json) filled with the sample records decoded from real
files, plus hand-made older (0.5) and nullable (paimon-rust) shapes.
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
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
    read_manifest,
)
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    DataFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    SimpleStats,
)
from paimon_format.manifest.files import manifest_file_meta
from paimon_format.manifest.schemas import MANIFEST_FILE_META_SCHEMA
from paimon_format.model.binary_row import EMPTY_ROW, deserialize_row
from paimon_format.storage.fileio import FileIO
from tests.format.manifest.manifest_samples import (
    BIGINT,
    FILE_FIELDS,
    META_FIELDS,
    OPTIONAL_FILE_FIELDS,
    STRING,
    full_file,
)
from tests.support.samples import SAMPLES, needs_samples

# -- the real writer schema -------------------------------------------------------------------------


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
