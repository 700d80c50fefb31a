"""Dynamic-bucket primary-key tables (`bucket = -1`): the HASH index and bucket assignment.

In dynamic bucket mode the bucket of a key is not computed from the key: it is remembered. Each
partition's key-hash -> bucket assignment is persisted as `HASH` index files, listed in the
snapshot's index manifest, one file per (partition, bucket) holding the int32 hashes of every key
written to that bucket (facts from Paimon 1.0's `HashIndexFile`, `IntFileUtils`,
`HashIndexMaintainer`, `PartitionIndex`, `HashBucketAssigner`, `IndexManifestFileHandler`):

* file layout: the hashes back to back as 4-byte big-endian ints, nothing else; the index entry's
  `_ROW_COUNT` is their number. Files are named like any index file (`index-<uuid>-<n>`).
* the hash is `BinaryRow.hashCode()` of the trimmed primary key (primary-key columns that are not
  partition columns), the same row hash fixed-bucket tables take modulo the bucket count.
* assignment: a key hash already in the partition's index goes to that bucket (else readers would
  see the key twice); a new one goes to a bucket holding fewer than `dynamic-bucket.target-row-num`
  hashes, or to the lowest unused bucket number. With several assigners per partition, assigner `i`
  of `n` handles the hashes with `abs(hash % n) == i` and creates or fills only buckets with
  `bucket % n == i`, so assigners never pick the same new bucket.
* the writer of a bucket keeps every hash ever written there (deletes do not remove hashes) and
  writes a new file holding old and new hashes when a new one came; the commit replaces the
  (partition, bucket)'s `HASH` entry in the index manifest with the new file's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from paimon_format.data.bucket import hash_array
from paimon_format.errors import CorruptFileError, UnsupportedOperationError
from paimon_format.index.deletion_vectors import index_file_path, write_new_index_file
from paimon_format.manifest.entries import IndexManifestEntry
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import index_entries
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

HASH_INDEX = "HASH"
MAX_BUCKETS = 32767  # Paimon stores bucket numbers of the assignment as Java shorts

_HASH_DTYPE = np.dtype(">i4")


# -- the index files -----------------------------------------------------------------------------------


def encode_hash_index(hashes: np.ndarray) -> bytes:
    """A HASH index file's bytes: the hashes as big-endian int32, in the given order."""
    return np.asarray(hashes, dtype=np.int32).astype(_HASH_DTYPE).tobytes()


def decode_hash_index(data: bytes, path: str) -> np.ndarray:
    """The hashes of a HASH index file (int32); a length that is not a multiple of 4 is corrupt."""
    if len(data) % 4:
        raise CorruptFileError(path, f"hash index of {len(data)} bytes: not a whole number of int32 hashes")
    return np.frombuffer(data, dtype=_HASH_DTYPE).astype(np.int32)


def read_hash_index(table: Table, entry: IndexManifestEntry) -> np.ndarray:
    """The hashes one HASH index entry names; its row count must match what the file holds."""
    path = index_file_path(table, entry)
    hashes = decode_hash_index(table.file_io.read_bytes(path), path)
    if entry.row_count is not None and len(hashes) != entry.row_count:
        raise CorruptFileError(
            path, f"hash index holds {len(hashes)} hashes, its index manifest entry says {entry.row_count}"
        )
    return hashes


def write_hash_index(
    table: Table, partition: bytes, bucket: int, hashes: np.ndarray, file_uuid: str | None = None
) -> IndexManifestEntry:
    """Write a new HASH index file (sorted, distinct hashes) and return its ADD index entry
    (`file_uuid`: the uuid in its name, random when None).

    The name is new, so a crash leaves at most an orphan; the file takes effect only when a commit
    puts the entry into an index manifest.
    """
    distinct = np.unique(np.asarray(hashes, dtype=np.int32))
    return write_new_index_file(
        table, partition, bucket, HASH_INDEX, encode_hash_index(distinct), len(distinct), file_uuid=file_uuid
    )


