"""Manifest compaction benchmark: entries/s of the compact-manifests job vs a single-process rewrite.

    .venv/bin/python scripts/bench_compact_manifests.py --manifests 1000 --entries 1000

Builds a metadata-only table (data files need not exist for manifest compaction): one snapshot whose
base list names `--manifests` manifests of `--entries` entries each, spread over 100 partitions.
Then times (a) the job (`mode: full`) on local Spark and (b) one process reading every manifest,
cancelling ADD/DELETE pairs and writing rolling manifests. Goal: 1,000,000 entries in under 60 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.compact_manifests import compact_manifests  # noqa: E402
from paimon_format.commit import BATCH_COMMIT_IDENTIFIER  # noqa: E402
from paimon_format.manifest import (
    ADD,
    ManifestEntry,
    read_manifest,
    rolling_write_manifests,
    write_manifest_list,
)  # noqa: E402
from paimon_format.scan import EntryMerger, data_manifests  # noqa: E402
from paimon_format.snapshot import Snapshot  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_spark_startup import load, start_spark  # noqa: E402
from tests.factories import data_file, make_table, partition_of  # noqa: E402


def build(root: str, manifests: int, entries: int) -> Table:
    table = make_table(root)
    partitions = [partition_of(table, f"2024-01-{d:03d}") for d in range(100)]
    names = (f"manifest-{uuid.uuid4()}-{i}" for i in range(manifests * 2))
    metas = []
    for m in range(manifests):
        batch = [
            ManifestEntry(
                ADD, partitions[(m * entries + e) % 100], 0, -1, data_file(f"data-{m}-{e}.parquet", rows=1)
            )
            for e in range(entries)
        ]
        metas += rolling_write_manifests(
            table.file_io,
            table.file_io.join(root, "manifest"),
            lambda: next(names),
            batch,
            1 << 40,
            "zstd",
            table.partition_types,
            0,
        )
    base, delta = f"manifest-list-{uuid.uuid4()}-0", f"manifest-list-{uuid.uuid4()}-1"
    base_size = write_manifest_list(table.file_io, table.manifest_path(base), metas)
    delta_size = write_manifest_list(table.file_io, table.manifest_path(delta), [])
    total = manifests * entries
    snapshot = Snapshot(
        id=1,
        schema_id=0,
        base_manifest_list=base,
        delta_manifest_list=delta,
        base_manifest_list_size=base_size,
        delta_manifest_list_size=delta_size,
        commit_user="bench",
        commit_identifier=BATCH_COMMIT_IDENTIFIER,
        commit_kind="APPEND",
        time_millis=int(time.time() * 1000),
        total_record_count=total,
        delta_record_count=total,
    )
    table.snapshot_manager.try_commit(snapshot)
    table.snapshot_manager.write_latest_hint(1)
    return table


def single_process(table: Table) -> int:
    merger = EntryMerger()
    for meta in data_manifests(table, table.snapshot_manager.latest()):
        merger.add_all(read_manifest(table.file_io, table.manifest_path(meta.file_name)))
    live = sorted(merger.live(), key=lambda e: e.partition)
    names = (f"manifest-single-{uuid.uuid4()}-{i}" for i in range(1 << 20))
    rolling_write_manifests(
        table.file_io,
        table.file_io.join(table.path, "manifest"),
        lambda: next(names),
        live,
        8 << 20,
        "zstd",
        table.partition_types,
        0,
    )
    return len(live)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = str(Path(tempfile.mkdtemp(prefix="bench-compact-")) / "db.db" / "t")
    start = time.perf_counter()
    table = build(root, args.manifests, args.entries)
    total = args.manifests * args.entries
    print(
        f"built {args.manifests} manifests, {total:,} entries in {time.perf_counter() - start:.1f} s",
        flush=True,
    )

    single_load = load()
    start = time.perf_counter()
    single_process(table)
    single = time.perf_counter() - start
    spark, startup = start_spark("bench-compact-manifests")
    cores = spark.sparkContext.defaultParallelism
    print(f"  {startup.describe()} (not in the job's figure)", flush=True)
    job_load = load()
    start = time.perf_counter()
    record = compact_manifests(spark, table, mode="full")
    job = time.perf_counter() - start
    print(
        f"  (a) compact-manifests job   {job:8.2f} s  {total / job:12,.0f} entries/s "
        f"= {total / job / cores:9,.0f} per core ({cores} cores, {job_load}; "
        f"{record.counts['manifests_before']} -> {record.counts['manifests_after']} manifests)"
    )
    print(
        f"  (b) single process          {single:8.2f} s  {total / single:12,.0f} entries/s per core "
        f"({single_load})"
    )
    with_startup = job + startup.total_s
    verdict = "met" if job < 60 else "missed"
    print(
        f"ratio b/a = {single / job:.2f} (with Spark's start-up in the job: {single / with_startup:.2f}); "
        f"goal: {total:,} entries in under 60 s -> {verdict}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
