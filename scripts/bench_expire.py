"""expire-snapshots benchmark: snapshots/s, files deleted/s, and the driver's memory peak per table size.

    .venv/bin/python scripts/bench_expire.py --snapshots 2000 --files 20000,200000

For each size builds a metadata-consistent table directly (our manifest writer, empty data files):
`--snapshots` snapshots, each adding `files / snapshots` data files and deleting the files the
previous snapshot added (a rewrite, like a compaction), so that expiring all but 10 snapshots
deletes nearly every data file. Every 50 snapshots the base list restarts from one compacted
manifest of the live files (as Paimon's manifest full compaction does), so lists stay small.

Then runs the job (local[2], after a warm-up run on a small table) with retain_min=10 and records:
wall time, snapshots/s, data files deleted/s, and the driver's Python heap peak measured with
tracemalloc around the job call (the driver process only; executors are separate Python workers).
Goal: the driver peak does not grow with the number of files.

    .venv/bin/python scripts/bench_expire.py --java 200000 --files ''

`--java N` (comma-separated sizes) also races Paimon's Java expiry on the table
`scripts/bench_orphans.py` builds (N data files in 100 partitions x 4 buckets, `--java-manifests`
manifests, 10 snapshots): the table is copied, our job runs as its own `python -m jobs
expire-snapshots` process on one copy and Java's `ExpireSnapshotsImpl` in its own JVM on the other,
both expiring 9 of the 10 snapshots; whole processes are timed (Spark's and the JVM's start
included), the ratio Java time / our time and the load average are printed, and both copies must
end with the same files.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.expire_snapshots import ExpiryRequest, expire_snapshots  # noqa: E402
from jobs.runtime.spark import get_or_create_spark  # noqa: E402
from paimon_format.commit import BATCH_COMMIT_IDENTIFIER  # noqa: E402
from paimon_format.manifest.codec import write_manifest, write_manifest_list  # noqa: E402
from paimon_format.manifest.entries import ADD, DELETE, ManifestEntry, ManifestFileMeta  # noqa: E402
from paimon_format.manifest.files import manifest_file_meta  # noqa: E402
from paimon_format.snapshot import Snapshot  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from tests.support.factories import data_file, make_table, partition_of  # noqa: E402

PARTITIONS = 10
COMPACT_EVERY = 50
RETAIN = 10
FUTURE = "2100-01-01 00:00:00"


def touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def build(root: str, snapshots: int, files: int) -> Table:
    table = make_table(root)
    partitions = [partition_of(table, f"p{d}") for d in range(PARTITIONS)]
    for d in range(PARTITIONS):
        os.makedirs(os.path.join(root, f"dt=p{d}", "bucket-0"), exist_ok=True)
    per_snapshot = max(1, files // snapshots)

    def write(entries: list[ManifestEntry]) -> ManifestFileMeta:
        name = f"manifest-{uuid.uuid4()}-0"
        size = write_manifest(table.file_io, table.manifest_path(name), entries)
        return manifest_file_meta(name, size, entries, 0, table.partition_types)

    def write_list(metas: list[ManifestFileMeta]) -> tuple[str, int]:
        name = f"manifest-list-{uuid.uuid4()}-0"
        return name, write_manifest_list(table.file_io, table.manifest_path(name), metas)

    previous: list[ManifestEntry] = []  # ADD entries of the previous snapshot (the live files)
    base: list[ManifestFileMeta] = []
    started = int(time.time() * 1000) - snapshots * 1000
    for s in range(1, snapshots + 1):
        added = []
        for i in range(per_snapshot):
            partition = (s + i) % PARTITIONS
            name = f"data-{s}-{i}.parquet"
            touch(os.path.join(root, f"dt=p{partition}", "bucket-0", name))
            added.append(ManifestEntry(ADD, partitions[partition], 0, -1, data_file(name, 1, 1)))
        deleted = [ManifestEntry(DELETE, e.partition, e.bucket, e.total_buckets, e.file) for e in previous]
        delta = [write(deleted + added)]
        if s % COMPACT_EVERY == 1 and previous:
            base = [write(previous)]  # the compacted state before this snapshot
        base_name, base_size = write_list(base)
        delta_name, delta_size = write_list(delta)
        snapshot = Snapshot(
            id=s,
            schema_id=0,
            base_manifest_list=base_name,
            delta_manifest_list=delta_name,
            base_manifest_list_size=base_size,
            delta_manifest_list_size=delta_size,
            commit_user="bench",
            commit_identifier=BATCH_COMMIT_IDENTIFIER,
            commit_kind="OVERWRITE" if previous else "APPEND",
            time_millis=started + s * 1000,
            total_record_count=len(added),
            delta_record_count=len(added) - len(deleted),
        )
        assert table.snapshot_manager.try_commit(snapshot)
        base = base + delta
        previous = added
    table.snapshot_manager.write_latest_hint(snapshots)
    return table


def run_size(spark, snapshots: int, files: int) -> dict[str, float]:
    root = str(Path(tempfile.mkdtemp(prefix="bench-expire-")) / "db.db" / "t")
    start = time.perf_counter()
    table = build(root, snapshots, files)
    print(f"[{files:,}] built {snapshots:,} snapshots in {time.perf_counter() - start:.1f} s", flush=True)
    tracemalloc.start()
    start = time.perf_counter()
    record = expire_snapshots(
        spark,
        table,
        ExpiryRequest(retain_min=RETAIN, older_than=FUTURE, max_deletes=snapshots),
    )
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    expired = record.counts["snapshots_expired"]
    deleted = record.counts["files_deleted"]
    assert table.snapshot_manager.snapshot_ids() == list(range(snapshots - RETAIN + 1, snapshots + 1))
    print(
        f"[{files:,}] expired {expired:,} snapshots, deleted {deleted:,} data files, "
        f"{record.counts.get('manifests_deleted', 0):,} manifests, "
        f"{record.counts.get('manifest_lists_deleted', 0):,} lists in {elapsed:.1f} s: "
        f"{expired / elapsed:,.1f} snapshots/s, {deleted / elapsed:,.0f} files deleted/s; "
        f"driver Python heap peak {peak / 2**20:.1f} MiB",
        flush=True,
    )
    return {"files": deleted, "seconds": elapsed, "snapshots": expired, "peak_mib": peak / 2**20}


def race_java(files: int, manifests: int) -> dict[str, float]:
    """Our job and Java's expiry, each a whole process, on two copies of the bench_orphans table."""
    import shutil

    from scripts.bench_orphans import build as build_orphans_table
    from scripts.bench_peers import (
        copy_table,
        describe_ratio,
        java_unavailable,
        job_config,
        relative_files,
        run_java,
        run_job_process,
    )

    unavailable = java_unavailable()
    if unavailable:
        raise SystemExit(f"the Java peer cannot run: {unavailable}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-expire-java-"))
    ours, java = workdir / "ours", workdir / "java"
    start = time.perf_counter()
    build_orphans_table(str(ours / "db.db" / "t"), files, manifests)
    copy_table(ours, java)
    print(f"[{files:,}] built two copies in {time.perf_counter() - start:.1f} s", flush=True)
    keep = {"retain_min": 1, "retain_max": 1, "max_deletes": 1000}
    config = job_config(str(ours / "db.db" / "t"), {**keep, "older_than": FUTURE})
    job, record = run_job_process("expire-snapshots", config, workdir)
    peer = run_java(
        lambda oracle: oracle.expire_snapshots(path=str(java / "db.db" / "t"), time_retained_ms=1, **keep)
    )
    expired = record["counts"]["snapshots_expired"]
    assert expired == peer.result == 9, (expired, peer.result)
    left_ours = relative_files(str(ours / "db.db" / "t")) - {"snapshot/EARLIEST", "snapshot/LATEST"}
    left_java = relative_files(str(java / "db.db" / "t")) - {"snapshot/EARLIEST", "snapshot/LATEST"}
    assert left_ours == left_java, (sorted(left_ours - left_java)[:5], sorted(left_java - left_ours)[:5])
    print(
        f"[{files:,}] expire 9 of 10 snapshots: {describe_ratio(job, peer)}; "
        f"both left {len(left_ours):,} files; ours ran in the {record['details'].get('executed_in')}; "
        f"retained side: {record['details'].get('retained_side')}",
        flush=True,
    )
    shutil.rmtree(workdir)
    return {"files": files, "java_s": peer.total_s, "ours_s": job.total_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--files", default="20000,200000", help="comma-separated data-file counts")
    parser.add_argument("--java", default="", help="comma-separated sizes to race Java's expiry at")
    parser.add_argument("--java-manifests", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    for size in filter(None, args.java.split(",")):
        race_java(int(size), args.java_manifests)
    if not args.files:
        return
    spark = get_or_create_spark("bench-expire", {"spark.driver.memory": "2g"})
    warm = build(str(Path(tempfile.mkdtemp(prefix="bench-expire-warmup-")) / "db.db" / "t"), 30, 300)
    expire_snapshots(spark, warm, ExpiryRequest(retain_min=RETAIN, older_than=FUTURE), dry_run=True)
    print(f"load average before: {os.getloadavg()}", flush=True)
    results = [run_size(spark, args.snapshots, int(size)) for size in args.files.split(",")]
    print(f"load average after: {os.getloadavg()}")
    for result in results:
        seconds = result["seconds"]
        print(
            f"{result['files']:>9,} files deleted: {result['snapshots'] / seconds:,.1f} snapshots/s, "
            f"{result['files'] / seconds:,.0f} files/s, driver peak {result['peak_mib']:.1f} MiB"
        )


if __name__ == "__main__":
    main()
