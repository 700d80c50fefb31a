"""Orphan-file benchmark: files/s of remove-orphan-files vs a single-process baseline, and driver memory.

    .venv/bin/python scripts/bench_orphans.py --files 100000,1000000

For each size builds a metadata-consistent append table of that many data files (empty files; the
job never opens data files) in 100 partitions x 4 buckets, referenced by `--manifests` manifests
written with our manifest writer and a few snapshots whose base/delta lists cover them, plus 1%
planted orphan data files. Then times, in the same run:

(a) the job on local[2] (after one warm-up run on a small table) as a dry run (listing and the
    referenced set on executors, one join), with the driver's Python heap peak (tracemalloc)
    during the job, then the real run deleting the orphans;
(b) a single process: an `os.scandir` walk, every manifest read in one process
    (`scan.referenced_files`), a set difference with the same name rules and age filter.

Prints files/s for both, their ratio, and the driver peak per size. Goal: (a) faster than (b), and a
driver peak that does not grow with the file count.

    .venv/bin/python scripts/bench_orphans.py --java 200000 --manifests 200 --files ''

`--java N` (comma-separated sizes) races Paimon's Java orphan cleaning (`OrphanFilesClean`, its
thread pool) on the same table: our dry run as its own `python -m jobs remove-orphan-files`
process and Java's dry run in its own JVM, whole processes timed (Spark's and the JVM's start
included); prints the ratio Java time / our time and the load average; both must find the planted
orphans.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files  # noqa: E402
from jobs.runtime.spark import get_or_create_spark  # noqa: E402
from paimon_format.maintenance.orphan_rules import DELETABLE, FileNaming, judge_file  # noqa: E402
from paimon_format.maintenance.references import referenced_files  # noqa: E402
from paimon_format.manifest.codec import write_manifest  # noqa: E402
from paimon_format.manifest.entries import ADD, ManifestEntry  # noqa: E402
from paimon_format.manifest.files import manifest_file_meta  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_tables import commit_manifest_snapshots  # noqa: E402
from tests.support.factories import data_file, make_table, partition_of  # noqa: E402

PARTITIONS = 100
BUCKETS = 4
SNAPSHOTS = 10


def touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def build(root: str, files: int, manifests: int) -> tuple[Table, int]:
    """The table, and the number of planted orphans."""
    table = make_table(root)
    partitions = [partition_of(table, f"2024-01-{d:03d}") for d in range(PARTITIONS)]
    dirs = [f"dt=2024-01-{d:03d}/bucket-{b}" for d in range(PARTITIONS) for b in range(BUCKETS)]
    for directory in dirs:
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    per_manifest = -(-files // manifests)
    metas = []
    written = 0
    for _ in range(manifests):
        count = min(per_manifest, files - written)
        if count <= 0:
            break
        prefix = uuid.uuid4()
        entries = []
        for i in range(count):
            slot = (written + i) % len(dirs)
            name = f"data-{prefix}-{i}.parquet"
            touch(os.path.join(root, dirs[slot], name))
            entries.append(
                ManifestEntry(ADD, partitions[slot // BUCKETS], slot % BUCKETS, -1, data_file(name, 1, 0))
            )
        written += count
        manifest = f"manifest-{uuid.uuid4()}-0"
        size = write_manifest(table.file_io, table.manifest_path(manifest), entries)
        metas.append(manifest_file_meta(manifest, size, entries, 0, table.partition_types))
    commit_manifest_snapshots(table, metas, SNAPSHOTS)
    orphans = files // 100
    for i in range(orphans):
        touch(os.path.join(root, dirs[i % len(dirs)], f"data-{uuid.uuid4()}-{i}.parquet"))
    return table, orphans


def single_process(table: Table, cutoff_ms: int) -> tuple[int, int]:
    """(files listed, orphans found) by a scandir walk, one-process manifest reads and a set difference."""
    naming = FileNaming.of(table.schema.options)
    listed: dict[str, int] = {}
    pending = [""]
    while pending:
        relative_dir = pending.pop()
        with os.scandir(os.path.join(table.path, relative_dir)) as entries:
            for entry in entries:
                relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append(relative)
                else:
                    listed[relative] = entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000
    referenced = referenced_files(table)
    orphans = [
        path
        for path, mtime in listed.items()
        if path not in referenced and mtime < cutoff_ms and judge_file(path, naming).rule == DELETABLE
    ]
    return len(listed), len(orphans)


def run_size(spark, files: int, manifests: int) -> dict[str, float]:
    workdir = tempfile.mkdtemp(prefix="bench-orphans-")
    root = str(Path(workdir) / "db.db" / "t")
    start = time.perf_counter()
    table, planted = build(root, files, manifests)
    print(
        f"[{files:,}] built {files + planted:,} data files, {manifests} manifests in "
        f"{time.perf_counter() - start:.1f} s",
        flush=True,
    )
    settings = OrphanSettings(older_than_ms=0, force=True)

    # Other engineers run Spark on the same 2 cores: the 1-minute load around each timed phase says
    # how comparable (a) and (b) are.
    single_load = [os.getloadavg()[0]]
    start = time.perf_counter()
    listed, found = single_process(table, int(time.time() * 1000))
    single = time.perf_counter() - start
    single_load.append(os.getloadavg()[0])
    assert found == planted, (found, planted)

    job_load = [os.getloadavg()[0]]
    tracemalloc.start()
    start = time.perf_counter()
    record = remove_orphan_files(spark, table, settings, dry_run=True)
    job = time.perf_counter() - start
    job_load.append(os.getloadavg()[0])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert record.counts["orphan_files"] == planted, record.counts
    assert record.counts["listed_files"] == listed

    start = time.perf_counter()
    deleted = remove_orphan_files(spark, table, settings).counts["files_deleted"]
    delete_run = time.perf_counter() - start
    assert deleted == planted
    print(
        f"[{files:,}] (a) job dry run {job:.1f} s = {listed / job:,.0f} files/s; driver Python heap peak "
        f"{peak / 2**20:.1f} MiB; load {job_load[0]:.1f} -> {job_load[1]:.1f}\n"
        f"[{files:,}] (b) single process {single:.1f} s = {listed / single:,.0f} files/s; "
        f"load {single_load[0]:.1f} -> {single_load[1]:.1f}\n"
        f"[{files:,}] a/b speed ratio {single / job:.2f}; "
        f"real run deleting {deleted:,} orphans {delete_run:.1f} s",
        flush=True,
    )
    shutil.rmtree(workdir)  # a million files in the shared /tmp
    return {"files": listed, "job_s": job, "single_s": single, "peak_mib": peak / 2**20}


def race_java(files: int, manifests: int) -> dict[str, float]:
    """Our dry run and Java's orphan cleaning (dry run), each a whole process, on the same table."""
    import datetime as dt

    from scripts.bench_peers import describe_ratio, java_unavailable, job_config, run_java, run_job_process

    unavailable = java_unavailable()
    if unavailable:
        raise SystemExit(f"the Java peer cannot run: {unavailable}")
    workdir = tempfile.mkdtemp(prefix="bench-orphans-java-")
    start = time.perf_counter()
    root = str(Path(workdir) / "db.db" / "t")
    table, planted = build(root, files, manifests)
    print(
        f"[{files:,}] built {files + planted:,} data files in {time.perf_counter() - start:.1f} s", flush=True
    )
    settings = {"older_than": "0 ms", "force": True}
    job, record = run_job_process(
        "remove-orphan-files", job_config(root, settings), Path(workdir), dry_run=True
    )
    cutoff = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) + dt.timedelta(minutes=1)
    peer = run_java(
        lambda oracle: oracle.remove_orphan_files(path=table.path, older_than=cutoff, dry_run=True)
    )
    assert record["counts"]["orphan_files"] == planted, record["counts"]
    assert len(peer.result) == planted, len(peer.result)
    print(
        f"[{files:,}] orphan cleaning dry run: {describe_ratio(job, peer)}; "
        f"ours ran in the {record['details'].get('executed_in')}",
        flush=True,
    )
    shutil.rmtree(workdir)
    return {"files": files, "java_s": peer.total_s, "ours_s": job.total_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="100000,1000000", help="comma-separated table sizes")
    parser.add_argument("--manifests", type=int, default=1000)
    parser.add_argument("--java", default="", help="comma-separated sizes to race Java's orphan cleaning at")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    for size in filter(None, args.java.split(",")):
        race_java(int(size), args.manifests)
    if not args.files:
        return
    spark = get_or_create_spark("bench-orphans", {"spark.driver.memory": "2g"})
    # The first Spark jobs of a process pay for JIT compilation and Python worker start-up (~30 s on
    # a loaded 2-core machine); a long-lived cluster session has paid that already, so warm up first.
    warm_dir = tempfile.mkdtemp(prefix="bench-orphans-warmup-")
    warm, _ = build(str(Path(warm_dir) / "db.db" / "t"), 2000, 10)
    remove_orphan_files(spark, warm, OrphanSettings(older_than_ms=0, force=True), dry_run=True)
    shutil.rmtree(warm_dir)
    print(f"load average before: {os.getloadavg()}", flush=True)
    results = [run_size(spark, int(size), args.manifests) for size in args.files.split(",")]
    print(f"load average after: {os.getloadavg()}")
    for result in results:
        count, job_s, single_s = result["files"], result["job_s"], result["single_s"]
        print(
            f"{count:>10,} files: job {count / job_s:,.0f} files/s, single process {count / single_s:,.0f} "
            f"files/s, ratio {single_s / job_s:.2f}, driver peak {result['peak_mib']:.1f} MiB"
        )


if __name__ == "__main__":
    main()