def hash_index_entries(table: Table, snapshot: Snapshot | None) -> dict[bytes, list[IndexManifestEntry]]:
    """A snapshot's HASH index entries by partition (nothing for no snapshot or no index manifest)."""
    result: dict[bytes, list[IndexManifestEntry]] = {}
    if snapshot is None:
        return result
    for entry in index_entries(table, snapshot):
        if entry.index_type == HASH_INDEX:
            result.setdefault(bytes(entry.partition), []).append(entry)
    return result


def check_single_entry_per_bucket(entries: Iterable[IndexManifestEntry], where: str) -> None:
    """Two HASH files for one (partition, bucket) is a broken index: which one holds the truth?"""
    seen: set[tuple[bytes, int]] = set()
    for entry in entries:
        key = (bytes(entry.partition), entry.bucket)
        if key in seen:
            raise CorruptFileError(
                where, f"two HASH index entries for bucket {entry.bucket} of one partition"
            )
        seen.add(key)


# -- key hashes ----------------------------------------------------------------------------------------


def key_hashes(data: pa.Table, schema: TableSchema) -> np.ndarray:
    """The HASH-index hash of every row: the row hash of its trimmed primary key (table-typed columns)."""
    keys = schema.trimmed_primary_keys()
    return hash_array([data.column(k) for k in keys], [schema.field(k).type for k in keys])


def assigner_of(hashes: np.ndarray, num_assigners: int) -> np.ndarray:
    """Which of `num_assigners` assigners of a partition handles each key hash (Java: abs(hash % n))."""
    return np.abs(np.fmod(hashes.astype(np.int64), num_assigners)).astype(np.int32)


# -- assignment ----------------------------------------------------------------------------------------


