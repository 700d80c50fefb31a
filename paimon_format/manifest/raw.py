"""Manifest entries kept as the Avro bytes they were written as: the fast path of bulk rewrites.

Why: rewriting a manifest entry through the models (decode, build a ManifestEntry, encode again)
costs about four times what decoding alone does, and a job that compacts a million entries spends
most of its time there. A rewrite that keeps every entry unchanged (manifest compaction moves
entries between files, cancels ADD/DELETE pairs and sorts them, but never edits one) can carry
each entry's datum bytes instead and write them into the new file's blocks as they are
(`manifest_files.rolling_write_raw_manifests`). Newer Java readers copy blocks the same way.

The bytes must be in the schema the new file declares, which is ours (`MANIFEST_ENTRY_SCHEMA`):
- a manifest written in exactly our layout: each datum is copied byte for byte;
- an older Paimon's layout (Java 1.0 and its kin), which ours extends only by nullable fields at the
  end of `_FILE`, the last top-level field: the datum plus one null-branch byte (0) per missing
  field is the same entry in our layout;
- any other layout (pypaimon's `["null", record]` unions, fields in another order, fields we do not
  know): the entry goes through the models (`entry_from_record` / `entry_to_record`), as every other
  rewrite does, so nothing is ever written in a shape we have not checked.

Datum boundaries come from fastavro itself: iterating a block decodes one record at a time from
the block's buffer, whose position then stands at the next record. That is checked for every
record (it must advance) and every block (it must end at the block's end); a fastavro that reads
otherwise falls back to the models rather than cutting wrong bytes.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import fastavro

from paimon_format.errors import CorruptFileError, InvalidTableStateError
from paimon_format.manifest.codec import (
    MANIFEST_VERSION,
    PARSED_MANIFEST_ENTRY_SCHEMA,
    check_file_size,
    creation_millis,
    decode_error,
    entry_from_record,
    entry_to_record,
    gc_paused,
    version_error,
)
from paimon_format.manifest.entries import ADD, DELETE
from paimon_format.manifest.schemas import MANIFEST_ENTRY_SCHEMA
from paimon_format.storage.fileio import FileIO

_VERSION_AND_ADD = bytes([MANIFEST_VERSION << 1, ADD << 1])
_VERSION_AND_DELETE = bytes([MANIFEST_VERSION << 1, DELETE << 1])
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class RawEntry:
    """A manifest entry's identity and manifest-list facts, decoded, with its datum in our layout."""

    __slots__ = (
        "kind",
        "partition",
        "bucket",
        "level",
        "file_name",
        "identity_rest",
        "schema_id",
        "row_count",
        "first_row_id",
        "file_size",
        "created",
        "datum",
    )

    def __init__(
        self,
        kind: int,
        partition: bytes,
        bucket: int,
        level: int,
        file_name: str,
        identity_rest: tuple,
        schema_id: int,
        row_count: int,
        first_row_id: int | None,
        file_size: int,
        created: int | None,
        datum: bytes,
    ) -> None:
        self.kind = kind
        self.partition = partition
        self.bucket = bucket
        self.level = level
        self.file_name = file_name
        self.identity_rest = identity_rest  # (extra files, embedded index, external path)
        self.schema_id = schema_id
        self.row_count = row_count
        self.first_row_id = first_row_id
        self.file_size = file_size
        self.created = created  # `_CREATION_TIME` as the epoch millis stored (None: unset)
        self.datum = datum

    def identifier(self) -> tuple:
        """The same identity as `ManifestEntry.identifier()` (a DELETE cancels only its own ADD)."""
        return (self.partition, self.bucket, self.level, self.file_name, *self.identity_rest)

    def describe(self) -> str:
        return f"file {self.file_name} (bucket {self.bucket}, level {self.level})"

    def as_delete(self) -> RawEntry:
        """The DELETE that cancels this ADD: the same datum but for `_KIND`.

        In our layout a datum starts with `_VERSION` (2, the zigzag varint 0x04) and `_KIND` (ADD 0,
        DELETE 1: the varints 0x00 and 0x02), one byte each; anything else is refused.
        """
        if self.kind != ADD or self.datum[:2] != _VERSION_AND_ADD:
            raise ValueError(f"{self.describe()}: only an ADD entry can be turned into its DELETE")
        return RawEntry(
            DELETE,
            self.partition,
            self.bucket,
            self.level,
            self.file_name,
            self.identity_rest,
            self.schema_id,
            self.row_count,
            self.first_row_id,
            self.file_size,
            self.created,
            _VERSION_AND_DELETE + self.datum[2:],
        )

    def __reduce__(self) -> tuple:
        return (RawEntry, tuple(getattr(self, name) for name in self.__slots__))


