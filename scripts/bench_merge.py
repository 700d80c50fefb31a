"""Merge benchmark: rows/s of `merge_sorted_runs` over overlapping sorted runs, vs rewriting them.

    .venv/bin/python scripts/bench_merge.py --runs 20 --rows 200000 [--engine deduplicate] [--spark]

Builds `--runs` sorted runs of `--rows` rows each (BIGINT key drawn from a key space of
runs*rows/2, so keys overlap across runs; a STRING and a DOUBLE value column), written as Parquet
files like a bucket's data files, then times, in one process:
(a) reading the files batch by batch and merging them (the compaction hot path, no write), and
(a') the same plus writing the merged rows as one Parquet file;
(b) pyarrow reading and rewriting the same files as one Parquet file (a lower bound of any rewrite);
(c) with --spark, Spark's plain Parquet rewrite of the same rows (local[2]), the goal's yardstick:
    (a') should reach >= 0.5x the rows/s of (c).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from paimon_format.merge.sorted_runs import merge_sorted_runs  # noqa: E402
from paimon_format.model.file_layout import file_arrow_schema  # noqa: E402
from paimon_format.model.options import CoreOptions  # noqa: E402
from paimon_format.model.schema import new_table_schema  # noqa: E402
from paimon_format.model.type_parsing import parse_type  # noqa: E402


def build_runs(directory: Path, schema, runs: int, rows: int, seed: int) -> list[Path]:
    layout = file_arrow_schema(schema, CoreOptions(schema.options))
    rng = np.random.default_rng(seed)
    key_space = max(runs * rows // 2, rows)
    paths = []
    for run in range(runs):
        keys = np.sort(rng.choice(key_space, size=rows, replace=False)).astype(np.int64)
        sequence = np.arange(run * rows, (run + 1) * rows, dtype=np.int64)
        kinds = np.zeros(rows, dtype=np.int8)
        names = pa.array([f"name-{k % 1000}" for k in keys.tolist()])
        table = pa.Table.from_arrays(
            [keys, sequence, kinds, keys, names, rng.random(rows)],
            schema=layout,
        )
        path = directory / f"run-{run}.parquet"
        pq.write_table(table, path, compression="zstd")
        paths.append(path)
    return paths


def timed(label: str, rows: int, action) -> float:
    start = time.perf_counter()
    result = action()
    seconds = time.perf_counter() - start
    print(f"  {label:<44} {seconds:7.2f} s {rows / seconds:>12,.0f} input rows/s", flush=True)
    return result, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--engine", default="deduplicate")
    parser.add_argument("--batch-rows", type=int, default=8192)
    parser.add_argument("--spark", action="store_true", help="also time Spark's Parquet rewrite")
    args = parser.parse_args()
    options = {"merge-engine": args.engine, "bucket": "1"}
    if args.engine == "aggregation":
        options["fields.amount.aggregate-function"] = "sum"
    schema = new_table_schema(
        [("id", parse_type("BIGINT")), ("name", parse_type("STRING")), ("amount", parse_type("DOUBLE"))],
        primary_keys=["id"],
        options=options,
    )
    work = Path(tempfile.mkdtemp(prefix="bench-merge-"))
    paths = build_runs(work, schema, args.runs, args.rows, seed=7)
    total = args.runs * args.rows
    print(f"{args.runs} runs x {args.rows:,} rows = {total:,} rows, engine {args.engine}, in {work}")

    def merge() -> int:
        runs = [pq.ParquetFile(p).iter_batches(batch_size=args.batch_rows) for p in paths]
        out = 0
        for batch in merge_sorted_runs(runs, schema, drop_deletes=True, batch_rows=args.batch_rows):
            out += batch.num_rows
        return out

    merged, merge_seconds = timed("merge_sorted_runs (read + merge)", total, merge)
    print(f"  {merged:,} keys out")

    def merge_and_write() -> None:
        runs = [pq.ParquetFile(p).iter_batches(batch_size=args.batch_rows) for p in paths]
        with pq.ParquetWriter(work / "merged.parquet", layout, compression="zstd") as writer:
            for batch in merge_sorted_runs(runs, schema, drop_deletes=True, batch_rows=args.batch_rows):
                writer.write_batch(batch)

    layout = file_arrow_schema(schema, CoreOptions(schema.options))
    _, merge_write_seconds = timed("merge_sorted_runs + parquet write", total, merge_and_write)

    def rewrite() -> None:
        writer = None
        for p in paths:
            for batch in pq.ParquetFile(p).iter_batches(batch_size=65536):
                if writer is None:
                    writer = pq.ParquetWriter(work / "rewrite.parquet", batch.schema, compression="zstd")
                writer.write_batch(batch)
        writer.close()

    _, rewrite_seconds = timed("pyarrow parquet rewrite (read + write)", total, rewrite)
    print(f"  merge / pyarrow rewrite speed: {rewrite_seconds / merge_seconds:.2f}")
    if args.spark:
        from jobs.runtime.spark import get_or_create_spark, stop_session

        spark = get_or_create_spark("bench-merge", {"spark.master": "local[2]"}, moves_rows=True)
        spark.read.parquet(str(paths[0])).count()  # warm up the JVM

        def spark_rewrite() -> None:
            frame = spark.read.parquet(*[str(p) for p in paths])
            frame.write.mode("overwrite").option("compression", "zstd").parquet(str(work / "spark-out"))

        _, spark_seconds = timed("spark parquet rewrite (local[2])", total, spark_rewrite)
        print(f"  merge / spark rewrite speed: {spark_seconds / merge_seconds:.2f}")
        print(f"  merge+write / spark rewrite speed: {spark_seconds / merge_write_seconds:.2f} (goal >= 0.5)")
        stop_session(spark)


if __name__ == "__main__":
    main()
