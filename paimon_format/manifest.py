"""Avro manifests: manifest lists, manifests and index manifests (spec §4).

We write Java's exact shape (field order, types, `["null", T]` unions, record names), because the
newest Java reader validates the ManifestEntry top level and can copy Avro blocks raw when the
layout matches. We read every shape that Java, pypaimon and paimon-rust write: plain or
`["null", record]` top level, older field sets (missing fields become None), unknown fields skipped.

A manifest that cannot be decoded is an error naming its path, never an empty list: maintenance
jobs would otherwise treat its files as unreferenced.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import fastavro

from paimon_format.binary_row import EMPTY_ROW, deserialize_row, serialize_row
from paimon_format.errors import CorruptFileError
from paimon_format.fileio import FileIO
from paimon_format.types import DataType

ADD = 0
DELETE = 1
MANIFEST_VERSION = 2
INDEX_MANIFEST_VERSION = 1
_NAMESPACE = "org.apache.paimon.avro.generated"


# -- models ---------------------------------------------------------------------------------------


def _positional_reduce(self: Any) -> tuple:
    """Pickle as (class, field values): much cheaper than the generic slots state for millions of entries."""
    return (type(self), tuple(getattr(self, name) for name in self.__slots__))


@dataclass(slots=True)
class SimpleStats:
    """Min/max rows (BinaryRow bytes) and per-column null counts."""

    min_values: bytes
    max_values: bytes
    null_counts: list[int | None]

    @staticmethod
    def empty() -> SimpleStats:
        return SimpleStats(EMPTY_ROW, EMPTY_ROW, [])


@dataclass(slots=True)
class DataFileMeta:
    """One data (or changelog) file as a manifest records it (§4.5)."""

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: list[str] = field(default_factory=list)
    creation_time: dt.datetime | None = None
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: int | None = None
    value_stats_cols: list[str] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: list[str] | None = None
    write_cols_sequences: list[int] | None = None


@dataclass(slots=True)
class ManifestEntry:
    """An ADD or DELETE of one file in one partition and bucket."""

    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    def identifier(self) -> tuple:
        """Paimon's file identity (§10.1): a DELETE cancels only the ADD with the same identifier."""
        f = self.file
        return (
            self.partition,
            self.bucket,
            f.level,
            f.file_name,
            tuple(f.extra_files),
            f.embedded_index,
            f.external_path,
        )

    @property
    def is_add(self) -> bool:
        return self.kind == ADD

    def as_delete(self) -> ManifestEntry:
        """The DELETE entry for this file: a copy of the ADD, so every identifying field matches."""
        return ManifestEntry(DELETE, self.partition, self.bucket, self.total_buckets, self.file)

    def with_kind(self, kind: int) -> ManifestEntry:
        return replace(self, kind=kind)