def read_raw_manifest(file_io: FileIO, path: str, expected_size: int | None = None) -> list[RawEntry]:
    """A manifest's entries as RawEntry; `expected_size` (ManifestFileMeta.file_size) catches truncation."""
    data = file_io.read_bytes(path)
    check_file_size(data, path, expected_size)
    with gc_paused():
        return list(iter_raw_entries(data, path))


def iter_raw_entries(data: bytes, path: str = "?") -> Iterator[RawEntry]:
    """A manifest's entries as RawEntry, in file order; a broken file raises CorruptFileError naming
    `path` when the iteration reaches the damage (as `iter_manifest_entries` does)."""
    return _iter_checked(data, path, raw_entry)


def iter_source_entries(data: bytes, path: str = "?") -> tuple[str, Iterator[RawEntry]]:
    """(writer schema text, entries) with each datum in the file's OWN layout, whatever it is.

    For rewrites that write the entries back under that same schema (`manifest_concat`): no layout
    conversion is needed, so every writer's files qualify. Such entries must never reach a writer
    of our schema (`rolling_write_raw_manifests`); `manifest_concat` keeps them apart by schema.
    """
    reader = _block_reader(data, path)
    schema_text = reader.metadata.get("avro.schema", "")
    return schema_text, _iter_checked(data, path, raw_entry, reader=reader, padding=b"")


def iter_raw_records(data: bytes, path: str = "?") -> Iterator[tuple[dict[str, Any], bytes | None]]:
    """(record, datum) per entry: the checked record as fastavro decodes it, with its bytes in our
    layout, or None where the layout is not one we copy (`raw_entry` then encodes it).

    For scans that need the bytes of only some entries (a partition drop): building a RawEntry
    costs little, but encoding a foreign layout's entry costs as much as decoding it.
    """
    return _iter_checked(data, path, _pair)


def _pair(record: dict[str, Any], datum: bytes | None) -> tuple[dict[str, Any], bytes | None]:
    return record, datum


def _block_reader(data: bytes, path: str) -> Any:
    try:
        return fastavro.block_reader(io.BytesIO(data))
    except Exception as error:  # noqa: BLE001 - a broken header, mapped as the model decoder maps it
        raise decode_error(error, path, -1, "manifest") from None


