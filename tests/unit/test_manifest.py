"""Avro manifests: Java's writer shape, round trips, every reader shape, and broken files."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import fastavro
import pytest

from paimon_format.binary_row import EMPTY_ROW, deserialize_row, serialize_row
from paimon_format.errors import CorruptFileError, MissingFileError
from paimon_format.fileio import FileIO
from paimon_format.manifest import (
    ADD,
    DELETE,
    DataFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_index_manifest,
    encode_manifest,
    encode_manifest_list,
    manifest_file_meta,
    read_manifest,
    rolling_write_manifests,
)
from paimon_format.types import parse_type

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "samples"


def full_file(**changes) -> DataFileMeta:
    values = dict(
        file_name="data-x-0.parquet",
        file_size=123,
        row_count=4,
        min_key=EMPTY_ROW,
        max_key=EMPTY_ROW,
        key_stats=SimpleStats.empty(),
        value_stats=SimpleStats(EMPTY_ROW, EMPTY_ROW, [None, 2]),
        min_sequence_number=1,
        max_sequence_number=4,
        schema_id=0,
        level=1,
        extra_files=["data-x-0.parquet.index"],
        creation_time=dt.datetime(2024, 1, 2, 3, 4, 5, 6000),
        delete_row_count=1,
        embedded_index=b"\x01",
        file_source=1,
        value_stats_cols=["a"],
        external_path="s3://b/x",
        first_row_id=10,
        write_cols=["a"],
        write_cols_sequences=[7],
    )
    values.update(changes)
    return DataFileMeta(**values)


def test_manifest_entries_round_trip_with_every_optional_field_set_and_unset():
    bare = full_file(
        creation_time=None,
        delete_row_count=None,
        embedded_index=None,
        file_source=None,
        value_stats_cols=None,
        external_path=None,
        first_row_id=None,
        write_cols=None,
        write_cols_sequences=None,
        extra_files=[],
    )
    entries = [
        ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file()),
        ManifestEntry(DELETE, EMPTY_ROW, 3, 4, bare),
    ]
    assert decode_manifest(encode_manifest(entries)) == entries


def test_manifest_list_and_index_manifest_round_trip():
    metas = [ManifestFileMeta("manifest-a-0", 10, 2, 1, SimpleStats.empty(), 0, 0, 3, 0, 1, None, None)]
    assert decode_manifest_list(encode_manifest_list(metas)) == metas
    index = [
        IndexManifestEntry(ADD, EMPTY_ROW, 0, "HASH", "index-a-0", 8, 2),
        IndexManifestEntry(
            ADD,
            EMPTY_ROW,
            1,
            "DELETION_VECTORS",
            "index-a-1",
            30,
            1,
            [{"f0": "data-1.parquet", "f1": 1, "f2": 20, "_CARDINALITY": 3}],
        ),
    ]
    assert decode_index_manifest(encode_index_manifest(index)) == index


def test_written_manifest_has_javas_top_level_layout():
    data = encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())])
    schema = fastavro.reader(io.BytesIO(data)).writer_schema
    assert [
        (f["name"], f["type"] if isinstance(f["type"], str) else f["type"]["type"]) for f in schema["fields"]
    ] == [
        ("_VERSION", "int"),
        ("_KIND", "int"),
        ("_PARTITION", "bytes"),
        ("_BUCKET", "int"),
        ("_TOTAL_BUCKETS", "int"),
        ("_FILE", "record"),
    ]
    assert fastavro.reader(io.BytesIO(data)).codec == "zstandard"


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared/spec/samples not present")
def test_pypaimon_writer_shapes_decode():
    for sample, decoder in [
        ("manifest.pk_fixed.snap3-delta.json", decode_manifest),
        ("manifest-list.append_parted.snap5-base.json", decode_manifest_list),
        ("index-manifest.pk_dynamic.snap2.json", decode_index_manifest),
    ]:
        document = json.loads((SAMPLES / sample).read_text())
        records = [_from_sample(r) for r in document["records"]]
        buffer = io.BytesIO()
        fastavro.writer(buffer, fastavro.parse_schema(document["writer_schema"]), records, codec="null")
        decoded = decoder(buffer.getvalue(), sample)
        assert len(decoded) == document["record_count"]
    entry = decode_manifest(_sample_bytes("manifest.pk_fixed.snap3-delta.json"))[0]
    assert deserialize_row(entry.file.min_key, [parse_type("BIGINT")]) == [1]
    assert entry.total_buckets == 4 and entry.file.value_stats_cols == []


def _from_sample(value):
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if key.endswith("__decoded") or key == "__columns":
                continue
            result[key] = _from_sample(item)
        if "_CREATION_TIME" in result and isinstance(result["_CREATION_TIME"], str):
            result["_CREATION_TIME"] = dt.datetime.fromisoformat(result["_CREATION_TIME"])
        return result
    if isinstance(value, list):
        return [_from_sample(v) for v in value]
    if isinstance(value, str) and value.startswith("0x"):
        return bytes.fromhex(value[2:])
    return value


def _sample_bytes(name: str) -> bytes:
    document = json.loads((SAMPLES / name).read_text())
    buffer = io.BytesIO()
    fastavro.writer(
        buffer,
        fastavro.parse_schema(document["writer_schema"]),
        [_from_sample(r) for r in document["records"]],
    )
    return buffer.getvalue()


def test_nullable_top_level_and_old_field_sets_decode():
    old_file = {
        "type": "record",
        "name": "F",
        "fields": [
            {"name": n, "type": t}
            for n, t in [
                ("_FILE_NAME", "string"),
                ("_FILE_SIZE", "long"),
                ("_ROW_COUNT", "long"),
                ("_MIN_KEY", "bytes"),
                ("_MAX_KEY", "bytes"),
            ]
        ]
        + [
            {
                "name": "_KEY_STATS",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "S1",
                        "fields": [
                            {"name": "_MIN_VALUES", "type": "bytes"},
                            {"name": "_MAX_VALUES", "type": "bytes"},
                            {
                                "name": "_NULL_COUNTS",
                                "type": ["null", {"type": "array", "items": ["null", "long"]}],
                            },
                        ],
                    },
                ],
            },
            {"name": "_VALUE_STATS", "type": ["null", "S1"]},
            {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
            {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
            {"name": "_SCHEMA_ID", "type": "long"},
            {"name": "_LEVEL", "type": "int"},
            {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        ],
    }
    schema = [
        "null",
        {
            "type": "record",
            "name": "E",
            "fields": [
                {"name": "_VERSION", "type": "int"},
                {"name": "_KIND", "type": "int"},
                {"name": "_PARTITION", "type": "bytes"},
                {"name": "_BUCKET", "type": "int"},
                {"name": "_FILE", "type": old_file},
            ],
        },
    ]
    record = {
        "_VERSION": 2,
        "_KIND": 0,
        "_PARTITION": EMPTY_ROW,
        "_BUCKET": 0,
        "_FILE": {
            "_FILE_NAME": "data-old.orc",
            "_FILE_SIZE": 9,
            "_ROW_COUNT": 1,
            "_MIN_KEY": EMPTY_ROW,
            "_MAX_KEY": EMPTY_ROW,
            "_KEY_STATS": None,
            "_VALUE_STATS": {"_MIN_VALUES": EMPTY_ROW, "_MAX_VALUES": EMPTY_ROW, "_NULL_COUNTS": None},
            "_MIN_SEQUENCE_NUMBER": 0,
            "_MAX_SEQUENCE_NUMBER": 0,
            "_SCHEMA_ID": 0,
            "_LEVEL": 0,
            "_EXTRA_FILES": [],
        },
    }
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), [record])
    (entry,) = decode_manifest(buffer.getvalue())
    assert entry.file.file_name == "data-old.orc" and entry.file.delete_row_count is None
    assert entry.file.value_stats.null_counts == [] and entry.file.key_stats == SimpleStats.empty()


def test_broken_manifests_raise_naming_the_path(tmp_path):
    data = encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file())])
    for broken in (data[: len(data) // 2], b"garbage bytes that are not avro", b""):
        with pytest.raises(CorruptFileError, match="manifest-broken"):
            decode_manifest(broken, "manifest-broken")
    with pytest.raises(MissingFileError):
        read_manifest(FileIO.for_path(str(tmp_path)), str(tmp_path / "manifest-missing"))


def test_partition_stats_cover_every_entry_with_nulls():
    types = [parse_type("STRING"), parse_type("INT")]
    entries = [
        ManifestEntry(ADD, serialize_row(p, types), 0, -1, full_file(file_name=f"f{i}"))
        for i, p in enumerate([["b", 2], ["a", None], ["c", 1]])
    ]
    meta = manifest_file_meta("m", 10, entries, 0, types)
    assert deserialize_row(meta.partition_stats.min_values, types) == ["a", 1]
    assert deserialize_row(meta.partition_stats.max_values, types) == ["c", 2]
    assert meta.partition_stats.null_counts == [0, 1]
    assert (meta.num_added_files, meta.min_level, meta.max_level) == (3, 1, 1)


def test_rolling_write_splits_at_the_target_size(tmp_path):
    file_io = FileIO.for_path(str(tmp_path))
    names = iter(f"manifest-r-{i}" for i in range(100))
    entries = [
        ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(file_name=f"data-{i}.parquet")) for i in range(3000)
    ]
    metas = rolling_write_manifests(
        file_io, str(tmp_path), lambda: next(names), entries, 4_000, "zstd", [], 0
    )
    assert len(metas) > 1
    assert sum(m.num_added_files for m in metas) == 3000
    assert [e.file.file_name for m in metas for e in read_manifest(file_io, str(tmp_path / m.file_name))] == [
        e.file.file_name for e in entries
    ]
    assert all((tmp_path / m.file_name).stat().st_size == m.file_size for m in metas)