@dataclass(slots=True)
class ManifestFileMeta:
    """One manifest file as a manifest list records it (§4.3)."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None


@dataclass(slots=True)
class IndexManifestEntry:
    """An index file (hash index, deletion vectors, global index) of one partition and bucket (§4.6)."""

    kind: int
    partition: bytes
    bucket: int
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    deletion_vector_ranges: list[dict[str, Any]] | None = None
    external_path: str | None = None
    global_index: dict[str, Any] | None = None


for _model in (SimpleStats, DataFileMeta, ManifestEntry, ManifestFileMeta, IndexManifestEntry):
    _model.__reduce__ = _positional_reduce  # type: ignore[method-assign]


# -- Avro schemas (Java's shape) -------------------------------------------------------------------


def _nullable(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


def _opt(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": _nullable(avro_type), "default": None}


def _stats_record(name: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": _NAMESPACE,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            _opt("_NULL_COUNTS", {"type": "array", "items": ["null", "long"]}),
        ],
    }


_DATA_FILE_RECORD = {
    "type": "record",
    "name": "record__FILE",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": _stats_record("record__FILE__KEY_STATS")},
        {"name": "_VALUE_STATS", "type": _stats_record("record__FILE__VALUE_STATS")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
        _opt("_DELETE_ROW_COUNT", "long"),
        _opt("_EMBEDDED_FILE_INDEX", "bytes"),
        _opt("_FILE_SOURCE", "int"),
        _opt("_VALUE_STATS_COLS", {"type": "array", "items": "string"}),
        _opt("_EXTERNAL_PATH", "string"),
        _opt("_FIRST_ROW_ID", "long"),
        _opt("_WRITE_COLS", {"type": "array", "items": "string"}),
        _opt("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
    ],
}

MANIFEST_ENTRY_SCHEMA = {
    "type": "record",
    "name": "record",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {"name": "_FILE", "type": _DATA_FILE_RECORD},
    ],
}

# `_TOTAL_BUCKETS` and `_EXTRA_FILES`, which pypaimon and paimon-rust append, are left out: Java's
# own layout does not have them, readers treat them as optional, and matching Java keeps its
# raw block copy path available.
MANIFEST_FILE_META_SCHEMA = {
    "type": "record",
    "name": "record",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": _stats_record("record__PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"},
        _opt("_MIN_BUCKET", "int"),
        _opt("_MAX_BUCKET", "int"),
        _opt("_MIN_LEVEL", "int"),
        _opt("_MAX_LEVEL", "int"),
        _opt("_MIN_ROW_ID", "long"),
        _opt("_MAX_ROW_ID", "long"),
    ],
}

INDEX_MANIFEST_ENTRY_SCHEMA = {
    "type": "record",
    "name": "record",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        _opt(
            "_DELETIONS_VECTORS_RANGES",
            {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "record__DELETIONS_VECTORS_RANGES",
                    "namespace": _NAMESPACE,
                    "fields": [
                        {"name": "f0", "type": "string"},
                        {"name": "f1", "type": "int"},
                        {"name": "f2", "type": "int"},
                        _opt("_CARDINALITY", "long"),
                    ],
                },
            },
        ),
        _opt("_EXTERNAL_PATH", "string"),
        _opt(
            "_GLOBAL_INDEX",
            {
                "type": "record",
                "name": "record__GLOBAL_INDEX",
                "namespace": _NAMESPACE,
                "fields": [
                    {"name": "_ROW_RANGE_START", "type": "long"},
                    {"name": "_ROW_RANGE_END", "type": "long"},
                    {"name": "_INDEX_FIELD_ID", "type": "int"},
                    _opt("_EXTRA_FIELD_IDS", {"type": "array", "items": "int"}),
                    _opt("_INDEX_META", "bytes"),
                    _opt("_SOURCE_META", "bytes"),
                ],
            },
        ),
    ],
}

_PARSED = {
    "manifest": fastavro.parse_schema(MANIFEST_ENTRY_SCHEMA),
    "manifest-list": fastavro.parse_schema(MANIFEST_FILE_META_SCHEMA),
    "index-manifest": fastavro.parse_schema(INDEX_MANIFEST_ENTRY_SCHEMA),
}

_CODECS = {
    "zstd": "zstandard",
    "zstandard": "zstandard",
    "none": "null",
    "null": "null",
    "": "null",
    "deflate": "deflate",
    "snappy": "snappy",
    "bzip2": "bzip2",
    "xz": "xz",
    "lz4": "lz4",
}


def avro_codec(compression: str) -> str:
    """The Avro codec name for Paimon's `manifest.compression` value."""
    try:
        return _CODECS[compression.strip().lower()]
    except KeyError:
        raise ValueError(
            f"unsupported manifest.compression {compression!r}; use one of {sorted(_CODECS)}"
        ) from None


# -- record <-> model -------------------------------------------------------------------------------


def _stats_to_avro(stats: SimpleStats) -> dict[str, Any]:
    return {
        "_MIN_VALUES": stats.min_values,
        "_MAX_VALUES": stats.max_values,
        "_NULL_COUNTS": list(stats.null_counts),
    }


def _stats_from_avro(record: dict[str, Any] | None) -> SimpleStats:
    if record is None:
        return SimpleStats.empty()
    return SimpleStats(record["_MIN_VALUES"], record["_MAX_VALUES"], list(record.get("_NULL_COUNTS") or []))


