"""Manifest models: manifest entries, data-file metas, manifest-list records, index entries (spec §4).

Plain slotted dataclasses, pickled positionally (jobs ship millions of them between processes).
Their Avro encoding (records, schemas, codecs, reading and writing files) is
`paimon_format.manifest.codec`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, ClassVar

from paimon_format.model.binary_row import EMPTY_ROW

ADD = 0
DELETE = 1


def _positional_reduce(self: Any) -> tuple:
    """Pickle as (class, field values): much cheaper than the generic slots state for millions of entries."""
    return (type(self), tuple(getattr(self, name) for name in self.__slots__))


@dataclass(slots=True)
class SimpleStats:
    """Min/max rows (serialized BinaryRow bytes) and per-column null counts (§4.2)."""

    min_values: bytes
    max_values: bytes
    null_counts: list[int | None]

    # Shared empty stats (arity-0 rows, no null counts). Do not mutate; `empty()` gives a fresh copy.
    EMPTY: ClassVar[SimpleStats]

    @staticmethod
    def empty() -> SimpleStats:
        return SimpleStats(EMPTY_ROW, EMPTY_ROW, [])


SimpleStats.EMPTY = SimpleStats(EMPTY_ROW, EMPTY_ROW, [])


@dataclass(slots=True)
class DataFileMeta:
    """One data (or changelog) file as a manifest records it (§4.5); None = field absent/null."""

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
    creation_time: dt.datetime | None = None  # naive: Java's local wall-clock time stored as UTC millis
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
    """An ADD or DELETE of one file in one partition and bucket (§4.4)."""

    kind: int  # ADD (0) or DELETE (1)
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

    def describe(self) -> str:
        return f"file {self.file.file_name} (bucket {self.bucket}, level {self.file.level})"

    @property
    def is_add(self) -> bool:
        return self.kind == ADD

    def as_delete(self) -> ManifestEntry:
        """The DELETE of this ADD: it shares the DataFileMeta, so every identifying field matches."""
        if self.kind != ADD:
            raise ValueError(f"{self.file.file_name}: only an ADD entry can be turned into its DELETE")
        return ManifestEntry(DELETE, self.partition, self.bucket, self.total_buckets, self.file)


def delete_entry(added: ManifestEntry) -> ManifestEntry:
    """The DELETE entry that cancels `added` (a copy of its partition, bucket and DataFileMeta)."""
    return added.as_delete()


@dataclass(slots=True)
class ManifestFileMeta:
    """One manifest file as a manifest list records it (§4.3).

    `total_buckets` and `extra_files` exist only in pypaimon/paimon-rust lists; they are read so a
    referenced sidecar file is known, and written only when set (see MANIFEST_FILE_META_SCHEMA).
    """

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
    total_buckets: int | None = None
    extra_files: list[str] | None = None


@dataclass(slots=True)
class IndexManifestEntry:
    """An index file (hash index, deletion vectors, global index) of one partition and bucket (§4.6).

    `deletion_vector_ranges` items are dicts {"f0": data file, "f1": offset, "f2": length,
    "_CARDINALITY": int | None}; `global_index` is a dict keyed by the Avro field names of §4.6.
    """

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
