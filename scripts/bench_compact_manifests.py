"""Manifest compaction benchmark: the compact-manifests job against one process and Paimon's Java.

    .venv/bin/python scripts/bench_compact_manifests.py --manifests 1000 --entries 1000

Builds a metadata-only table (data files need not exist for manifest compaction): one snapshot whose
base list names `--manifests` manifests of `--entries` entries each, spread over 100 partitions, with
records as varied as real ones (UUID file names, value stats, sizes, times: they compress as real
manifests do), and identical copies of it. Then times, each with `mode: full`:
(a) the job as it runs by default (`order: none`: Avro blocks merged in the driver, no Spark), in
    this process, with the driver's Python heap peak (tracemalloc);
(a') the job with `order: partition` (every entry shuffled and sorted on local Spark; Spark's
    start-up measured apart) against (b) one process doing that sorted rewrite with the same
    building blocks (raw entries, one EntryMerger, a sort);
(c) Paimon's Java manifest full compaction (an empty commit whose manifest merge runs with
    `manifest.full-compaction-threshold-size` 1 b), a whole JVM process;
(d) the job as a whole process (`python -m jobs compact-manifests`, the default order).
Prints the 1-minute load next to every figure and the ratios b/a' and java/ours (c/d); every copy
must end with the same live files. Without the Java bundle or javac, (c) says so and is skipped.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.compact_manifests import compact_manifests  # noqa: E402
from jobs.runtime.spark import stop_session  # noqa: E402
from paimon_format.commit import BATCH_COMMIT_IDENTIFIER  # noqa: E402
from paimon_format.manifest.codec import read_manifest, write_manifest_list  # noqa: E402
from paimon_format.manifest.entries import ADD, DataFileMeta, ManifestEntry, SimpleStats  # noqa: E402
from paimon_format.manifest.files import rolling_write_manifests, rolling_write_raw_manifests  # noqa: E402
from paimon_format.manifest.raw import read_raw_manifest  # noqa: E402
from paimon_format.model.binary_row import serialize_row  # noqa: E402
from paimon_format.model.type_parsing import parse_type  # noqa: E402
from paimon_format.scan.snapshot_scan import EntryMerger, data_manifests  # noqa: E402
from paimon_format.snapshot import Snapshot  # noqa: E402
from paimon_format.storage.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_peers import (  # noqa: E402
    describe_ratio,
    java_unavailable,
    job_config,
    run_java,
    run_job_process,
    tree_cpu_seconds,
)
from scripts.bench_spark_startup import load, start_spark  # noqa: E402
from tests.support.factories import data_file, make_table, partition_of  # noqa: E402


def realistic_file(rng: random.Random, prefix: str, number: int) -> DataFileMeta:
    """A data file as Paimon's writers record it: a UUID name, value stats of every column (id, dt,
    v), sizes, sequence numbers and a creation time that differ per file, so manifests compress as
    real ones do (identical records would shrink a million entries to a few MB)."""
    low = rng.randrange(1 << 40)
    rows = rng.randrange(1, 100_000)
    values = [parse_type("BIGINT"), parse_type("STRING"), parse_type("STRING")]
    return replace(
        data_file(f"data-{prefix}-{number}.parquet", rows=rows, size=rng.randrange(1 << 10, 1 << 28)),
        value_stats=SimpleStats(
            serialize_row([low, "2024-01-001", f"a{rng.randrange(1 << 30):x}"], values),
            serialize_row([low + rows, "2024-01-099", f"z{rng.randrange(1 << 30):x}"], values),
            [0, 0, rng.randrange(rows)],
        ),
        min_sequence_number=low,
        max_sequence_number=low + rows - 1,
        creation_time=dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=rng.randrange(1 << 35)),
    )


def partition_value(day: int, dates: bool = False) -> str:
    """The `dt` of the benchmark table's `day`-th partition: `2024-01-0dd`, or with `dates` a real
    date from 2024-01-01 on (what a values-time partition expiry can read)."""
    if dates:
        return (dt.date(2024, 1, 1) + dt.timedelta(days=day)).isoformat()
    return f"2024-01-{day:03d}"


def build(root: str, manifests: int, entries: int, dates: bool = False, clustered: bool = False) -> Table:
    """The benchmark table: `manifests` x `entries` files over 100 partitions. Every manifest holds
    entries of every partition, or with `clustered` only of one (a table written day by day)."""
    table = make_table(root)
    partitions = [partition_of(table, partition_value(d, dates)) for d in range(100)]
    names = (f"manifest-{uuid.uuid4()}-{i}" for i in range(manifests * 2))
    rng = random.Random(manifests * entries)
    metas = []
    for m in range(manifests):
        prefix = uuid.UUID(int=rng.getrandbits(128))
        batch = [
            ManifestEntry(
                ADD,
                partitions[m * 100 // manifests if clustered else (m * entries + e) % 100],
                0,
                -1,
                realistic_file(rng, str(prefix), e),
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
    """The same work in one process with the job's own building blocks: raw entries (bytes copied),
    cancelled in one EntryMerger, sorted by partition, rolled into manifests."""
    merger = EntryMerger()
    for meta in data_manifests(table, table.snapshot_manager.latest()):
        merger.add_all(read_raw_manifest(table.file_io, table.manifest_path(meta.file_name), meta.file_size))
    live = sorted(merger.live(), key=lambda e: e.partition)
    names = (f"manifest-single-{uuid.uuid4()}-{i}" for i in range(1 << 20))
    rolling_write_raw_manifests(
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


def live_files(table: Table) -> set[str]:
    merger = EntryMerger()
    for meta in data_manifests(table, table.snapshot_manager.latest()):
        merger.add_all(read_manifest(table.file_io, table.manifest_path(meta.file_name)))
    return {e.file.file_name for e in merger.live()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--skip-java", action="store_true", help="leave out (c)")
    parser.add_argument("--skip-spark", action="store_true", help="leave out (a') and (b)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    workdir = Path(tempfile.mkdtemp(prefix="bench-compact-"))
    roots = {name: str(workdir / name / "db.db" / "t") for name in ("a", "a2", "b", "c", "d")}
    start = time.perf_counter()
    table = build(roots["a"], args.manifests, args.entries)
    for name in ("a2", "b", "c", "d"):
        shutil.copytree(roots["a"], roots[name])
    total = args.manifests * args.entries
    size = sum(m.file_size for m in data_manifests(table, table.snapshot_manager.latest()))
    print(
        f"built {args.manifests} manifests, {total:,} entries ({size / 2**20:.1f} MiB) in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )

    job_load = load()
    tracemalloc.start()
    start, cpu_start = time.perf_counter(), time.process_time()
    record = compact_manifests(None, table, mode="full")
    job, job_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    heap_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"  (a) compact-manifests job   {job:8.2f} s  {total / job:12,.0f} entries/s "
        f"({job_cpu:.1f} CPU-s, driver Python heap peak {heap_peak / 2**20:.1f} MiB; {job_load}; "
        f"{record.counts['manifests_before']} -> {record.counts['manifests_after']} manifests)",
        flush=True,
    )

    unavailable = "--skip-java" if args.skip_java else java_unavailable()
    java = None
    if unavailable:
        print(f"  (c) Java peer skipped: {unavailable}")
    else:
        java_load = load()
        java = run_java(lambda oracle: oracle.compact_manifests(roots["c"]))
        print(
            f"  (c) Java full compaction    {java.total_s:8.2f} s  {total / java.total_s:12,.0f} entries/s "
            f"(whole JVM process, {java.cpu_s:.1f} CPU-s; the request alone {java.work_s:.2f} s; "
            f"{java_load})",
            flush=True,
        )

    process_load = load()
    ours, process_record = run_job_process(
        "compact-manifests", job_config(roots["d"], {"mode": "full"}), workdir
    )
    print(
        f"  (d) compact-manifests process {ours.total_s:6.2f} s  {total / ours.total_s:12,.0f} entries/s "
        f"(python -m jobs, the whole process; run record {ours.work_s:.2f} s; {process_load}; "
        f"{process_record['counts']['manifests_before']} -> {process_record['counts']['manifests_after']} "
        "manifests)",
        flush=True,
    )

    sorted_job = single = None
    if not args.skip_spark:
        single_load = load()
        sorted_table = Table(FileIO.for_path(roots["b"]), roots["b"])
        start, cpu_start = time.perf_counter(), time.process_time()
        single_process(sorted_table)
        single, single_cpu = time.perf_counter() - start, time.process_time() - cpu_start
        print(
            f"  (b) single process, sorted  {single:8.2f} s  {total / single:12,.0f} entries/s "
            f"({single_cpu:.1f} CPU-s; {single_load})",
            flush=True,
        )
        spark, startup = start_spark("bench-compact-manifests")
        cores = spark.sparkContext.defaultParallelism
        print(f"  {startup.describe()} (not in (a'))", flush=True)
        sorted_load = load()
        start, cpu_start = time.perf_counter(), tree_cpu_seconds(os.getpid())
        partition_table = Table(FileIO.for_path(roots["a2"]), roots["a2"])
        compact_manifests(spark, partition_table, mode="full", order="partition")
        sorted_job = time.perf_counter() - start
        sorted_cpu = tree_cpu_seconds(os.getpid()) - cpu_start
        stop_session(spark)
        print(
            f"  (a') order: partition job  {sorted_job:8.2f} s  {total / sorted_job:12,.0f} entries/s "
            f"= {total / sorted_job / cores:9,.0f} per core ({cores} cores, {sorted_cpu:.1f} CPU-s of the "
            f"process tree; {sorted_load})",
            flush=True,
        )

    expected = live_files(Table(FileIO.for_path(roots["b"]), roots["b"]))
    for name in ("a", "a2", "c", "d"):
        skipped = (name == "c" and not java) or (name == "a2" and sorted_job is None)
        if not skipped and live_files(Table(FileIO.for_path(roots[name]), roots[name])) != expected:
            raise SystemExit(f"({name}) left different live files than the others")
    if single is not None and sorted_job is not None:
        print(f"ratio b/a' = {single / sorted_job:.2f} (the sorted rewrite on Spark against one process)")
    if java:
        print(describe_ratio(ours, java))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