def _naive_utc(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, int):
        return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=value)
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def _file_to_avro(f: DataFileMeta) -> dict[str, Any]:
    return {
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_MIN_KEY": f.min_key,
        "_MAX_KEY": f.max_key,
        "_KEY_STATS": _stats_to_avro(f.key_stats),
        "_VALUE_STATS": _stats_to_avro(f.value_stats),
        "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
        "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
        "_SCHEMA_ID": f.schema_id,
        "_LEVEL": f.level,
        "_EXTRA_FILES": list(f.extra_files),
        # Java stores local wall-clock time as if it were UTC; a naive datetime is written as such.
        "_CREATION_TIME": f.creation_time,
        "_DELETE_ROW_COUNT": f.delete_row_count,
        "_EMBEDDED_FILE_INDEX": f.embedded_index,
        "_FILE_SOURCE": f.file_source,
        "_VALUE_STATS_COLS": f.value_stats_cols,
        "_EXTERNAL_PATH": f.external_path,
        "_FIRST_ROW_ID": f.first_row_id,
        "_WRITE_COLS": f.write_cols,
        "_WRITE_COLS_SEQUENCES": f.write_cols_sequences,
    }


def _file_from_avro(r: dict[str, Any]) -> DataFileMeta:
    get = r.get
    return DataFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        row_count=r["_ROW_COUNT"],
        min_key=r["_MIN_KEY"],
        max_key=r["_MAX_KEY"],
        key_stats=_stats_from_avro(get("_KEY_STATS")),
        value_stats=_stats_from_avro(get("_VALUE_STATS")),
        min_sequence_number=r["_MIN_SEQUENCE_NUMBER"],
        max_sequence_number=r["_MAX_SEQUENCE_NUMBER"],
        schema_id=r["_SCHEMA_ID"],
        level=r["_LEVEL"],
        extra_files=list(get("_EXTRA_FILES") or []),
        creation_time=_naive_utc(get("_CREATION_TIME")),
        delete_row_count=get("_DELETE_ROW_COUNT"),
        embedded_index=get("_EMBEDDED_FILE_INDEX"),
        file_source=get("_FILE_SOURCE"),
        value_stats_cols=get("_VALUE_STATS_COLS"),
        external_path=get("_EXTERNAL_PATH"),
        first_row_id=get("_FIRST_ROW_ID"),
        write_cols=get("_WRITE_COLS"),
        write_cols_sequences=get("_WRITE_COLS_SEQUENCES"),
    )


def _entry_to_avro(e: ManifestEntry) -> dict[str, Any]:
    return {
        "_VERSION": MANIFEST_VERSION,
        "_KIND": e.kind,
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": _file_to_avro(e.file),
    }


def _entry_from_avro(r: dict[str, Any]) -> ManifestEntry:
    if r["_KIND"] not in (ADD, DELETE):
        raise ValueError(f"unknown entry kind {r['_KIND']}")
    return ManifestEntry(
        r["_KIND"],
        r["_PARTITION"],
        r["_BUCKET"],
        r.get("_TOTAL_BUCKETS", -1) or -1,
        _file_from_avro(r["_FILE"]),
    )


def _meta_to_avro(m: ManifestFileMeta) -> dict[str, Any]:
    return {
        "_VERSION": MANIFEST_VERSION,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": _stats_to_avro(m.partition_stats),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": m.min_bucket,
        "_MAX_BUCKET": m.max_bucket,
        "_MIN_LEVEL": m.min_level,
        "_MAX_LEVEL": m.max_level,
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
    }


def _meta_from_avro(r: dict[str, Any]) -> ManifestFileMeta:
    get = r.get
    return ManifestFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        num_added_files=r["_NUM_ADDED_FILES"],
        num_deleted_files=r["_NUM_DELETED_FILES"],
        partition_stats=_stats_from_avro(get("_PARTITION_STATS")),
        schema_id=r["_SCHEMA_ID"],
        min_bucket=get("_MIN_BUCKET"),
        max_bucket=get("_MAX_BUCKET"),
        min_level=get("_MIN_LEVEL"),
        max_level=get("_MAX_LEVEL"),
        min_row_id=get("_MIN_ROW_ID"),
        max_row_id=get("_MAX_ROW_ID"),
    )


