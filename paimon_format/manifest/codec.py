"""Avro encoding of manifests, manifest lists and index manifests (spec §4): records <-> models, files.

We write Java's exact shape (field order, types, `["null", T]` unions, record names as Java's
`AvroSchemaConverter` derives them), because the newest Java reader validates the ManifestEntry top
level and copies Avro blocks raw when the layout matches its own. We read every shape that Java,
pypaimon and paimon-rust write: plain or `["null", record]` top level and nested stats records,
older field sets (missing fields become None or their defaults), unknown fields ignored.

A manifest that cannot be decoded is an error naming its path, never an empty list: maintenance
jobs would otherwise treat its files as unreferenced and delete live data.

`_CREATION_TIME`: Java stores `LocalDateTime.now()` as if it were UTC millis. We keep it as a naive
datetime holding that wall-clock value (what Java's `DataFileMeta.creationTime()` shows) and write
it back as the same millis; we compute the millis ourselves because fastavro would interpret a naive
datetime in the process's local time zone (a shifted value on any executor not running in UTC).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import io
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import fastavro
import fastavro.write

from paimon_format.errors import CorruptFileError, missing_codec_library
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    DataFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from paimon_format.manifest.schemas import (
    INDEX_MANIFEST_ENTRY_SCHEMA,
    MANIFEST_ENTRY_SCHEMA,
    MANIFEST_FILE_META_EXTENDED_SCHEMA,
    MANIFEST_FILE_META_SCHEMA,
)
from paimon_format.model.binary_row import EMPTY_ROW
from paimon_format.storage.fileio import FileIO

MANIFEST_VERSION = 2  # ManifestEntry and ManifestFileMeta "format identifier" (1 = before Paimon 0.4)
INDEX_MANIFEST_VERSION = 1
_EPOCH = dt.datetime(1970, 1, 1)
_ONE_MS = dt.timedelta(milliseconds=1)
_UTC = dt.timezone.utc
_EPOCH_UTC = _EPOCH.replace(tzinfo=_UTC)

# Java's Avro `DataFileWriter` default sync interval: blocks of ~64 KB before compression.
SYNC_INTERVAL = 64_000

# Parsed once: fastavro's parse is far more expensive than encoding a small manifest list.
PARSED_MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema(MANIFEST_ENTRY_SCHEMA)
_PARSED_MANIFEST_LIST = fastavro.parse_schema(MANIFEST_FILE_META_SCHEMA)
_PARSED_MANIFEST_LIST_EXTENDED = fastavro.parse_schema(MANIFEST_FILE_META_EXTENDED_SCHEMA)
_PARSED_INDEX_MANIFEST = fastavro.parse_schema(INDEX_MANIFEST_ENTRY_SCHEMA)

# Paimon's `manifest.compression` values -> Avro codec names. Only codecs of the Avro spec that
# Java's Avro library can read (no fastavro-only lz4).
_CODECS = {
    "zstd": "zstandard",
    "zstandard": "zstandard",
    "none": "null",
    "null": "null",
    "uncompressed": "null",
    "": "null",
    "deflate": "deflate",
    "snappy": "snappy",
    "bzip2": "bzip2",
    "xz": "xz",
}

# Java writes zstd at `file.compression.zstd-level`, default 1 (fast, and what Java readers expect).
_ZSTD_LEVEL = 1


def avro_codec(compression: str) -> str:
    """The Avro codec name for Paimon's `manifest.compression` value (zstd -> "zstandard")."""
    try:
        return _CODECS[(compression or "").strip().lower()]
    except KeyError:
        raise ValueError(
            f"unsupported manifest.compression {compression!r}; use one of {sorted(k for k in _CODECS if k)}"
        ) from None


def codec_and_level(compression: str) -> tuple[str, int | None]:
    codec = avro_codec(compression)
    return codec, (_ZSTD_LEVEL if codec == "zstandard" else None)


# -- record <-> model -------------------------------------------------------------------------------


def _millis(value: dt.datetime) -> int:
    """Epoch millis of a creation time: naive = wall-clock stored as UTC (Java); aware = its UTC instant."""
    if value.tzinfo is not None:
        return (value - _EPOCH_UTC) // _ONE_MS  # an aware difference is between instants
    return (value - _EPOCH) // _ONE_MS


def _naive(value: Any) -> dt.datetime:
    """A decoded `_CREATION_TIME` as a naive datetime (fastavro gives an aware UTC one)."""
    if isinstance(value, dt.datetime):
        return value.astimezone(_UTC).replace(tzinfo=None) if value.tzinfo is not None else value
    if isinstance(value, int):  # a writer that left out the logical type
        return _EPOCH + dt.timedelta(milliseconds=value)
    raise TypeError(f"_CREATION_TIME of type {type(value).__name__}")


