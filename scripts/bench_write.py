"""Write benchmark: rows/s of the write job vs Spark's own Parquet writer (the floor) vs pypaimon.

    .venv/bin/python scripts/bench_write.py --rows 10000000 --days 30

Prints rows/s for (a) `write_dataframe` into a partitioned append table, (b) `df.write.parquet`
partitioned the same way, in the same run and the same session, (c) pypaimon writing the same rows
in one process, and the ratio a/b (goal >= 0.7) and a/c (goal > 1).
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

import pyarrow.dataset as ds  # noqa: E402

from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from jobs.write import write_dataframe  # noqa: E402
from jobs.writing.settings import WriteSettings  # noqa: E402
from jobs.writing.source import parquet_files  # noqa: E402
from scripts.generate_events import events  # noqa: E402


def timed(label: str, action) -> float:
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    print(f"  {label:<38} {seconds:8.2f} s", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--skip-pypaimon", action="store_true")
    parser.add_argument("--batch-rows", default="10000", help="spark.sql.execution.arrow.maxRecordsPerBatch")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-write-"))
    source = work / "source"
    shutil.rmtree(work, ignore_errors=True)
    source.mkdir(parents=True)
    per_file = args.rows // args.files
    for index in range(args.files):
        import pyarrow.parquet as pq

        pq.write_table(events(per_file, args.days, index, index * per_file), source / f"part-{index}.parquet")
    rows = per_file * args.files
    print(f"{rows:,} rows, {args.days} partitions, source {source}", flush=True)

    spark = get_or_create_spark(
        "bench-write",
        {
            "spark.sql.shuffle.partitions": "8",
            "spark.sql.execution.arrow.maxRecordsPerBatch": args.batch_rows,
        },
        moves_rows=True,  # as the write job's own session (jobs.runtime.registry)
    )
    df = spark.read.parquet(str(source)).cache()
    df.count()

    files = parquet_files(str(source), {})
    direct = timed(
        "(a) write job, Parquet source (YAML path)",
        lambda: write_dataframe(
            files, WriteSettings(str(work / "wh-direct"), "bench.events", partition_keys=["dt"]), spark=spark
        ),
    )
    ours = timed(
        "(a') write_dataframe(df) Python API",
        lambda: write_dataframe(df, WriteSettings(str(work / "wh"), "bench.events", partition_keys=["dt"])),
    )
    spark_writer = df.write.partitionBy("dt").mode("overwrite")
    floor = timed(
        "(b) df.write.parquet (Spark floor)", lambda: spark_writer.parquet(str(work / "spark-parquet"))
    )
    pypaimon_s = None
    if not args.skip_pypaimon:
        import pypaimon

        def with_pypaimon() -> None:
            catalog = pypaimon.CatalogFactory.create({"warehouse": str(work / "pp-wh")})
            catalog.create_database("bench", True)
            data = ds.dataset(str(source)).to_table()
            catalog.create_table(
                "bench.events", pypaimon.Schema.from_pyarrow_schema(data.schema, partition_keys=["dt"]), False
            )
            table = catalog.get_table("bench.events")
            builder = table.new_batch_write_builder()
            write, commit = builder.new_write(), builder.new_commit()
            write.write_arrow(data)
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()

        pypaimon_s = timed("(c) pypaimon, one process", with_pypaimon)

    print()
    print(
        f"rows/s  (a) {rows / direct:12,.0f}   (a') {rows / ours:12,.0f}   (b) {rows / floor:12,.0f}"
        + (f"   (c) {rows / pypaimon_s:12,.0f}" if pypaimon_s else "")
    )
    print(f"ratio a/b = {floor / direct:.2f}  (goal >= 0.7);  a'/b = {floor / ours:.2f}")
    if pypaimon_s:
        print(f"ratio a/c = {pypaimon_s / direct:.2f}  (goal > 1: faster than pypaimon)")
    stop_session(spark)


if __name__ == "__main__":
    main()
