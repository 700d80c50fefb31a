"""Drop-partition benchmark: files/s of the drop-partition job vs a single-process overwrite commit.

    .venv/bin/python scripts/bench_drop_partition.py --manifests 1000 --entries 1000

Builds the metadata-only table of `bench_compact_manifests.py` (`--manifests` x `--entries` files over
100 partitions), copies it, and drops half of the partitions (`dt >= '2024-01-050'`) with (a) the job
on local Spark (executors summarise and write the DELETE manifests) and (b) one process reading every
manifest on the driver (`SnapshotCommit.overwrite` with a partition filter). Prints both figures and
the ratio; (b) holds every entry of the dropped partitions in memory, (a) only per-partition sums.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.drop_partition import drop_partition  # noqa: E402
from paimon_format.binary_row import deserialize_row  # noqa: E402
from paimon_format.commit import SnapshotCommit  # noqa: E402
from paimon_format.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_compact_manifests import build  # noqa: E402
from scripts.bench_spark_startup import load, start_spark  # noqa: E402

CUT = "2024-01-050"


def single_process(table: Table) -> None:
    types = table.partition_types
    SnapshotCommit(table).overwrite([], partition_filter=lambda p: deserialize_row(p, types)[0] >= CUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = Path(tempfile.mkdtemp(prefix="bench-drop-"))
    root = str(workdir / "a" / "db.db" / "t")
    start = time.perf_counter()
    table = build(root, args.manifests, args.entries)
    copy = str(workdir / "b" / "db.db" / "t")
    shutil.copytree(root, copy)
    total = args.manifests * args.entries
    print(
        f"built {args.manifests} manifests, {total:,} files in {time.perf_counter() - start:.1f} s",
        flush=True,
    )

    single_load = load()
    start = time.perf_counter()
    single_process(Table(FileIO.for_path(copy), copy))
    single = time.perf_counter() - start
    spark, startup = start_spark("bench-drop-partition")
    cores = spark.sparkContext.defaultParallelism
    print(f"  {startup.describe()} (not in the job's figure)", flush=True)
    job_load = load()
    start = time.perf_counter()
    record = drop_partition(spark, table, where=f"dt >= '{CUT}'")
    job = time.perf_counter() - start
    dropped = record.counts["files_dropped"]
    print(
        f"  (a) drop-partition job  {job:8.2f} s  {total / job:12,.0f} files scanned/s "
        f"= {total / job / cores:9,.0f} per core ({cores} cores, {job_load}; "
        f"{record.counts['partitions']} partitions, {dropped:,} files dropped)"
    )
    print(
        f"  (b) single process      {single:8.2f} s  {total / single:12,.0f} files scanned/s per core "
        f"({single_load})"
    )
    print(
        f"ratio b/a = {single / job:.2f} "
        f"(with Spark's start-up in the job: {single / (job + startup.total_s):.2f})"
    )
    spark.stop()
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