def creation_millis(value: Any) -> int | None:
    """A decoded `_CREATION_TIME` as the epoch millis stored (Java's wall clock taken as UTC)."""
    if value is None or isinstance(value, int):
        return value
    return _millis(value)


def _stats_to_avro(stats: SimpleStats) -> dict[str, Any]:
    # `_NULL_COUNTS` is always a list: Java's SimpleStats.fromRow calls size() on it.
    return {
        "_MIN_VALUES": stats.min_values,
        "_MAX_VALUES": stats.max_values,
        "_NULL_COUNTS": stats.null_counts if stats.null_counts is not None else [],
    }


def _stats_from_avro(record: dict[str, Any] | None) -> SimpleStats:
    if record is None:  # `["null", record]` writers
        return SimpleStats(EMPTY_ROW, EMPTY_ROW, [])
    return SimpleStats(record["_MIN_VALUES"], record["_MAX_VALUES"], record.get("_NULL_COUNTS") or [])


def _file_to_avro(f: DataFileMeta) -> dict[str, Any]:
    created = f.creation_time
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
        "_EXTRA_FILES": f.extra_files if f.extra_files is not None else [],
        "_CREATION_TIME": _millis(created) if isinstance(created, dt.datetime) else created,
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
    # Hot path (a job decodes millions): positional arguments, stats built inline, no per-field calls.
    get = r.get
    ks = get("_KEY_STATS")
    vs = get("_VALUE_STATS")
    created = get("_CREATION_TIME")
    if created is not None:
        created = (
            created.replace(tzinfo=None)
            if type(created) is dt.datetime and created.tzinfo is _UTC
            else _naive(created)
        )
    return DataFileMeta(
        r["_FILE_NAME"],
        r["_FILE_SIZE"],
        r["_ROW_COUNT"],
        r["_MIN_KEY"],
        r["_MAX_KEY"],
        SimpleStats(ks["_MIN_VALUES"], ks["_MAX_VALUES"], ks.get("_NULL_COUNTS") or [])
        if ks is not None
        else SimpleStats(EMPTY_ROW, EMPTY_ROW, []),
        SimpleStats(vs["_MIN_VALUES"], vs["_MAX_VALUES"], vs.get("_NULL_COUNTS") or [])
        if vs is not None
        else SimpleStats(EMPTY_ROW, EMPTY_ROW, []),
        r["_MIN_SEQUENCE_NUMBER"],
        r["_MAX_SEQUENCE_NUMBER"],
        r["_SCHEMA_ID"],
        r["_LEVEL"],
        get("_EXTRA_FILES") or [],
        created,
        get("_DELETE_ROW_COUNT"),
        get("_EMBEDDED_FILE_INDEX"),
        get("_FILE_SOURCE"),
        get("_VALUE_STATS_COLS"),
        get("_EXTERNAL_PATH"),
        get("_FIRST_ROW_ID"),
        get("_WRITE_COLS"),
        get("_WRITE_COLS_SEQUENCES"),
    )


def entry_to_record(e: ManifestEntry) -> dict[str, Any]:
    return {
        "_VERSION": MANIFEST_VERSION,
        "_KIND": e.kind,
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": _file_to_avro(e.file),
    }


def entry_from_record(r: dict[str, Any]) -> ManifestEntry:
    """The ManifestEntry of a decoded record (from `iter_manifest_records`); ValueError on an unknown kind."""
    kind = r["_KIND"]
    if kind != ADD and kind != DELETE:
        raise ValueError(f"unknown _KIND {kind}")
    total_buckets = r.get("_TOTAL_BUCKETS")
    return ManifestEntry(
        kind,
        r["_PARTITION"],
        r["_BUCKET"],
        -1 if total_buckets is None else total_buckets,  # writers before the field: unknown
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
        "_TOTAL_BUCKETS": m.total_buckets,
        "_EXTRA_FILES": m.extra_files,
    }


def _meta_from_avro(r: dict[str, Any]) -> ManifestFileMeta:
    get = r.get
    return ManifestFileMeta(
        r["_FILE_NAME"],
        r["_FILE_SIZE"],
        r["_NUM_ADDED_FILES"],
        r["_NUM_DELETED_FILES"],
        _stats_from_avro(get("_PARTITION_STATS")),
        r["_SCHEMA_ID"],
        get("_MIN_BUCKET"),
        get("_MAX_BUCKET"),
        get("_MIN_LEVEL"),
        get("_MAX_LEVEL"),
        get("_MIN_ROW_ID"),
        get("_MAX_ROW_ID"),
        get("_TOTAL_BUCKETS"),
        get("_EXTRA_FILES"),
    )


def _dv_range_to_avro(item: dict[str, Any]) -> dict[str, Any]:
    return {"f0": item["f0"], "f1": item["f1"], "f2": item["f2"], "_CARDINALITY": item.get("_CARDINALITY")}