@dataclass
class PartitionAssigner:
    """One assigner's view of one partition: known key hashes -> bucket, and how full its buckets are.

    Lookups are vectorised over a few sorted numpy runs of (hash, bucket): the hashes the index
    already holds, and those this write assigned, kept as runs of halving size (a new run merges
    into the previous one while it is at least half as long, so a write of n keys sorts O(n log n)
    in all and a lookup searches O(log n) runs). Memory is a few bytes per key of the partition, as
    Java's Int2ShortHashMap.
    """

    target_row_num: int
    num_assigners: int = 1
    assigner_id: int = 0
    counts: dict[int, int] = field(default_factory=dict)  # this assigner's buckets -> hashes held
    _runs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # sorted (hashes, buckets)

    @classmethod
    def load(
        cls,
        table: Table,
        entries: Iterable[IndexManifestEntry],
        target_row_num: int,
        num_assigners: int = 1,
        assigner_id: int = 0,
    ) -> PartitionAssigner:
        """The assigner for a partition whose HASH index entries are `entries` (none: a new partition)."""
        if target_row_num < 1:
            raise UnsupportedOperationError(
                f"dynamic-bucket.target-row-num must be at least 1, got {target_row_num}"
            )
        hash_parts, bucket_parts, counts = [], [], {}
        for entry in entries:
            hashes = read_hash_index(table, entry)
            if entry.bucket % num_assigners == assigner_id % num_assigners:
                counts[entry.bucket] = counts.get(entry.bucket, 0) + len(hashes)
            mine = hashes[assigner_of(hashes, num_assigners) == assigner_id] if num_assigners > 1 else hashes
            hash_parts.append(mine)
            bucket_parts.append(np.full(len(mine), entry.bucket, dtype=np.int32))
        assigner = cls(target_row_num, num_assigners, assigner_id, counts)
        if hash_parts:
            hashes = np.concatenate(hash_parts)
            buckets = np.concatenate(bucket_parts)
            assigner._add_run(hashes, buckets)
        return assigner

    def _lookup(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found mask, bucket where found) against the loaded and the newly assigned hashes."""
        found = np.zeros(len(hashes), dtype=bool)
        buckets = np.full(len(hashes), -1, dtype=np.int32)
        for known, known_buckets in self._runs:
            if not len(known):
                continue
            at = np.minimum(np.searchsorted(known, hashes), len(known) - 1)
            hit = (known[at] == hashes) & ~found
            buckets[hit] = known_buckets[at[hit]]
            found |= hit
        return found, buckets

    def assign(self, hashes: np.ndarray) -> np.ndarray:
        """The bucket of every key hash (int32), remembering the new ones for the rest of the write.

        New hashes are taken in the order they first appear; each fills the lowest-numbered bucket
        of this assigner that holds fewer than `target_row_num` hashes, else opens the lowest bucket
        number not used yet.
        """
        hashes = np.asarray(hashes, dtype=np.int32)
        found, buckets = self._lookup(hashes)
        if found.all():
            return buckets
        distinct, first = np.unique(hashes[~found], return_index=True)
        arrival = distinct[np.argsort(first, kind="stable")]
        new_buckets = np.empty(len(arrival), dtype=np.int32)
        start = 0
        while start < len(arrival):
            bucket = self._open_bucket()
            take = min(self.target_row_num - self.counts[bucket], len(arrival) - start)
            new_buckets[start : start + take] = bucket
            self.counts[bucket] += take
            start += take
        self._add_run(arrival, new_buckets)
        order = np.argsort(arrival)
        sorted_new, sorted_buckets = arrival[order], new_buckets[order]
        missing = ~found
        at = np.searchsorted(sorted_new, hashes[missing])
        buckets[missing] = sorted_buckets[at]
        return buckets

    def _open_bucket(self) -> int:
        """The lowest bucket of this assigner with room, or a new one (the lowest number unused)."""
        for bucket in sorted(self.counts):
            if self.counts[bucket] < self.target_row_num:
                return bucket
        bucket = self.assigner_id % self.num_assigners
        while bucket in self.counts:
            bucket += self.num_assigners
        if bucket >= MAX_BUCKETS:
            raise UnsupportedOperationError(
                f"dynamic bucket: a partition would need more than {MAX_BUCKETS} buckets; "
                f"raise dynamic-bucket.target-row-num (now {self.target_row_num})"
            )
        self.counts[bucket] = 0
        return bucket

    def _add_run(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Remember (hash, bucket) pairs as a sorted run; merge runs so each is under half the previous."""
        order = np.argsort(hashes, kind="stable")
        self._runs.append((hashes[order], buckets[order]))
        while len(self._runs) > 1 and 2 * len(self._runs[-1][0]) >= len(self._runs[-2][0]):
            (last_h, last_b), (prev_h, prev_b) = self._runs.pop(), self._runs.pop()
            merged_h, merged_b = np.concatenate((prev_h, last_h)), np.concatenate((prev_b, last_b))
            order = np.argsort(merged_h, kind="stable")
            self._runs.append((merged_h[order], merged_b[order]))


def updated_bucket_index(
    table: Table,
    partition: bytes,
    bucket: int,
    old: IndexManifestEntry | None,
    written_hashes: np.ndarray,
) -> IndexManifestEntry | None:
    """The new HASH index file of a bucket that took rows with `written_hashes`, or None if unchanged.

    As Paimon's writer: the bucket's index holds every hash ever written to it; a new file (old
    hashes plus the new ones) is written only when a new hash came. `old` is the bucket's current
    entry (None for a new bucket, or for a partition an overwrite replaces).
    """
    written = np.unique(np.asarray(written_hashes, dtype=np.int32))
    if old is None:
        return write_hash_index(table, partition, bucket, written) if len(written) else None
    existing = np.unique(read_hash_index(table, old))
    if np.isin(written, existing, assume_unique=True).all():
        return None
    return write_hash_index(table, partition, bucket, np.union1d(existing, written))
