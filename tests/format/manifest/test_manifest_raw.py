"""Raw manifest entries (paimon_format/manifest/raw.py): datums copied into new manifests must be the
same entries the models read, for every writer layout, and broken files must fail as the models do."""

from __future__ import annotations

import copy
import datetime as dt
import io
from typing import Any

import fastavro
import pytest

from paimon_format.errors import CorruptFileError, InvalidTableStateError
from paimon_format.manifest.codec import decode_manifest, encode_manifest, entry_from_record, entry_to_record
from paimon_format.manifest.entries import ADD, DELETE, DataFileMeta, ManifestEntry, SimpleStats
from paimon_format.manifest.files import manifest_file_meta, rolling_write_raw_manifests
from paimon_format.manifest.raw import _padding_for, iter_raw_entries, iter_wanted_deletes, read_raw_manifest
from paimon_format.manifest.schemas import MANIFEST_ENTRY_SCHEMA
from paimon_format.model.binary_row import EMPTY_ROW, serialize_row
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.snapshot_scan import EntryMerger
from paimon_format.storage.fileio import FileIO

STRING, BIGINT = parse_type("STRING"), parse_type("BIGINT")


def _file(i: int, **changes: Any) -> DataFileMeta:
    values: dict[str, Any] = dict(
        file_name=f"data-{i}.parquet",
        file_size=100 + i,
        row_count=1 + i,
        min_key=serialize_row([i], [BIGINT]),
        max_key=serialize_row([i + 9], [BIGINT]),
        key_stats=SimpleStats(serialize_row([i], [BIGINT]), serialize_row([i + 9], [BIGINT]), [0]),
        value_stats=SimpleStats(EMPTY_ROW, EMPTY_ROW, []),
        min_sequence_number=i,
        max_sequence_number=i + 1,
        schema_id=i % 3,
        level=i % 4,
        extra_files=[f"data-{i}.parquet.index"] if i % 5 == 0 else [],
        creation_time=dt.datetime(2024, 1, 2, 3, 4, 5, 6000),
        delete_row_count=i % 2,
        embedded_index=b"\x01" if i % 7 == 0 else None,
        file_source=i % 2,
        external_path=f"s3://b/data-{i}.parquet" if i % 6 == 0 else None,
    )
    values.update(changes)
    return DataFileMeta(**values)


def _entries(count: int = 40) -> list[ManifestEntry]:
    partitions = [serialize_row([f"2024-01-0{d}"], [STRING]) for d in range(1, 4)]
    return [
        ManifestEntry(DELETE if i % 9 == 4 else ADD, partitions[i % 3], i % 2, 2, _file(i))
        for i in range(count)
    ]


def _our_schema_without_trailing(count: int) -> dict[str, Any]:
    """Our layout less the last `count` nullable `_FILE` fields: an older Paimon (Java 1.0 and kin)."""
    schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    file_type = schema["fields"][-1]["type"]
    file_type["fields"] = file_type["fields"][:-count]
    return schema


def _nullable_top_level() -> list[Any]:
    """paimon-rust / pypaimon style: `["null", record]` at the top."""
    return ["null", copy.deepcopy(MANIFEST_ENTRY_SCHEMA)]


def _with_an_unknown_field() -> dict[str, Any]:
    """A later Paimon with a `_FILE` field we do not know, before fields we do."""
    schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    schema["fields"][-1]["type"]["fields"].insert(
        12, {"name": "_FUTURE", "type": ["null", "long"], "default": None}
    )
    return schema


def _avro(schema: Any, entries: list[ManifestEntry], codec: str = "zstandard") -> bytes:
    buffer = io.BytesIO()
    records = []
    for entry in entries:
        record = entry_to_record(entry)
        record["_FILE"]["_FUTURE"] = 5
        records.append(record)
    fastavro.writer(buffer, fastavro.parse_schema(schema), records, codec=codec, sync_interval=2000)
    return buffer.getvalue()