def _iter_checked(
    data: bytes,
    path: str,
    build: Callable[[dict[str, Any], bytes | None], Any],
    reader: Any = None,
    padding: bytes | None = None,
) -> Iterator[Any]:
    """Checked records with their datums: padded into our layout (`padding` None: as the writer
    schema allows), or cut as they are (`padding` b"" with the file's own reader: its own layout)."""
    index = -1
    own_layout = reader is not None
    try:
        if reader is None:
            reader = fastavro.block_reader(io.BytesIO(data))
            padding = _padding_for(reader.metadata.get("avro.schema", ""))
        for block in reader:
            buffer = block.bytes_
            raw = buffer.getvalue()
            position = buffer.tell()
            copied = padding is not None
            for record in block:
                index += 1
                end = buffer.tell()
                if copied and end <= position:
                    copied = False  # this fastavro does not read records from the buffer: use the models
                datum = raw[position:end] + padding if copied else None  # type: ignore[operator]
                position = end
                if record is None:
                    raise CorruptFileError(path, f"record {index} is null")
                version = record.get("_VERSION")
                if version != MANIFEST_VERSION:
                    raise version_error(path, index, version, MANIFEST_VERSION)
                kind = record["_KIND"]
                if kind != ADD and kind != DELETE:
                    raise ValueError(f"unknown _KIND {kind}")
                if datum is None and own_layout:  # the position did not advance: encode it back as it was
                    out = io.BytesIO()
                    fastavro.schemaless_writer(out, reader.writer_schema, record)
                    datum = out.getvalue()
                yield build(record, datum)
            if copied and position != len(raw):
                raise CorruptFileError(
                    path, f"a block ends {len(raw) - position} bytes after its last record"
                )
    except CorruptFileError:
        raise
    except Exception as error:  # noqa: BLE001 - mapped as the model decoder maps it
        raise decode_error(error, path, index, "manifest") from None


