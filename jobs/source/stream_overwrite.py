"""What a stream of a primary-key table delivers for an OVERWRITE snapshot: `streaming-read-overwrite`.

Paimon's stream scan skips OVERWRITE snapshots unless the option `streaming-read-overwrite` is true
(default false; a stream option, else the table's). Then, as its `readChanges` plan of the snapshot
and the streaming read of a split with before files, each partition and bucket the overwrite
touched delivers the merged rows of the files it removed as -D (their deletion vectors those of the
snapshot before) followed by the merged rows of the files it added as +I (Paimon keeps the kind a
merge ends with, which for rows written as inserts is +I); a bucket that lost no file delivers its
new files' rows unmerged with their kinds, like an APPEND. Paimon refuses the option on an append
table (it cannot retract rows) and with `changelog-producer` lookup or full-compaction (their
compactions would deliver the same changes again); so does the stream, naming the option.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa

from jobs.source.location import SourceOptionError
from paimon_format.data.prefetch import Prefetch
from paimon_format.errors import PaimonFormatError
from paimon_format.index.deletion_vectors import snapshot_deletion_files
from paimon_format.manifest.entries import ADD, DataFileMeta
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import read_entries, read_list
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import Split
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

READ_OVERWRITE = "streaming-read-overwrite"

Bucket = tuple[bytes, int]


@dataclass
class OverwriteSplit(Split):
    """Files an overwrite removed (`retract`: delivered as -D) or added in one bucket, read merged."""

    retract: bool = False


def read_overwrite_option(options: Mapping[str, str]) -> bool | None:
    """The stream's `streaming-read-overwrite` (None: not given, the table's option decides)."""
    lowered = {key.lower(): str(value).strip().lower() for key, value in options.items()}
    text = lowered.get(READ_OVERWRITE)
    if text is None:
        return None
    if text not in ("true", "false"):
        raise SourceOptionError(f"option {READ_OVERWRITE!r} must be true or false, got {text!r}")
    return text == "true"


def reads_overwrite(table: str, schema: TableSchema, given: bool | None) -> bool:
    """Whether the stream delivers overwrites: the stream's option, else the table's (default false).
    True on a table Paimon refuses it for is a `SourceOptionError` naming the option."""
    if given is None:
        text = str(schema.options.get(READ_OVERWRITE, "false")).strip().lower()
        given = text == "true"
    if not given:
        return False
    if not schema.primary_keys:
        raise SourceOptionError(
            f"{table}: option {READ_OVERWRITE!r} = true needs a primary-key table: an append table's "
            "stream cannot retract the rows an overwrite replaced (Paimon refuses it too)"
        )
    producer = CoreOptions(schema.options).changelog_producer
    if producer in ("lookup", "full-compaction"):
        raise SourceOptionError(
            f"{table}: option {READ_OVERWRITE!r} = true cannot go with 'changelog-producer' = {producer}: "
            "its compactions deliver the overwrite's changes again (Paimon refuses it too)"
        )
    return True


def overwrite_splits(table: Table, schema: TableSchema, snapshot: Snapshot) -> list[Split]:
    """The splits of an OVERWRITE snapshot's changes (module docstring), by bucket: the removed
    files (-D), then the added ones."""
    removed: dict[Bucket, list[DataFileMeta]] = {}
    added: dict[Bucket, list[DataFileMeta]] = {}
    total_buckets: dict[Bucket, int] = {}
    for entry in read_entries(table, read_list(table, snapshot.delta_manifest_list)):
        key = (entry.partition, entry.bucket)
        (added if entry.kind == ADD else removed).setdefault(key, []).append(entry.file)
        total_buckets[key] = entry.total_buckets
    vectors = CoreOptions(schema.options).deletion_vectors_enabled
    before = _deletion_files(table, _before(table, snapshot)) if vectors and removed else {}
    after = _deletion_files(table, snapshot) if vectors else {}
    splits: list[Split] = []
    for key, total in total_buckets.items():
        both = {f.file_name for f in removed.get(key, [])} & {f.file_name for f in added.get(key, [])}
        old = [f for f in removed.get(key, []) if f.file_name not in both]
        new = [f for f in added.get(key, []) if f.file_name not in both]
        if not old:
            if new:
                splits.append(Split(key[0], key[1], new, total, {}, True, snapshot.id))
            continue
        splits.append(OverwriteSplit(*key, old, total, _of(before, key, old), False, snapshot.id, True))
        if new:
            splits.append(OverwriteSplit(*key, new, total, _of(after, key, new), False, snapshot.id))
    return splits


def _before(table: Table, snapshot: Snapshot) -> Snapshot:
    try:
        return table.snapshot_manager.snapshot(snapshot.id - 1)
    except PaimonFormatError as error:
        raise SourceOptionError(
            f"{table.path}: the overwrite of snapshot {snapshot.id} is streamed with the deletion "
            f"vectors of snapshot {snapshot.id - 1}, which cannot be read ({error})"
        ) from None


def _deletion_files(table: Table, snapshot: Snapshot) -> dict:
    return snapshot_deletion_files(table, snapshot) if snapshot.index_manifest else {}


def _of(vectors: Mapping[Bucket, Mapping], key: Bucket, files: list[DataFileMeta]) -> dict:
    bucket = vectors.get(key, {})
    return {f.file_name: bucket[f.file_name] for f in files if f.file_name in bucket}


def overwrite_rows(
    table: Table, schema: TableSchema, split: OverwriteSplit, prefetch: Prefetch
) -> Iterator[tuple[pa.RecordBatch, str]]:
    """The merged rows of an overwrite split (deletes dropped) with the kind they are delivered as."""
    kind = "-D" if split.retract else "+I"
    for rows in read_split(table, split, read_schema=schema, prefetch=prefetch):
        yield rows, kind
