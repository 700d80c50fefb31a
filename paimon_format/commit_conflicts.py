"""What one commit attempt builds on, and whether its changes still apply there (spec §9).

An attempt commits on top of the latest snapshot it saw. Between the plan and the commit another
writer may have deleted a file this commit deletes too, or added one a second time; such a delta
no longer applies, and committing it would corrupt the table. That is a conflict: final, never
retried (a lost race for the next snapshot id is retried instead, by `SnapshotCommit`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from paimon_format.errors import CommitConflictError, PaimonFormatError
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import ManifestEntry
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import EntryMerger, data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

PartitionFilter = Callable[[bytes], bool]


@dataclass
class AttemptContext:
    """What one commit attempt knows about the table it commits on top of."""

    table: Table
    latest: Snapshot | None
    schema: TableSchema

    def live_entries(self, partition_filter: PartitionFilter | None = None) -> list[ManifestEntry]:
        """Live data files of the latest snapshot, optionally only those of some partitions.

        The filter is applied while streaming the manifests, so memory holds only the accepted
        partitions (an ADD and the DELETE that cancels it always share their partition).
        """
        if self.latest is None:
            return []
        merger = EntryMerger(f"{self.table.path} snapshot {self.latest.id}")
        for meta in data_manifests(self.table, self.latest):
            for entry in read_manifest(self.table.file_io, self.table.manifest_path(meta.file_name)):
                if partition_filter is None or partition_filter(entry.partition):
                    merger.add(entry)
        return merger.live()


def check_conflicts(ctx: AttemptContext, delta: list[ManifestEntry]) -> None:
    """Refuse a delta that no longer applies: deleting a file that is not live, or adding one twice.

    Also refuses a partition that would mix files written with different bucket counts.
    Raises `CommitConflictError`.
    """
    table = ctx.table
    changed = {entry.partition for entry in delta}
    merger = EntryMerger(f"{table.path} commit on snapshot {ctx.latest.id if ctx.latest else 0}")
    merger.add_all(ctx.live_entries(lambda partition: partition in changed))
    try:
        merger.add_all(delta)
        after = merger.live()
    except PaimonFormatError as error:
        raise CommitConflictError(f"{error}; the table changed underneath this commit") from None
    buckets_by_partition: dict[bytes, set[int]] = {}
    for entry in after:
        buckets_by_partition.setdefault(entry.partition, set()).add(entry.total_buckets)
    for partition, totals in buckets_by_partition.items():
        if len(totals) > 1:
            spec = table.partition_spec(partition) if ctx.schema.partition_keys else {}
            raise CommitConflictError(
                f"{table.path}: partition {spec} would mix files written with "
                f"different bucket counts {sorted(totals)}"
            )
