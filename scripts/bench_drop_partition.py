"""Drop-partition benchmark: our job against one process and against Paimon's Java partition drop.

    .venv/bin/python scripts/bench_drop_partition.py --manifests 100 --entries 1000

Builds the metadata-only table of `bench_compact_manifests.py` (`--manifests` x `--entries` files over
100 daily partitions from 2024-01-01, every manifest holding entries of every partition), makes
identical copies, and drops half of the partitions (`dt >= '2024-02-20'`) on each with:
(a) the job in this process on local Spark (Spark's start-up measured apart and excluded);
(b) one Python process reading every manifest on the driver (`SnapshotCommit.overwrite` with a
    partition filter);
(c) Paimon's Java partition drop (`FileStoreCommit.dropPartitions`, what `truncatePartitions` does),
    a whole JVM process timed from start to exit;
(d) the job as a whole process (`python -m jobs drop-partition`, where `local: auto` puts it: the
    driver up to 500,000 entries, since the table has no DELETE entry), Spark's start-up included;
(e) expire-partitions (`values-time`, 50 days) expiring the other half (the 50 oldest days) in the
    session of (a): the same scan, its entries/s printed next to drop-partition's;
(f) a nightly drop of one day on a table of the same size written day by day (each manifest holds
    one day's files): our whole process against Java's, both skipping the manifests whose
    partition stats rule the day out.
Prints entries scanned/s, the 1-minute load next to every figure, and the ratios b/a, e/a and
java/ours (c/d, whole processes). Without the Java bundle or javac, (c) says so and is skipped.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.drop_partition import DropPartitionRequest, drop_partition  # noqa: E402
from jobs.expire_partitions import ExpirePartitionsRequest, expire_partitions  # noqa: E402
from jobs.runtime.spark import stop_session  # noqa: E402
from paimon_format.commit import SnapshotCommit  # noqa: E402
from paimon_format.model.binary_row import deserialize_row  # noqa: E402
from paimon_format.scan.snapshot_scan import live_entries  # noqa: E402
from paimon_format.storage.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_compact_manifests import build, partition_value  # noqa: E402
from scripts.bench_peers import (  # noqa: E402
    describe_ratio,
    java_unavailable,
    job_config,
    run_java,
    run_job_process,
    tree_cpu_seconds,
)
from scripts.bench_spark_startup import load, start_spark  # noqa: E402

CUT = partition_value(50, dates=True)
DROPPED = [{"dt": partition_value(day, dates=True)} for day in range(50, 100)]
EXPIRY_NOW = dt.datetime(2024, 1, 1) + dt.timedelta(days=100)  # 50-day expiry: days 0-49 go
EXPIRY_DAYS = 50


def single_process(table: Table) -> None:
    types = table.partition_types
    SnapshotCommit(table).overwrite([], partition_filter=lambda p: deserialize_row(p, types)[0] >= CUT)


def live_files(root: str) -> set[str]:
    table = Table(FileIO.for_path(root), root)
    return {e.file.file_name for e in live_entries(table, table.snapshot_manager.latest())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=100)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--skip-java", action="store_true", help="leave out (c)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = Path(tempfile.mkdtemp(prefix="bench-drop-"))
    roots = {name: str(workdir / name / "db.db" / "t") for name in "abcde"}
    start = time.perf_counter()
    table = build(roots["a"], args.manifests, args.entries, dates=True)
    for name in "bcde":
        shutil.copytree(roots["a"], roots[name])
    total = args.manifests * args.entries
    print(
        f"built {args.manifests} manifests, {total:,} files in {time.perf_counter() - start:.1f} s",
        flush=True,
    )

    single_load = load()
    start, cpu_start = time.perf_counter(), time.process_time()
    single_process(Table(FileIO.for_path(roots["b"]), roots["b"]))
    single, single_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(
        f"  (b) single process        {single:8.2f} s  {total / single:12,.0f} files scanned/s "
        f"({single_cpu:.1f} CPU-s; {single_load})"
    )

    unavailable = None if not args.skip_java else "--skip-java"
    unavailable = unavailable or java_unavailable()
    java = None
    if unavailable:
        print(f"  (c) Java peer skipped: {unavailable}")
    else:
        java_load = load()
        java = run_java(lambda oracle: oracle.drop_partitions(roots["c"], DROPPED))
        print(
            f"  (c) Java dropPartitions   {java.total_s:8.2f} s  {total / java.total_s:12,.0f} "
            "files scanned/s "
            f"(whole JVM process, {java.cpu_s:.1f} CPU-s; the request alone {java.work_s:.2f} s; "
            f"{java_load})",
            flush=True,
        )

    spark, startup = start_spark("bench-drop-partition")
    cores = spark.sparkContext.defaultParallelism
    print(f"  {startup.describe()} (not in (a))", flush=True)
    job_load = load()
    start, cpu_start = time.perf_counter(), tree_cpu_seconds(os.getpid())
    record = drop_partition(spark, table, DropPartitionRequest(where=f"dt >= '{CUT}'"))
    job, job_cpu = time.perf_counter() - start, tree_cpu_seconds(os.getpid()) - cpu_start
    dropped = record.counts["files_dropped"]
    print(
        f"  (a) drop-partition job    {job:8.2f} s  {total / job:12,.0f} files scanned/s "
        f"= {total / job / cores:9,.0f} per core ({cores} cores, {job_cpu:.1f} CPU-s of the process "
        f"tree: driver, JVM, Python workers; {job_load}; "
        f"{record.counts['partitions']} partitions, {dropped:,} files dropped)",
        flush=True,
    )
    expiry_load = load()
    start, cpu_start = time.perf_counter(), tree_cpu_seconds(os.getpid())
    request = ExpirePartitionsRequest(expiration_time=f"{EXPIRY_DAYS} d", strategy="values-time")
    expired = expire_partitions(
        spark, Table(FileIO.for_path(roots["e"]), roots["e"]), request, now=EXPIRY_NOW
    )
    expiry, expiry_cpu = time.perf_counter() - start, tree_cpu_seconds(os.getpid()) - cpu_start
    stop_session(spark)
    print(
        f"  (e) expire-partitions job {expiry:8.2f} s  {total / expiry:12,.0f} files scanned/s "
        f"({expiry_cpu:.1f} CPU-s of the process tree; {expiry_load}; "
        f"{expired.counts['partitions']} partitions, {expired.counts['files_dropped']:,} files dropped)",
        flush=True,
    )
    if expired.counts["files_dropped"] != dropped:
        raise SystemExit(f"(e) expired {expired.counts['files_dropped']:,} files, not {dropped:,}")

    process_load = load()
    ours, process_record = run_job_process(
        "drop-partition", job_config(roots["d"], {"where": f"dt >= '{CUT}'"}), workdir
    )
    print(
        f"  (d) drop-partition process {ours.total_s:7.2f} s  {total / ours.total_s:12,.0f} files scanned/s "
        f"(python -m jobs, ran in the {process_record['details'].get('executed_in')}, Spark's start-up "
        f"included when it ran on Spark; run record {ours.work_s:.2f} s; {process_load})"
    )
    expected = live_files(roots["b"])
    for name in "acd" if java else "ad":
        if live_files(roots[name]) != expected:
            raise SystemExit(f"({name}) left different live files than the single process")
    print(
        f"ratio b/a = {single / job:.2f} "
        f"(with Spark's start-up in the job: {single / (job + startup.total_s):.2f}); "
        f"e/a = {expiry / job:.2f} (expire-partitions' time per drop-partition's, same entries read)"
    )
    if java:
        print(describe_ratio(ours, java))
    nightly(workdir, args.manifests, args.entries, java is not None)
    shutil.rmtree(workdir, ignore_errors=True)


def nightly(workdir: Path, manifests: int, entries: int, with_java: bool) -> None:
    """(f): drop one day of a table whose manifests each hold one day's files."""
    roots = {name: str(workdir / f"nightly-{name}" / "db.db" / "t") for name in ("ours", "java")}
    build(roots["ours"], manifests, entries, dates=True, clustered=True)
    shutil.copytree(roots["ours"], roots["java"])
    day = {"dt": partition_value(manifests // 2 * 100 // manifests, dates=True)}  # a day that has files
    process_load = load()
    config = job_config(roots["ours"], {"partitions": [day]})
    ours, record = run_job_process("drop-partition", config, workdir)
    details = record["details"]
    print(
        f"  (f) nightly drop of {day['dt']}: drop-partition process {ours.total_s:.2f} s (ran in the "
        f"{details.get('executed_in')}, {details.get('manifests_skipped'):,} of {manifests:,} manifests "
        f"not read, {record['counts'].get('files_dropped', 0):,} files dropped; {process_load})",
        flush=True,
    )
    if not with_java:
        return
    java_load = load()
    java = run_java(lambda oracle: oracle.drop_partitions(roots["java"], [day]))
    print(f"  (f) Java dropPartitions   {java.total_s:.2f} s (whole JVM process; {java_load})")
    if live_files(roots["ours"]) != live_files(roots["java"]):
        raise SystemExit("(f) ours and Java's left different live files")
    print(f"nightly: {describe_ratio(ours, java)}")


if __name__ == "__main__":
    main()
