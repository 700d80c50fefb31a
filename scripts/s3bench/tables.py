"""The benchmark's tables, built once on local disk, and the facts about them that the fewest-requests
counts need (how many snapshots, lists, manifests, tags, objects, which manifests hold which days).

- `maintenance`: the orphan benchmark's shape (scripts/bench_orphans.py): an append table of 100
  daily partitions x 4 buckets, empty data files named by `--manifests` manifests, 10 snapshots whose
  base/delta lists cover them, 1% planted orphans; plus a few date-named tags on the latest snapshot
  (for expire-tags; on the latest so that they protect nothing the other jobs would delete). The
  partitions are real dates (2024-01-01 on), so expire-partitions' values-time strategy reads them.
- `append` and `pk`: small tables with real Parquet data (scripts/bench_compact.py's shape), for
  compact, read_table; `incoming`: Parquet files the write job reads.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from paimon_format.manifest.codec import write_manifest
from paimon_format.manifest.entries import ADD, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.files import manifest_file_meta
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from scripts.bench_tables import commit_files, commit_manifest_snapshots, create_table
from scripts.generate_events import events
from tests.support.factories import data_file, make_table, partition_of

PARTITIONS = 100
BUCKETS = 4
SNAPSHOTS = 10
TAGS = 5
FIRST_DAY = dt.date(2024, 1, 1)


@dataclass
class TableFacts:
    """What a table holds, counted at build time: the inputs of every fewest-requests count."""

    objects: int = 0  # every object under the table's root
    snapshots: int = 0
    lists: int = 0  # manifest lists
    manifests: int = 0
    manifest_bytes: int = 0
    tags: int = 0
    data_files: int = 0
    data_bytes: int = 0
    orphans: int = 0
    buckets: int = 0
    manifest_days: list[tuple[int, int]] = field(default_factory=list)  # (first, last) day per manifest

    def manifests_touching(self, first: int, last: int) -> int:
        """Manifests whose partition range overlaps days first..last (what partition stats cannot skip)."""
        return sum(1 for low, high in self.manifest_days if low <= last and high >= first)


def day_value(day: int) -> str:
    return (FIRST_DAY + dt.timedelta(days=day)).isoformat()


def touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def count_objects(root: str) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def _write_manifests(table: Table, root: str, files: int, manifests: int, facts: TableFacts) -> list:
    """`files` empty data files spread round-robin over the partition x bucket directories, named by
    `manifests` manifests; returns their metas (in order)."""
    partitions = [partition_of(table, day_value(d)) for d in range(PARTITIONS)]
    dirs = [f"dt={day_value(d)}/bucket-{b}" for d in range(PARTITIONS) for b in range(BUCKETS)]
    for directory in dirs:
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    per_manifest = -(-files // manifests)
    metas: list[ManifestFileMeta] = []
    written = 0
    while written < files:
        count = min(per_manifest, files - written)
        prefix = uuid.uuid4()
        entries = []
        for i in range(count):
            slot = (written + i) % len(dirs)
            name = f"data-{prefix}-{i}.parquet"
            touch(os.path.join(root, dirs[slot], name))
            entries.append(
                ManifestEntry(ADD, partitions[slot // BUCKETS], slot % BUCKETS, -1, data_file(name, 1, 0))
            )
        days = {((written + i) % len(dirs)) // BUCKETS for i in range(count)}
        facts.manifest_days.append((min(days), max(days)))
        written += count
        manifest = f"manifest-{uuid.uuid4()}-0"
        size = write_manifest(table.file_io, table.manifest_path(manifest), entries)
        facts.manifest_bytes += size
        metas.append(manifest_file_meta(manifest, size, entries, 0, table.partition_types))
    return metas


def build_maintenance(root: str, objects: int, manifests: int) -> TableFacts:
    """About `objects` objects in all: data files, 1% more planted orphans, and the metadata."""
    facts = TableFacts(snapshots=SNAPSHOTS, lists=2 * SNAPSHOTS, tags=TAGS, buckets=BUCKETS)
    metadata = manifests + 2 * SNAPSHOTS + SNAPSHOTS + TAGS + 3  # + schema, LATEST, EARLIEST
    files = max(manifests, int((objects - metadata) / 1.01))
    table = make_table(root)
    metas = _write_manifests(table, root, files, manifests, facts)
    commit_manifest_snapshots(table, metas, SNAPSHOTS)
    latest = table.snapshot_manager.snapshot(SNAPSHOTS)
    for t in range(TAGS):
        table.tag_manager.create_tag((dt.date(2023, 1, 1) + dt.timedelta(days=t)).isoformat(), latest)
    dirs = [f"dt={day_value(d)}/bucket-{b}" for d in range(PARTITIONS) for b in range(BUCKETS)]
    facts.orphans = max(1, files // 100)
    for i in range(facts.orphans):
        touch(os.path.join(root, dirs[i % len(dirs)], f"data-{uuid.uuid4()}-{i}.parquet"))
    facts.manifests, facts.data_files = len(metas), files
    facts.objects = count_objects(root)
    return facts


def _data_facts(table: Table) -> TableFacts:
    manager = table.snapshot_manager
    latest = manager.latest()
    entries = live_entries(table, latest)
    ids = manager.snapshot_ids()
    return TableFacts(
        objects=count_objects(table.path),
        snapshots=len(ids),
        lists=2 * len(ids),
        manifests=len(os.listdir(os.path.join(table.path, "manifest"))) - 2 * len(ids),
        data_files=len(entries),
        data_bytes=sum(e.file.file_size for e in entries),
        buckets=len({(e.partition, e.bucket) for e in entries}),
    )


def build_append(root: str, rows: int, files: int) -> TableFacts:
    """An unpartitioned append table (`bucket: -1`) of `rows` rows in `files` small Parquet files."""
    data = events(rows, 1, 0).drop_columns(["dt"])
    table = create_table(root, data, [], {"bucket": "-1"})
    per_file = max(rows // files, 1)
    commit_files(table, [data.slice(start, per_file) for start in range(0, rows, per_file)], 0)
    return _data_facts(table)


def build_pk(root: str, keys: int, runs: int, buckets: int) -> TableFacts:
    """A primary-key table of `buckets` buckets written in `runs` upserts of `keys / runs` random keys
    each, so every bucket holds `runs` sorted runs to merge."""
    per_run = keys // runs
    base = events(per_run, 1, 1).drop_columns(["dt"])
    table = create_table(root, base, ["id"], {"bucket": str(buckets)})
    rng = np.random.default_rng(7)
    for run in range(runs):
        ids = rng.choice(keys, size=per_run, replace=False).astype(np.int64)
        part = events(per_run, 1, run + 2).drop_columns(["dt"]).set_column(0, "id", pa.array(ids))
        commit_files(table, [part], run * per_run)
    return _data_facts(table)


def build_incoming(directory: Path, rows: int, files: int, days: int) -> TableFacts:
    """`files` Parquet files of `rows` events over `days` days: the write job's source."""
    directory.mkdir(parents=True, exist_ok=True)
    data = events(rows, days, 3)
    per_file = -(-rows // files)
    for index, start in enumerate(range(0, rows, per_file)):
        pq.write_table(data.slice(start, per_file), directory / f"part-{index:05d}.parquet")
    return TableFacts(
        objects=files,
        data_files=files,
        data_bytes=sum(p.stat().st_size for p in directory.iterdir()),
        buckets=days,  # one partition per day, one file each at the fewest
    )