def _index_to_avro(e: IndexManifestEntry) -> dict[str, Any]:
    return {
        "_VERSION": INDEX_MANIFEST_VERSION,
        "_KIND": e.kind,
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_INDEX_TYPE": e.index_type,
        "_FILE_NAME": e.file_name,
        "_FILE_SIZE": e.file_size,
        "_ROW_COUNT": e.row_count,
        "_DELETIONS_VECTORS_RANGES": e.deletion_vector_ranges,
        "_EXTERNAL_PATH": e.external_path,
        "_GLOBAL_INDEX": e.global_index,
    }


def _index_from_avro(r: dict[str, Any]) -> IndexManifestEntry:
    get = r.get
    return IndexManifestEntry(
        kind=r["_KIND"],
        partition=r["_PARTITION"],
        bucket=r["_BUCKET"],
        index_type=r["_INDEX_TYPE"],
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        row_count=r["_ROW_COUNT"],
        deletion_vector_ranges=get("_DELETIONS_VECTORS_RANGES"),
        external_path=get("_EXTERNAL_PATH"),
        global_index=get("_GLOBAL_INDEX"),
    )


# -- encoding and decoding --------------------------------------------------------------------------


def _encode(kind: str, records: Iterable[dict[str, Any]], compression: str) -> bytes:
    buffer = io.BytesIO()
    fastavro.writer(buffer, _PARSED[kind], records, codec=avro_codec(compression))
    return buffer.getvalue()


def _decode(
    data: bytes, path: str, expected_version: int, build: Callable[[dict[str, Any]], Any]
) -> Iterator[Any]:
    try:
        reader = fastavro.reader(io.BytesIO(data))
        for index, record in enumerate(reader):
            if record is None:  # a `["null", record]` top level may carry null rows; they mean nothing
                continue
            version = record.get("_VERSION")
            if version != expected_version:
                if version == 1 and expected_version == MANIFEST_VERSION:
                    raise CorruptFileError(
                        path, "manifest format version 1 (Paimon before 0.4): recreate the table"
                    )
                raise CorruptFileError(path, f"record {index}: unsupported _VERSION {version}")
            yield build(record)
    except CorruptFileError:
        raise
    except (
        KeyError,
        TypeError,
        ValueError,
        EOFError,
        OSError,
        AssertionError,
        IndexError,
        UnicodeDecodeError,
    ) as error:
        detail = (
            f"missing field {error}" if isinstance(error, KeyError) else f"{type(error).__name__}: {error}"
        )
        raise CorruptFileError(path, f"not a readable Avro manifest ({detail})") from None
    except Exception as error:  # fastavro raises assorted errors on truncated input
        raise CorruptFileError(
            path, f"not a readable Avro manifest ({type(error).__name__}: {error})"
        ) from None


def encode_manifest(entries: Iterable[ManifestEntry], compression: str = "zstd") -> bytes:
    return _encode("manifest", (_entry_to_avro(e) for e in entries), compression)


def iter_manifest_entries(data: bytes, path: str = "?") -> Iterator[ManifestEntry]:
    return _decode(data, path, MANIFEST_VERSION, _entry_from_avro)


def decode_manifest(data: bytes, path: str = "?") -> list[ManifestEntry]:
    return list(iter_manifest_entries(data, path))


def encode_manifest_list(metas: Iterable[ManifestFileMeta], compression: str = "zstd") -> bytes:
    return _encode("manifest-list", (_meta_to_avro(m) for m in metas), compression)


def decode_manifest_list(data: bytes, path: str = "?") -> list[ManifestFileMeta]:
    return list(_decode(data, path, MANIFEST_VERSION, _meta_from_avro))


def encode_index_manifest(entries: Iterable[IndexManifestEntry], compression: str = "zstd") -> bytes:
    return _encode("index-manifest", (_index_to_avro(e) for e in entries), compression)


def decode_index_manifest(data: bytes, path: str = "?") -> list[IndexManifestEntry]:
    return list(_decode(data, path, INDEX_MANIFEST_VERSION, _index_from_avro))


def read_manifest(file_io: FileIO, path: str) -> list[ManifestEntry]:
    return decode_manifest(file_io.read_bytes(path), path)


def read_manifest_list(file_io: FileIO, path: str) -> list[ManifestFileMeta]:
    return decode_manifest_list(file_io.read_bytes(path), path)