def iter_wanted_deletes(
    data: bytes,
    path: str,
    wanted: Callable[[bytes], bool],
    decided: dict[bytes, bool],
    unwanted: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[RawEntry]:
    """The DELETE of every entry whose partition is `wanted`, from a manifest that its list record
    says holds ADDs only (a DELETE entry raises InvalidTableStateError naming `path`).

    Why its own loop: a partition drop reads every entry of a table and keeps perhaps half, so an
    entry it skips must cost no more than its decode and one dict lookup; `iter_raw_records` cuts
    and pairs every datum and passes through two more generators. `decided` caches `wanted` per
    partition across manifests; `unwanted(record)` sees each skipped record (a summary of all).
    Checked as `iter_raw_records` is: version, kind, record and block boundaries, decode errors.
    """
    index = -1
    try:
        reader = fastavro.block_reader(io.BytesIO(data))
        padding = _padding_for(reader.metadata.get("avro.schema", ""))
        for block in reader:
            buffer = block.bytes_
            raw = buffer.getvalue()
            tell = buffer.tell
            position = tell()
            copied = padding is not None
            for record in block:
                index += 1
                end = tell()
                if end <= position:
                    copied = False  # this fastavro does not read records from the buffer: use the models
                if record is None:
                    raise CorruptFileError(path, f"record {index} is null")
                if record["_VERSION"] != MANIFEST_VERSION:
                    raise version_error(path, index, record["_VERSION"], MANIFEST_VERSION)
                if record["_KIND"] != ADD:
                    raise _unexpected_kind(path, record)
                partition = record["_PARTITION"]
                want = decided.get(partition)
                if want is None:
                    want = decided[partition] = bool(_called(wanted, partition))
                if want:
                    if copied and raw[position : position + 2] == _VERSION_AND_ADD:
                        yield _built(record, DELETE, _VERSION_AND_DELETE + raw[position + 2 : end] + padding)
                    else:  # a layout we do not copy: encoded in ours through the models
                        yield raw_entry(record, None).as_delete()
                elif unwanted is not None:
                    _called(unwanted, record)
                position = end
            if copied and position != len(raw):
                raise CorruptFileError(
                    path, f"a block ends {len(raw) - position} bytes after its last record"
                )
    except (CorruptFileError, InvalidTableStateError):
        raise
    except _CallbackFailed as failed:
        raise failed.error from None  # the caller's selection failed, not the manifest
    except KeyError as error:
        raise CorruptFileError(path, f"required field {error} is missing from a manifest entry") from None
    except Exception as error:  # noqa: BLE001 - mapped as the model decoder maps it
        raise decode_error(error, path, index, "manifest") from None


class _CallbackFailed(Exception):
    """A caller's function failed inside a manifest loop: its error, not a decode error."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _called(function: Callable[[Any], Any], argument: Any) -> Any:
    try:
        return function(argument)
    except Exception as error:  # noqa: BLE001 - handed back unchanged by the loop
        raise _CallbackFailed(error) from error


def _unexpected_kind(path: str, record: dict[str, Any]) -> Exception:
    kind = record["_KIND"]
    if kind != DELETE:
        return ValueError(f"unknown _KIND {kind}")
    return InvalidTableStateError(
        f"{path}: holds a DELETE of {_built(record, kind, b'').describe()} but its manifest list "
        "record counts no DELETE"
    )


def raw_entry(record: dict[str, Any], datum: bytes | None) -> RawEntry:
    """The RawEntry of a checked record (from `iter_raw_records`); `datum` None: encoded in our
    layout through the models (raises KeyError for a missing required field)."""
    if datum is None:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(
            buffer, PARSED_MANIFEST_ENTRY_SCHEMA, entry_to_record(entry_from_record(record))
        )
        datum = buffer.getvalue()
    return _built(record, record["_KIND"], datum)


def _built(record: dict[str, Any], kind: int, datum: bytes) -> RawEntry:
    file = record["_FILE"]
    get = file.get
    return RawEntry(
        kind,
        record["_PARTITION"],
        record["_BUCKET"],
        file["_LEVEL"],
        file["_FILE_NAME"],
        (tuple(get("_EXTRA_FILES") or ()), get("_EMBEDDED_FILE_INDEX"), get("_EXTERNAL_PATH")),
        file["_SCHEMA_ID"],
        file["_ROW_COUNT"],
        get("_FIRST_ROW_ID"),
        file["_FILE_SIZE"],
        creation_millis(get("_CREATION_TIME")),
        datum,
    )


@functools.lru_cache(maxsize=64)
def _padding_for(schema_text: str) -> bytes | None:
    """The bytes that turn a datum of this writer schema into one of ours, or None (use the models).

    b"" for our exact layout; one 0 byte (the null branch of `["null", T]`) per nullable `_FILE`
    field that ours has after the writer's last one.
    """
    try:
        theirs = _shape(json.loads(schema_text), {})
    except (ValueError, TypeError, KeyError):
        return None
    ours = _OUR_SHAPE
    if theirs == ours:
        return b""
    if theirs[0] != "record" or len(theirs[1]) != len(ours[1]) or theirs[1][:-1] != ours[1][:-1]:
        return None
    (their_name, their_file), (our_name, our_file) = theirs[1][-1], ours[1][-1]
    if their_name != our_name or their_file[0] != "record":
        return None
    their_fields, our_fields = their_file[1], our_file[1]
    if our_fields[: len(their_fields)] != their_fields:
        return None
    missing = our_fields[len(their_fields) :]
    if not all(shape[0] == "union" and shape[1][0] == "null" for _name, shape in missing):
        return None
    return b"\x00" * len(missing)


def _shape(schema: Any, named: dict[str, Any]) -> Any:
    """What decides a schema's binary encoding, with field names (their meaning): no record names,
    namespaces, defaults, docs or logical types."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema
        return named[schema.rsplit(".", 1)[-1]]
    if isinstance(schema, list):
        return ("union", tuple(_shape(branch, named) for branch in schema))
    kind = schema["type"]
    if kind == "record" or kind == "error":
        fields = tuple((f["name"], _shape(f["type"], named)) for f in schema["fields"])
        shape = ("record", fields)
        named[schema["name"].rsplit(".", 1)[-1]] = shape
        return shape
    if kind == "array":
        return ("array", _shape(schema["items"], named))
    if kind == "map":
        return ("map", _shape(schema["values"], named))
    if kind == "enum":
        shape = ("enum", tuple(schema["symbols"]))
        named[schema["name"].rsplit(".", 1)[-1]] = shape
        return shape
    if kind == "fixed":
        shape = ("fixed", schema["size"])
        named[schema["name"].rsplit(".", 1)[-1]] = shape
        return shape
    return _shape(kind, named)  # {"type": "long", "logicalType": ...} and nested type objects


_OUR_SHAPE = _shape(MANIFEST_ENTRY_SCHEMA, {})