_GLOBAL_INDEX_OPTIONAL = ("_EXTRA_FIELD_IDS", "_INDEX_META", "_SOURCE_META")


def _global_index_record(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A global-index dict with every field of §4.6 present (absent optional ones = None)."""
    if record is None:
        return None
    result = {
        "_ROW_RANGE_START": record["_ROW_RANGE_START"],
        "_ROW_RANGE_END": record["_ROW_RANGE_END"],
        "_INDEX_FIELD_ID": record["_INDEX_FIELD_ID"],
    }
    for name in _GLOBAL_INDEX_OPTIONAL:
        result[name] = record.get(name)
    return result


def _index_to_avro(e: IndexManifestEntry) -> dict[str, Any]:
    ranges = e.deletion_vector_ranges
    return {
        "_VERSION": INDEX_MANIFEST_VERSION,
        "_KIND": e.kind,
        "_PARTITION": e.partition,
        "_BUCKET": e.bucket,
        "_INDEX_TYPE": e.index_type,
        "_FILE_NAME": e.file_name,
        "_FILE_SIZE": e.file_size,
        "_ROW_COUNT": e.row_count,
        "_DELETIONS_VECTORS_RANGES": None if ranges is None else [_dv_range_to_avro(r) for r in ranges],
        "_EXTERNAL_PATH": e.external_path,
        "_GLOBAL_INDEX": _global_index_record(e.global_index),
    }


def _index_from_avro(r: dict[str, Any]) -> IndexManifestEntry:
    get = r.get
    kind = r["_KIND"]
    if kind != ADD and kind != DELETE:
        raise ValueError(f"unknown _KIND {kind}")
    ranges = get("_DELETIONS_VECTORS_RANGES")
    return IndexManifestEntry(
        kind,
        r["_PARTITION"],
        r["_BUCKET"],
        r["_INDEX_TYPE"],
        r["_FILE_NAME"],
        r["_FILE_SIZE"],
        r["_ROW_COUNT"],
        None if ranges is None else [_dv_range_to_avro(item) for item in ranges],
        get("_EXTERNAL_PATH"),
        _global_index_record(get("_GLOBAL_INDEX")),
    )


# -- encoding and decoding --------------------------------------------------------------------------


def _encode(schema: Any, records: Iterable[dict[str, Any]], compression: str) -> bytes:
    codec, level = codec_and_level(compression)
    buffer = io.BytesIO()
    try:
        fastavro.writer(
            buffer, schema, records, codec=codec, sync_interval=SYNC_INTERVAL, codec_compression_level=level
        )
    except ValueError as error:
        missing = missing_codec_library(error, "writing Avro metadata")
        if missing is not None:
            raise missing from None
        raise
    return buffer.getvalue()


def version_error(path: str, index: int, version: Any, expected: int) -> CorruptFileError:
    if version == 1 and expected == MANIFEST_VERSION:
        return CorruptFileError(
            path,
            "manifest format version 1 was written by Paimon before 0.4 and is not readable; "
            "please recreate the table",
        )
    return CorruptFileError(path, f"record {index}: expected _VERSION {expected}, got {version!r}")


def _decode(
    data: bytes, path: str, expected_version: int, build: Callable[[dict[str, Any]], Any], what: str
) -> Iterator[Any]:
    """Records of an Avro container decoded with the writer schema from its header, built into models.

    Any failure (bad header, truncated block, bad sync marker, codec error, missing required field,
    wrong `_VERSION`) becomes a CorruptFileError naming `path`, except a codec whose library is not
    installed: that is a MissingDependencyError saying what to install.
    """
    index = -1
    try:
        reader = fastavro.reader(io.BytesIO(data))
        for index, record in enumerate(reader):  # noqa: B007 - index is reported on errors
            if record is None:
                # A `["null", record]` top level with a null row: Java fails on it as well.
                raise CorruptFileError(path, f"record {index} is null")
            version = record.get("_VERSION")
            if version != expected_version:
                raise version_error(path, index, version, expected_version)
            yield build(record)
    except CorruptFileError:
        raise
    except Exception as error:  # fastavro raises assorted types on broken input (EOF, ValueError, zstd, ...)
        raise decode_error(error, path, index, what) from None


def decode_error(error: Exception, path: str, index: int, what: str) -> Exception:
    """What a failure while decoding record `index` of `path` (a `what`: "manifest", ...) becomes:
    a CorruptFileError naming the file, or, for a codec whose library is missing, a
    MissingDependencyError saying what to install (an environment problem, not a corrupt file)."""
    if isinstance(error, KeyError):
        return CorruptFileError(path, f"record {index}: required field {error} is missing from the {what}")
    missing = missing_codec_library(error, f"reading {path}")
    if missing is not None:
        return missing
    where = "header" if index < 0 else f"after record {index}"
    return CorruptFileError(path, f"not a readable Avro {what} ({where}: {type(error).__name__}: {error})")


def check_file_size(data: bytes, path: str, expected_size: int | None) -> None:
    """CorruptFileError when `data` is not `expected_size` bytes long (a truncated manifest).

    A file cut at a block boundary is still valid Avro with fewer records; only the size recorded
    by the referencing metadata can tell.
    """
    if expected_size is not None and expected_size >= 0 and len(data) != expected_size:
        raise CorruptFileError(path, f"file has {len(data)} bytes but its metadata says {expected_size}")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while bulk-decoding.

    Decoding allocates millions of small, acyclic containers; each allocation burst triggers
    collections that rescan everything already decoded, which costs about a third of the decode
    time. Reference counting still frees everything; the collector is re-enabled afterwards (only if
    it was enabled, so a caller's own `gc.disable()` is respected).
    """
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def encode_manifest(entries: Iterable[ManifestEntry], compression: str = "zstd") -> bytes:
    return _encode(PARSED_MANIFEST_ENTRY_SCHEMA, (entry_to_record(e) for e in entries), compression)


def iter_manifest_entries(data: bytes, path: str = "?") -> Iterator[ManifestEntry]:
    """Stream a manifest's entries; a broken file raises CorruptFileError when the iteration reaches it."""
    return _decode(data, path, MANIFEST_VERSION, entry_from_record, "manifest")


def iter_manifest_records(data: bytes, path: str = "?") -> Iterator[dict[str, Any]]:
    """A manifest's records as fastavro decodes them (version checked), not built into models.

    For scans that look at a few fields of every entry and build models only for the entries they
    keep (`entry_from_record`): building a ManifestEntry costs as much as decoding the record.
    """
    return _decode(data, path, MANIFEST_VERSION, _identity, "manifest")


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    return record


def decode_manifest(data: bytes, path: str = "?") -> list[ManifestEntry]:
    with gc_paused():
        return list(iter_manifest_entries(data, path))


def encode_manifest_list(metas: Iterable[ManifestFileMeta], compression: str = "zstd") -> bytes:
    metas = list(metas)
    extended = any(m.total_buckets is not None or m.extra_files is not None for m in metas)
    schema = _PARSED_MANIFEST_LIST_EXTENDED if extended else _PARSED_MANIFEST_LIST
    return _encode(schema, (_meta_to_avro(m) for m in metas), compression)


def decode_manifest_list(data: bytes, path: str = "?") -> list[ManifestFileMeta]:
    with gc_paused():
        return list(_decode(data, path, MANIFEST_VERSION, _meta_from_avro, "manifest list"))


def encode_index_manifest(entries: Iterable[IndexManifestEntry], compression: str = "zstd") -> bytes:
    return _encode(_PARSED_INDEX_MANIFEST, (_index_to_avro(e) for e in entries), compression)


def decode_index_manifest(data: bytes, path: str = "?") -> list[IndexManifestEntry]:
    return list(_decode(data, path, INDEX_MANIFEST_VERSION, _index_from_avro, "index manifest"))


def read_manifest(file_io: FileIO, path: str, expected_size: int | None = None) -> list[ManifestEntry]:
    """Entries of a manifest; pass `expected_size` (ManifestFileMeta.file_size) to catch truncation."""
    data = file_io.read_bytes(path)
    check_file_size(data, path, expected_size)
    return decode_manifest(data, path)


def read_manifest_list(
    file_io: FileIO, path: str, expected_size: int | None = None
) -> list[ManifestFileMeta]:
    """Metas of a manifest list; `expected_size` = the snapshot's `*ManifestListSize` when known."""
    data = file_io.read_bytes(path)
    check_file_size(data, path, expected_size)
    return decode_manifest_list(data, path)


def read_index_manifest(file_io: FileIO, path: str) -> list[IndexManifestEntry]:
    return decode_index_manifest(file_io.read_bytes(path), path)


def write_manifest(
    file_io: FileIO, path: str, entries: Iterable[ManifestEntry], compression: str = "zstd"
) -> int:
    """Write a manifest; returns its exact size (ManifestFileMeta.file_size)."""
    data = encode_manifest(entries, compression)
    file_io.write_bytes(path, data)
    return len(data)


def write_manifest_list(
    file_io: FileIO, path: str, metas: Iterable[ManifestFileMeta], compression: str = "zstd"
) -> int:
    """Write a manifest list; returns its exact size (the snapshot's `*ManifestListSize`)."""
    data = encode_manifest_list(metas, compression)
    file_io.write_bytes(path, data)
    return len(data)


def write_index_manifest(
    file_io: FileIO, path: str, entries: Iterable[IndexManifestEntry], compression: str = "zstd"
) -> int:
    data = encode_index_manifest(entries, compression)
    file_io.write_bytes(path, data)
    return len(data)