def read_index_manifest(file_io: FileIO, path: str) -> list[IndexManifestEntry]:
    return decode_index_manifest(file_io.read_bytes(path), path)


def write_manifest(
    file_io: FileIO, path: str, entries: Iterable[ManifestEntry], compression: str = "zstd"
) -> int:
    data = encode_manifest(entries, compression)
    file_io.write_bytes(path, data)
    return len(data)


def write_manifest_list(
    file_io: FileIO, path: str, metas: Iterable[ManifestFileMeta], compression: str = "zstd"
) -> int:
    data = encode_manifest_list(metas, compression)
    file_io.write_bytes(path, data)
    return len(data)


def write_index_manifest(
    file_io: FileIO, path: str, entries: Iterable[IndexManifestEntry], compression: str = "zstd"
) -> int:
    data = encode_index_manifest(entries, compression)
    file_io.write_bytes(path, data)
    return len(data)


# -- manifest file metadata -------------------------------------------------------------------------


def partition_stats(partitions: Iterable[bytes], partition_types: Sequence[DataType]) -> SimpleStats:
    """Min, max and null count per partition column over the given partition rows."""
    if not partition_types:
        return SimpleStats.empty()
    arity = len(partition_types)
    minimum: list[Any] = [None] * arity
    maximum: list[Any] = [None] * arity
    nulls = [0] * arity
    for partition, count in _count(partitions).items():
        for i, value in enumerate(deserialize_row(partition, partition_types)):
            if value is None:
                nulls[i] += count
                continue
            if minimum[i] is None or value < minimum[i]:
                minimum[i] = value
            if maximum[i] is None or value > maximum[i]:
                maximum[i] = value
    return SimpleStats(
        serialize_row(minimum, partition_types), serialize_row(maximum, partition_types), nulls
    )


def _count(items: Iterable[bytes]) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def manifest_file_meta(
    file_name: str,
    file_size: int,
    entries: Sequence[ManifestEntry],
    schema_id_if_empty: int,
    partition_types: Sequence[DataType],
) -> ManifestFileMeta:
    """The manifest-list record of a manifest holding `entries` (stats must cover every entry)."""
    added = sum(1 for e in entries if e.kind == ADD)
    first_row_ids = [e.file.first_row_id for e in entries]
    has_row_ids = bool(entries) and all(r is not None for r in first_row_ids)
    return ManifestFileMeta(
        file_name=file_name,
        file_size=file_size,
        num_added_files=added,
        num_deleted_files=len(entries) - added,
        partition_stats=partition_stats((e.partition for e in entries), partition_types),
        schema_id=max((e.file.schema_id for e in entries), default=schema_id_if_empty),
        min_bucket=min((e.bucket for e in entries), default=None),
        max_bucket=max((e.bucket for e in entries), default=None),
        min_level=min((e.file.level for e in entries), default=None),
        max_level=max((e.file.level for e in entries), default=None),
        min_row_id=min(first_row_ids) if has_row_ids else None,  # type: ignore[type-var]
        max_row_id=max(e.file.first_row_id + e.file.row_count - 1 for e in entries) if has_row_ids else None,  # type: ignore[operator]
    )


def rolling_write_manifests(
    file_io: FileIO,
    manifest_dir: str,
    name_factory: Callable[[], str],
    entries: Sequence[ManifestEntry],
    target_size: int,
    compression: str,
    partition_types: Sequence[DataType],
    schema_id: int,
) -> list[ManifestFileMeta]:
    """Write entries in order into manifests of about `target_size` bytes each."""
    metas: list[ManifestFileMeta] = []
    codec = avro_codec(compression)
    schema = _PARSED["manifest"]
    start = 0
    while start < len(entries):
        buffer = io.BytesIO()
        writer = fastavro.write.Writer(buffer, schema, codec=codec)
        end = start
        while end < len(entries):
            writer.write(_entry_to_avro(entries[end]))
            end += 1
            if (end - start) % 512 == 0:
                writer.flush()
                if buffer.tell() >= target_size:
                    break
        writer.flush()
        data = buffer.getvalue()
        name = name_factory()
        file_io.write_bytes(file_io.join(manifest_dir, name), data)
        metas.append(manifest_file_meta(name, len(data), entries[start:end], schema_id, partition_types))
        start = end
    return metas
