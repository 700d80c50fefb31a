"""A small warehouse for the health page (tests/jobs/test_report.py, scripts/render_report.sh).

- `db.t`: the sample append table (tests/support/table_states.py): 4 snapshots, tag t2.
- `db.orders`: a primary-key table (2 buckets, partitioned by dt) with upserts, a compaction of one
  partition (so its manifests hold DELETE entries), tags `daily-1` and `daily-2`, a branch `audit`,
  a consumer `etl`, and an option whose value is markup (`<script>`): the page must show it as text.
- `db.events`: a metadata-only append table of `event_files` files across 12 partitions with sizes
  from 100 KiB to 300 MiB (only its manifests exist: the page never opens a data file), 4 snapshots
  where its options keep at most 3, and a partition expiration time.
- `db.broken` (with `broken=True`): the sample table with a truncated manifest.

And `write_run_records`: one maintain record and one compact record about these tables.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa

from jobs.create_branch import CreateBranchRequest, create_branch
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.consumers import ConsumerManager
from paimon_format.data.writer import write_table_files
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.changelog_tables import compact_partition
from tests.support.factories import data_file, make_table, message
from tests.support.table_states import TABLE_OPTIONS, build_sample_table, copy_warehouse

MARKUP = "<script>alert('x')</script>"
MIB = 1024 * 1024


def build_orders(warehouse: str) -> Table:
    """db.orders of the module docstring."""
    table = make_table(
        f"{warehouse}/db.db/orders",
        partition_keys=("dt",),
        primary_keys=("id", "dt"),
        options={**TABLE_OPTIONS, "bucket": "2", "x.owner-note": MARKUP, "consumer.expiration-time": "7d"},
    )
    for step in range(5):
        ids = list(range(step * 3, step * 3 + 8))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "dt": [f"2024-01-0{1 + i % 2}" for i in ids],
                "v": [f"v{step}-{i}" for i in ids],
            }
        )
        written = write_table_files(table.file_io, table.path, table.schema, data, step * 100)
        SnapshotCommit(table).append([CommitMessage(p, bucket, 2, files) for p, bucket, files in written])
        if step == 1:
            table.tag_manager.create_tag("daily-1", table.snapshot_manager.latest())
    compact_partition(table, "2024-01-01")
    table.tag_manager.create_tag("daily-2", table.snapshot_manager.latest())
    create_branch(table, CreateBranchRequest("audit", tag="daily-1"))
    ConsumerManager(table.file_io, table.path).reset_consumer("etl", 2)
    return table


def build_events(warehouse: str, event_files: int = 240, seed: int = 7) -> Table:
    """db.events of the module docstring: `event_files` files in 4 commits, no data files written."""
    options = {
        **TABLE_OPTIONS,
        "snapshot.num-retained.min": "1",
        "snapshot.num-retained.max": "3",
        "partition.expiration-time": "30 d",
    }
    table = make_table(f"{warehouse}/db.db/events", options=options)
    rng = random.Random(seed)
    sizes = (100 * 1024, 2 * MIB, 20 * MIB, 90 * MIB, 300 * MIB)
    weights = (8, 5, 3, 2, 1)
    per_commit = max(event_files // 4, 1)
    made = 0
    for commit in range(4):
        messages = []
        for index in range(min(per_commit, event_files - made)):
            day = f"2024-02-{1 + rng.randrange(12):02d}"
            size = int(rng.choices(sizes, weights)[0] * rng.uniform(0.6, 1.0))
            name = f"data-{commit}-{index}.parquet"
            messages.append(message(table, [day], data_file(name, rows=size // 100, size=size)))
            made += 1
        SnapshotCommit(table).append(messages)
    return table


def build_health_warehouse(warehouse: str, broken: bool = False, event_files: int = 240) -> str:
    """The warehouse of the module docstring; returns it."""
    build_sample_table(warehouse)
    build_orders(warehouse)
    build_events(warehouse, event_files)
    if broken:
        copy_warehouse(f"{warehouse}/db.db/t", f"{warehouse}/db.db/broken")
        truncate_latest_manifest(f"{warehouse}/db.db/broken")
    return warehouse


def truncate_latest_manifest(root: str) -> str:
    """Cut the last data manifest of the table at `root` in half; returns its file name."""
    table = Table(FileIO.for_path(root), root)
    name = data_manifests(table, table.snapshot_manager.latest())[-1].file_name
    path = Path(table.manifest_path(name))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return name


def write_run_records(directory: str, now: str = "2026-11-26T03:00:00.000+00:00") -> list[str]:
    """A maintain record (db.t done with figures, db.orders failed) and a standalone compact record
    of db.orders, as JSON files under `directory`; returns their paths."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    maintain = {
        "operation": "maintain",
        "table": None,
        "dry_run": False,
        "started": now,
        "status": "failed",
        "exit_code": 2,
        "details": {
            "tables": {
                "db.t": {
                    "status": "done",
                    "exit_code": 0,
                    "reason": None,
                    "snapshots_expired": 3,
                    "files_removed": 17,
                    "bytes_removed": 123456,
                    "operations": [
                        {
                            "operation": "expire-snapshots",
                            "status": "done",
                            "dry_run": False,
                            "counts": {"snapshots_expired": 3, "files_deleted": 12, "manifests_deleted": 5},
                            "bytes": {"files_deleted": 100000, "manifests_deleted": 23456},
                        },
                        {
                            "operation": "compact",
                            "status": "done",
                            "dry_run": False,
                            "counts": {"files_rewritten": 9, "files_written": 2},
                            "bytes": {"files_rewritten": 5},
                        },
                    ],
                },
                "db.orders": {
                    "status": "failed",
                    "exit_code": 2,
                    "reason": f"compact: {MARKUP}",
                    "operations": [{"operation": "compact", "status": "failed", "counts": {}}],
                },
            }
        },
    }
    compact = {
        "operation": "compact",
        "table": "db.orders",
        "dry_run": True,
        "started": "2026-11-25T03:00:00.000+00:00",
        "status": "done",
        "exit_code": 0,
        "counts": {"files_before": 6, "files_after_estimate": 2},
        "bytes": {"files_before": 4096},
    }
    paths = []
    for name, record in (("maintain-2026-11-26.json", maintain), ("compact-2026-11-25.json", compact)):
        path = Path(directory) / name
        path.write_text(json.dumps(record))
        paths.append(str(path))
    return paths
