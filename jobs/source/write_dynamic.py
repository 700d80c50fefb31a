"""Dynamic-bucket primary-key tables (`bucket = -1`) through `df.write.format("paimon")`.

A key's bucket comes from the partition's HASH index. The write job shuffles so that one task
assigns every key of a partition's assigner (`jobs.writing.dynamic_bucket`); a Python data source
cannot shuffle its input, so here every task may meet any key, and the tasks must agree on the
bucket of a new key without talking to each other. They do, because the bucket is a function of
the key hash and the base snapshot's index alone, which every task reads alike:

- a key the index knows keeps its bucket;
- a new key goes to one of the partition's *candidates*: its buckets holding fewer than
  `dynamic-bucket.target-row-num` hashes, then `fresh` unused bucket numbers (the lowest ones;
  `fresh` = `dynamic-bucket.initial-buckets` or `dynamic-bucket.assigner-parallelism`, default 1),
  chosen by `abs(hash % len(candidates))`. A bucket with room may thus take more than the target
  in one write (the target is a size goal, Paimon's assigner keeps it exactly); the next write
  sees it full and opens new buckets.

Each task writes, per (partition, bucket) where it met keys new to the bucket, a *delta* HASH file
of those hashes. The commit (on the driver) merges, one bucket at a time, the bucket's base hashes
and every task's delta into the bucket's one new HASH file, and commits it with the data files
(`jobs.writing.dynamic_bucket.index_update`: it replaces the bucket's old entry, and refuses the
commit if another writer changed the index of a partition we wrote since the base snapshot).

Crash ordering: delta and merged HASH files get new names and nothing names them until the
snapshot lands; the deltas are deleted after the commit (or by `abort`), so a crash leaves them as
unreferenced files for remove-orphan-files, never a snapshot naming them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from jobs.writing.dynamic_bucket import index_relpath, index_update, num_assigners
from jobs.writing.settings import PartitionTest
from paimon_format.commit import IndexUpdate
from paimon_format.data.bucket_slices import split_by_partition_and_bucket
from paimon_format.index.hash_index import (
    MAX_BUCKETS,
    assigner_of,
    check_single_entry_per_bucket,
    hash_index_entries,
    key_hashes,
    read_hash_index,
    write_hash_index,
)
from paimon_format.manifest.entries import IndexManifestEntry
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.table import Table

_ROW = "__paimon_row"
_MERGE_THREADS = 8  # buckets merged at a time by the commit (each holds one bucket's hashes)


@dataclass
class _PartitionIndex:
    """The base index of one partition as a task sees it: sorted hashes and their buckets, and the
    candidates of new keys."""

    hashes: np.ndarray
    buckets: np.ndarray
    candidates: np.ndarray

    def assign(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each hash's bucket, which hashes are new to the index)."""
        buckets = np.empty(len(hashes), dtype=np.int32)
        new = np.ones(len(hashes), dtype=bool)
        if len(self.hashes):
            at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
            new = self.hashes[at] != hashes
            buckets[~new] = self.buckets[at[~new]]
        choice = assigner_of(hashes[new], len(self.candidates))
        buckets[new] = self.candidates[choice]
        return buckets, new


