"""Building blocks the benchmarks share to build their tables with our own writers.

Benchmarks build big tables fast by writing manifests and snapshots directly (no data is read back),
and small tables with real Parquet data through the write path; both shapes are used by more than
one benchmark (bench_orphans and the S3 benchmark, bench_compact and the S3 benchmark), so they live
here once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import pyarrow as pa

from paimon_format.commit import BATCH_COMMIT_IDENTIFIER, CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.manifest.codec import write_manifest_list
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.model.arrow_types import from_arrow
from paimon_format.model.schema import new_table_schema
from paimon_format.snapshot import Snapshot
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table


def commit_manifest_snapshots(table: Table, metas: Sequence[ManifestFileMeta], snapshots: int) -> None:
    """`snapshots` APPEND snapshots over already written manifests: snapshot s's delta list names the
    s-th share of `metas`, its base list those before it, so every manifest is live at the latest.

    The snapshots are a second apart and end now (expiry by age sees an ordered history); the hints
    are written last, as a commit writes them after its snapshot.
    """
    per_snapshot = -(-len(metas) // snapshots)
    now_ms = int(time.time() * 1000)
    for s in range(snapshots):
        base, delta = metas[: s * per_snapshot], metas[s * per_snapshot : (s + 1) * per_snapshot]
        base_name, delta_name = f"manifest-list-{uuid.uuid4()}-0", f"manifest-list-{uuid.uuid4()}-1"
        snapshot = Snapshot(
            id=s + 1,
            schema_id=0,
            base_manifest_list=base_name,
            delta_manifest_list=delta_name,
            base_manifest_list_size=write_manifest_list(table.file_io, table.manifest_path(base_name), base),
            delta_manifest_list_size=write_manifest_list(
                table.file_io, table.manifest_path(delta_name), delta
            ),
            commit_user="bench",
            commit_identifier=BATCH_COMMIT_IDENTIFIER,
            commit_kind="APPEND",
            time_millis=now_ms - (snapshots - s) * 1000,
            total_record_count=sum(m.num_added_files for m in base + delta),
            delta_record_count=sum(m.num_added_files for m in delta),
        )
        assert table.snapshot_manager.try_commit(snapshot)
    table.snapshot_manager.write_latest_hint(snapshots)
    table.snapshot_manager.write_earliest_hint(1)


def create_table(root: str, data: pa.Table, primary_keys: list[str], options: dict[str, str]) -> Table:
    """A new table at `root` whose columns are `data`'s."""
    table = Table(FileIO.for_path(root), root)
    fields = [(f.name, from_arrow(f.type)) for f in data.schema]
    table.schema_manager.create_table(new_table_schema(fields, primary_keys=primary_keys, options=options))
    table.refresh()
    return table


def commit_files(table: Table, parts: Sequence[pa.Table], first_sequence: int) -> None:
    """One APPEND snapshot of every part, each part written as files of its own (small files)."""
    messages = []
    for index, part in enumerate(parts):
        for partition, bucket, files in write_table_files(
            table.file_io, table.path, table.schema, part, first_sequence + index * part.num_rows
        ):
            messages.append(CommitMessage(partition, bucket, table.options.bucket, files))
    SnapshotCommit(table).append(messages)
