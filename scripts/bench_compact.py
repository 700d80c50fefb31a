"""Compaction benchmark: rows/s of the compact job vs Spark's plain rewrite of the same rows.

    .venv/bin/python scripts/bench_compact.py                                   # the issue's sizes
    .venv/bin/python scripts/bench_compact.py --append-rows 500000 --append-files 500 \\
        --pk-rows 500000 --pk-runs 20 --pk-buckets 8                            # a quick run

(1) An append table (`bucket: -1`) of `--append-rows` rows in `--append-files` small files,
compacted with `strategy: full`. (2) A primary-key table with `--pk-buckets` buckets written in
`--pk-runs` upsert runs (each upserts `pk-rows / pk-runs` keys drawn at random from `pk-rows`, so
every bucket holds `--pk-runs` sorted runs), fully compacted. For each, in the same session,
Spark's plain rewrite of the same files, `spark.read.parquet(files).repartition(n).write.parquet`
with `n` = the number of files the job wrote. Prints rows/s of both and the ratio (goals: append
>= 0.8, PK >= 0.5), and the peak RSS of the Python workers that ran the compaction tasks (bounded
by batches, not by the bucket's size: compare two sizes).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from jobs.compact import compact  # noqa: E402
from jobs.compaction.run import CompactRequest  # noqa: E402
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from paimon_format.scan.snapshot_scan import live_entries  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_tables import commit_files, create_table  # noqa: E402
from scripts.generate_events import events  # noqa: E402


def timed(label: str, action) -> float:
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    print(f"  {label:<44} {seconds:8.2f} s", flush=True)
    return seconds


def live_paths(table: Table) -> tuple[list[str], int]:
    entries = live_entries(table, table.snapshot_manager.latest())
    paths = [table.full_path(table.data_file_relpaths(e.partition, e.bucket, e.file)[0]) for e in entries]
    return paths, sum(e.file.row_count for e in entries)


def worker_peak_rss_mib(spark) -> float:
    """The largest peak RSS among the (reused) Python workers, in MiB."""

    def peak(_rows):
        import resource

        yield resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    parallelism = spark.sparkContext.defaultParallelism
    return max(
        spark.sparkContext.parallelize(range(parallelism * 4), parallelism * 4).mapPartitions(peak).collect()
    )


def compare(spark, label: str, table: Table, work: Path, goal: float, **compact_args) -> None:
    paths, rows = live_paths(table)
    print(f"{label}: {rows:,} rows in {len(paths):,} files", flush=True)
    record = {}

    def run_job() -> None:
        record["r"] = compact(spark, table, CompactRequest(**compact_args))

    ours = timed(f"(a) compact job, {label}", run_job)
    written = max(record["r"].counts.get("files_written", 1), 1)
    peak = worker_peak_rss_mib(spark)
    out = str(work / f"plain-{label}")
    plain = timed(
        f"(b) read.parquet.repartition({written}).write",
        lambda: spark.read.parquet(*paths).repartition(written).write.mode("overwrite").parquet(out),
    )
    print(
        f"  rows/s (a) {rows / ours:12,.0f}   (b) {rows / plain:12,.0f}   ratio a/b = {plain / ours:.2f} "
        f"(goal >= {goal});  files {len(paths):,} -> {written:,};  Python worker peak RSS {peak:,.0f} MiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--append-rows", type=int, default=10_000_000)
    parser.add_argument("--append-files", type=int, default=5_000)
    parser.add_argument("--pk-rows", type=int, default=10_000_000)
    parser.add_argument("--pk-runs", type=int, default=20)
    parser.add_argument("--pk-buckets", type=int, default=8)
    parser.add_argument("--target-file-size", default="128 mb")
    parser.add_argument("--skip-append", action="store_true")
    parser.add_argument("--skip-pk", action="store_true")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-compact-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = get_or_create_spark("bench-compact", {"spark.sql.shuffle.partitions": "8"})
    # warm up the JVM and the Python workers, so neither side pays the session's first jobs
    parallelism = spark.sparkContext.defaultParallelism
    spark.sparkContext.parallelize(range(parallelism), parallelism).map(lambda x: x).collect()
    spark.range(100_000).selectExpr("id % 7 AS k").groupBy("k").count().collect()

    if not args.skip_append:
        data = events(args.append_rows, 1, 0).drop_columns(["dt"])
        table = create_table(str(work / "wh" / "bench.db" / "append"), data, [], {"bucket": "-1"})
        per_file = max(args.append_rows // args.append_files, 1)
        parts = [data.slice(start, per_file) for start in range(0, data.num_rows, per_file)]
        timed(f"setup: {len(parts):,} small files", lambda: commit_files(table, parts, 0))
        compare(spark, "append", table, work, 0.8, strategy="full", target_file_size=args.target_file_size)

    if not args.skip_pk:
        keys = args.pk_rows // args.pk_runs
        base = events(keys, 1, 1).drop_columns(["dt"])
        table = create_table(
            str(work / "wh" / "bench.db" / "pk"), base, ["id"], {"bucket": str(args.pk_buckets)}
        )
        rng = np.random.default_rng(7)

        def upserts() -> None:
            for run in range(args.pk_runs):
                ids = rng.choice(args.pk_rows, size=keys, replace=False).astype(np.int64)
                part = events(keys, 1, run + 2).drop_columns(["dt"]).set_column(0, "id", pa.array(ids))
                commit_files(table, [part], run * keys)

        timed(f"setup: {args.pk_runs} upsert runs", upserts)
        compare(spark, "primary-key", table, work, 0.5, target_file_size=args.target_file_size)
    stop_session(spark)


if __name__ == "__main__":
    main()