@dataclass
class DynamicBuckets:
    """The assignment rule of one write (made on the driver, shipped to the tasks), and a task's
    state: the partitions it loaded and the hashes new to each bucket it wrote."""

    target: Table
    schema: TableSchema
    base_snapshot_id: int | None
    replaces: PartitionTest | None  # partitions an overwrite replaces: assigned from an empty index
    fresh: int = 1
    _base: dict[bytes, list[IndexManifestEntry]] | None = None
    _partitions: dict[bytes, _PartitionIndex] = field(default_factory=dict)
    _new: dict[tuple[bytes, int], list[np.ndarray]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def plan(
        cls, target: Table, schema: TableSchema, base: int | None, replaces: PartitionTest | None
    ) -> DynamicBuckets:
        fresh = num_assigners(schema, 1)  # the options' assigner count, 1 when they name none
        return cls(target, schema, base, replaces, fresh)

    def for_task(self) -> DynamicBuckets:
        """The rule with a task's own (empty) state."""
        return DynamicBuckets(self.target, self.schema, self.base_snapshot_id, self.replaces, self.fresh)

    def base_entries(self) -> dict[bytes, list[IndexManifestEntry]]:
        """The base snapshot's HASH entries by partition (read once per task, and by the commit)."""
        if self._base is None:
            manager = self.target.snapshot_manager
            snapshot = manager.snapshot(self.base_snapshot_id) if self.base_snapshot_id is not None else None
            self._base = hash_index_entries(self.target, snapshot)
            for entries in self._base.values():
                check_single_entry_per_bucket(entries, f"{self.target.path} snapshot {self.base_snapshot_id}")
        return self._base

    def _entries(self, partition: bytes) -> list[IndexManifestEntry]:
        if self.replaces is not None and self.replaces(partition):
            return []
        return self.base_entries().get(partition, [])

    def _partition(self, partition: bytes) -> _PartitionIndex:
        index = self._partitions.get(partition)
        if index is None:
            index = self._load(self._entries(partition))
            self._partitions[partition] = index
        return index

    def _load(self, entries: list[IndexManifestEntry]) -> _PartitionIndex:
        target_rows = CoreOptions(self.schema.options).dynamic_bucket_target_row_num
        parts = [(read_hash_index(self.target, entry), entry.bucket) for entry in entries]
        hashes = np.concatenate([h for h, _ in parts]) if parts else np.empty(0, np.int32)
        buckets = np.concatenate([np.full(len(h), b, np.int32) for h, b in parts]) if parts else hashes
        order = np.argsort(hashes, kind="stable")
        with_room = sorted(b for h, b in parts if len(h) < target_rows)
        used = {b for _, b in parts}
        unused = (b for b in range(MAX_BUCKETS) if b not in used)
        fresh = [next(unused) for _ in range(self.fresh)]
        candidates = np.array(with_room + fresh, dtype=np.int32)
        return _PartitionIndex(hashes[order], buckets[order].astype(np.int32), candidates)

    def assign(self, data: pa.Table) -> np.ndarray:
        """The bucket of every row of `data` (conformed to the table), remembering new hashes."""
        hashes = key_hashes(data, self.schema)
        buckets = np.empty(data.num_rows, dtype=np.int32)
        helper = pa.table(
            {
                **{k: data.column(k) for k in self.schema.partition_keys},
                _ROW: pa.array(np.arange(data.num_rows, dtype=np.int64)),
            }
        )
        groups = np.zeros(data.num_rows, dtype=np.int32)
        for part in split_by_partition_and_bucket(helper, self.schema, 1, groups):
            rows = part.data.column(_ROW).to_numpy()
            assigned, new = self._partition(part.partition).assign(hashes[rows])
            buckets[rows] = assigned
            for bucket in np.unique(assigned[new]):
                self._new[(part.partition, int(bucket))].append(hashes[rows][new & (assigned == bucket)])
        return buckets

    def write_deltas(self, file_uuids: Callable[[], str]) -> list[IndexManifestEntry]:
        """One delta HASH file per bucket where this task met new keys (its new hashes), named with
        `file_uuids` (the write's and the task attempt's identity)."""
        written = []
        try:
            for (partition, bucket), parts in self._new.items():
                hashes = np.concatenate(parts)
                written.append(write_hash_index(self.target, partition, bucket, hashes, file_uuids()))
        except BaseException:
            delete_index_files(self.target, written)
            raise
        return written


def merged_index(
    rule: DynamicBuckets,
    deltas: list[IndexManifestEntry],
    written_partitions: set[bytes],
    file_uuids: Callable[[], str],
) -> IndexUpdate:
    """The commit's index change: per bucket with deltas, one new HASH file (its base hashes, unless
    replaced, with every delta's; named with `file_uuids`), replacing the bucket's entry. Files
    written: in `IndexUpdate.add` (`commit_written` removes them if the commit fails)."""
    by_bucket: dict[tuple[bytes, int], list[IndexManifestEntry]] = defaultdict(list)
    for entry in deltas:
        by_bucket[(bytes(entry.partition), entry.bucket)].append(entry)
    names = {key: file_uuids() for key in sorted(by_bucket)}  # drawn here: the merges run in threads

    def merge(key: tuple[bytes, int]) -> IndexManifestEntry:
        partition, bucket = key
        old = [e for e in rule._entries(partition) if e.bucket == bucket]
        hashes = [read_hash_index(rule.target, e) for e in old + by_bucket[key]]
        return write_hash_index(rule.target, partition, bucket, np.concatenate(hashes), names[key])

    merged: list[IndexManifestEntry] = []
    try:
        with ThreadPoolExecutor(_MERGE_THREADS) as pool:
            for entry in pool.map(merge, sorted(by_bucket)):
                merged.append(entry)
    except BaseException:
        delete_index_files(rule.target, merged)
        raise
    return index_update(rule.target, rule.base_snapshot_id, merged, written_partitions, rule.replaces)


def delete_index_files(target: Table, entries: Iterable[IndexManifestEntry]) -> None:
    """Delete HASH files this write made that no commit names (deltas, or merges of a failed commit)."""
    target.file_io.delete_many([target.full_path(index_relpath(target, entry)) for entry in entries])