LAYOUTS = {
    "ours": lambda: copy.deepcopy(MANIFEST_ENTRY_SCHEMA),
    "older, 3 trailing fields fewer": lambda: _our_schema_without_trailing(3),
    "older, 5 trailing fields fewer": lambda: _our_schema_without_trailing(5),
    "nullable top level": _nullable_top_level,
    "an unknown field": _with_an_unknown_field,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_deletes_of_wanted_partitions_are_the_models_deletes(layout):
    """`iter_wanted_deletes` (a partition drop's scan): for every writer layout, the DELETE of each
    entry of a wanted partition, in file order, equal to the models' DELETE; every other entry goes
    to `unwanted`; `wanted` is asked once per partition; a DELETE entry is refused naming the file."""
    adds = [e for e in _entries(60) if e.kind == ADD]
    data = _avro(LAYOUTS[layout](), adds)
    dropped = {adds[0].partition, adds[2].partition}
    asked: list[bytes] = []
    skipped: list[dict[str, Any]] = []

    def wanted(partition: bytes) -> bool:
        asked.append(partition)
        return partition in dropped

    decided: dict[bytes, bool] = {}
    deletes = list(iter_wanted_deletes(data, "m", wanted, decided, skipped.append))
    expected = [e.as_delete() for e in decode_manifest(data, "m") if e.partition in dropped]
    assert len(expected) == len(deletes) > 0
    decoded = [fastavro.schemaless_reader(io.BytesIO(d.datum), MANIFEST_ENTRY_SCHEMA) for d in deletes]
    assert [entry_from_record(record) for record in decoded] == expected
    assert [d.identifier() for d in deletes] == [e.identifier() for e in expected]
    assert all(d.kind == DELETE for d in deletes)
    assert [r["_FILE"]["_FILE_NAME"] for r in skipped] == [
        e.file.file_name for e in adds if e.partition not in dropped
    ]
    assert sorted(asked) == sorted({e.partition for e in adds})  # once each
    assert list(iter_wanted_deletes(data, "m", lambda p: 1 / 0, decided)) != []  # decided is reused

    def broken_selection(partition: bytes) -> bool:
        raise TypeError("a selection that cannot compare")

    with pytest.raises(TypeError, match="cannot compare"):  # the caller's error, not a corrupt manifest
        list(iter_wanted_deletes(data, "m", broken_selection, {}))
    with pytest.raises(ZeroDivisionError):
        list(iter_wanted_deletes(data, "m", lambda p: False, {}, lambda record: 1 / 0))
    with pytest.raises(InvalidTableStateError, match="m-del: holds a DELETE of file data-4.parquet"):
        list(iter_wanted_deletes(_avro(LAYOUTS[layout](), _entries(6)), "m-del", wanted, {}))
    with pytest.raises(CorruptFileError, match="m-cut"):
        list(iter_wanted_deletes(data[: len(data) - 40], "m-cut", wanted, {}))
    with pytest.raises(CorruptFileError, match="m-v3.*_VERSION 2, got 3"):
        list(iter_wanted_deletes(_one_record_manifest(_VERSION=3), "m-v3", wanted, {}))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_raw_entries_rewritten_are_the_entries_the_models_read(tmp_path, layout):
    data = _avro(LAYOUTS[layout](), _entries())
    expected = decode_manifest(data, "m")  # what every other reader of ours sees
    raw = list(iter_raw_entries(data, "m"))
    assert [(r.kind, r.partition, r.bucket, r.file_name) for r in raw] == [
        (e.kind, e.partition, e.bucket, e.file.file_name) for e in expected
    ]
    assert [r.identifier() for r in raw] == [e.identifier() for e in expected]

    file_io = FileIO.for_path(str(tmp_path))
    names = (f"manifest-new-{i}" for i in range(100))
    metas = rolling_write_raw_manifests(
        file_io, str(tmp_path), lambda: next(names), raw, 1 << 20, "zstd", [STRING], 0
    )
    (meta,) = metas
    written = file_io.read_bytes(str(tmp_path / meta.file_name))
    assert decode_manifest(written, "new") == expected
    assert meta == manifest_file_meta(meta.file_name, len(written), expected, 0, [STRING])
    assert fastavro.reader(io.BytesIO(written)).writer_schema["fields"][-1]["name"] == "_FILE"


def test_our_layout_is_copied_byte_for_byte_and_older_ones_padded():
    assert _padding_for(_schema_text(MANIFEST_ENTRY_SCHEMA)) == b""
    assert _padding_for(_schema_text(_our_schema_without_trailing(3))) == b"\x00" * 3
    assert _padding_for(_schema_text(_nullable_top_level())) is None
    assert _padding_for(_schema_text(_with_an_unknown_field())) is None
    required_last = _our_schema_without_trailing(3)
    required_last["fields"][-1]["type"]["fields"][-1] = {"name": "_FILE_SOURCE", "type": "int"}
    assert _padding_for(_schema_text(required_last)) is None  # the missing part must be nullable

    entries = _entries(3)
    data = encode_manifest(entries, "none")
    raw = list(iter_raw_entries(data, "m"))
    block = data[data.index(raw[0].datum) :]
    assert block.startswith(b"".join(r.datum for r in raw))  # the file's own bytes, in order


def _schema_text(schema: Any) -> str:
    return fastavro.reader(io.BytesIO(_avro(schema, []))).metadata["avro.schema"]


def test_a_fastavro_reading_blocks_otherwise_falls_back_to_the_models(monkeypatch):
    """Datum boundaries come from the block buffer's position; a reader that decodes a block up front
    (the position never advances) must not cut bytes: the entries go through the models."""
    data = _avro(MANIFEST_ENTRY_SCHEMA, _entries(12))
    real_block_reader = fastavro.block_reader

    class Predecoded:
        def __init__(self, block: Any) -> None:
            self.bytes_ = block.bytes_
            self.records = list(block)
            self.bytes_.seek(0)

        def __iter__(self):
            return iter(self.records)

    class Reader:
        def __init__(self, fo: Any) -> None:
            self.inner = real_block_reader(fo)
            self.metadata = self.inner.metadata

        def __iter__(self):
            return (Predecoded(block) for block in self.inner)

    monkeypatch.setattr("paimon_format.manifest.raw.fastavro.block_reader", Reader)
    raw = list(iter_raw_entries(data, "m"))
    assert [fastavro.schemaless_reader(io.BytesIO(r.datum), MANIFEST_ENTRY_SCHEMA) for r in raw] == list(
        fastavro.reader(io.BytesIO(data))
    )
    adds = encode_manifest([e for e in _entries(12) if e.kind == ADD])
    deletes = list(iter_wanted_deletes(adds, "m", lambda partition: True, {}))
    assert [
        entry_from_record(fastavro.schemaless_reader(io.BytesIO(d.datum), MANIFEST_ENTRY_SCHEMA))
        for d in deletes
    ] == [e.as_delete() for e in decode_manifest(adds, "m")]


def _one_record_manifest(**changes: Any) -> bytes:
    record = entry_to_record(_entries(1)[0]) | changes
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(MANIFEST_ENTRY_SCHEMA), [record])
    return buffer.getvalue()


