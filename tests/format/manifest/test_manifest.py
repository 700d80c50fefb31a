"""Avro manifests: round trips, the creation time, and Java's writer shape.

Reading every other writer's shape and broken files is test_manifest_reading.py; the manifest-list
record of a manifest, rolling writes and pypaimon reading our files are test_manifest_files.py.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pickle
import time
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest

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
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
    delete_entry,
)
from paimon_format.manifest.files import manifest_file_meta
from paimon_format.model.binary_row import EMPTY_ROW, serialize_row
from paimon_format.storage.fileio import FileIO
from tests.format.manifest.manifest_samples import (
    FILE_FIELDS,
    INT,
    OPTIONAL_FILE_FIELDS,
    STRING,
    bare_file,
    full_file,
)
from tests.support.samples import SAMPLES, needs_samples

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