def test_broken_manifests_fail_naming_the_file(tmp_path):
    data = _avro(MANIFEST_ENTRY_SCHEMA, _entries(30))
    with pytest.raises(CorruptFileError, match="m-cut"):
        list(iter_raw_entries(data[: len(data) - 40], "m-cut"))
    with pytest.raises(CorruptFileError, match="m-garbage"):
        list(iter_raw_entries(b"not avro at all", "m-garbage"))
    with pytest.raises(CorruptFileError, match="m-v3.*_VERSION 2, got 3"):
        list(iter_raw_entries(_one_record_manifest(_VERSION=3), "m-v3"))
    with pytest.raises(CorruptFileError, match="m-kind.*_KIND 7"):
        list(iter_raw_entries(_one_record_manifest(_KIND=7), "m-kind"))

    path = tmp_path / "manifest-x"
    path.write_bytes(data)
    with pytest.raises(CorruptFileError, match="manifest-x.*bytes but its metadata says"):
        read_raw_manifest(FileIO.for_path(str(tmp_path)), str(path), len(data) + 1)
    assert len(read_raw_manifest(FileIO.for_path(str(tmp_path)), str(path), len(data))) == 30


def test_raw_entries_cancel_as_model_entries_do():
    entries = _entries(10)
    deletes = [e.as_delete() for e in entries[:4] if e.kind == ADD]
    data = encode_manifest(entries + deletes)
    raw_live = EntryMerger("raw").add_all(iter_raw_entries(data, "m")).merged()
    model_live = EntryMerger("models").add_all(decode_manifest(data, "m")).merged()
    assert [r.identifier() for r in raw_live] == [e.identifier() for e in model_live]
    with pytest.raises(Exception, match="already added"):
        EntryMerger("raw").add_all(iter_raw_entries(encode_manifest(entries[:1] * 2), "m"))


def test_rolling_raw_write_rolls_at_the_target_and_keeps_order(tmp_path):
    entries = [e for e in _entries(1500) if e.kind == ADD]
    raw = list(iter_raw_entries(encode_manifest(entries), "m"))
    file_io = FileIO.for_path(str(tmp_path))
    names = (f"manifest-r-{i}" for i in range(1000))
    metas = rolling_write_raw_manifests(
        file_io, str(tmp_path), lambda: next(names), raw, 8_000, "zstd", [STRING], 0
    )
    assert len(metas) > 2
    decoded = [e for m in metas for e in decode_manifest(file_io.read_bytes(str(tmp_path / m.file_name)))]
    assert decoded == entries
    for meta in metas[:-1]:
        assert meta.file_size >= 8_000
        assert meta.file_size == (tmp_path / meta.file_name).stat().st_size


def test_the_delete_of_a_raw_add_is_the_models_delete():
    entries = [e for e in _entries(12) if e.kind == ADD]
    raw = list(iter_raw_entries(encode_manifest(entries), "m"))
    deletes = [r.as_delete() for r in raw]
    assert [d.identifier() for d in deletes] == [r.identifier() for r in raw]
    decoded = [fastavro.schemaless_reader(io.BytesIO(d.datum), MANIFEST_ENTRY_SCHEMA) for d in deletes]
    assert [entry_from_record(record) for record in decoded] == [e.as_delete() for e in entries]
    with pytest.raises(ValueError, match="only an ADD"):
        deletes[0].as_delete()
