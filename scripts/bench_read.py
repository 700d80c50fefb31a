"""Read benchmark: rows/s of `spark.read.format("paimon")` vs Spark's own Parquet reader over the same
data files (the floor) vs `read_table`, on a partitioned append table.

    .venv/bin/python scripts/bench_read.py --rows 10000000 --days 30

Writes the table once with the write job, then reads it whole three ways in the same session, each
into Spark's `noop` sink (every column materialised: `count()` would let Parquet skip the data), the
best of `--repeat` runs each: (a) the source, (b) `spark.read.parquet` of the table's live data files
(the same bytes, without Paimon's planning), (c) `read_table`. Prints rows/s and the ratios a/b
(goal >= 0.7) and a/c.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq  # noqa: E402

from jobs.read import read_table  # noqa: E402
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from jobs.source import register  # noqa: E402
from jobs.write import write_dataframe  # noqa: E402
from jobs.writing.settings import WriteSettings  # noqa: E402
from jobs.writing.source import parquet_files  # noqa: E402
from paimon_format.scan.snapshot_scan import live_entries  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.generate_events import events  # noqa: E402


def timed(label: str, action: Callable[[], object], repeat: int) -> float:
    """The best of `repeat` runs: the first also pays one-time costs (Python workers, imports)."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        runs.append(time.perf_counter() - start)
    print(f"  {label:<44} {min(runs):8.2f} s  (runs: {', '.join(f'{r:.2f}' for r in runs)})", flush=True)
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--files", type=int, default=8, help="source Parquet files the table is written from")
    parser.add_argument("--repeat", type=int, default=2, help="runs per reader; the best one counts")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-read-"))
    shutil.rmtree(work, ignore_errors=True)
    source = work / "source"
    source.mkdir(parents=True)
    per_file = args.rows // args.files
    for index in range(args.files):
        pq.write_table(events(per_file, args.days, index, index * per_file), source / f"part-{index}.parquet")
    rows = per_file * args.files

    # moves_rows: C2 on, as in a notebook user's own session (the JVM's default)
    spark = get_or_create_spark("bench-read", {"spark.sql.shuffle.partitions": "8"}, moves_rows=True)
    register(spark)
    warehouse = str(work / "wh")
    files = parquet_files(str(source), {})
    write_dataframe(files, WriteSettings(warehouse, "bench.events", partition_keys=["dt"]), spark=spark)
    table = Table.open(warehouse, "bench.events")
    data_files = [table.data_file_path(e) for e in live_entries(table, table.snapshot_manager.latest())]
    print(f"{rows:,} rows, {args.days} partitions, {len(data_files)} data files: {warehouse}", flush=True)

    def sink(frame: object) -> None:
        frame.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]

    source_s = timed(
        "(a) spark.read.format('paimon')",
        lambda: sink(spark.read.format("paimon").option("warehouse", warehouse).load("bench.events")),
        args.repeat,
    )
    floor = timed(
        "(b) spark.read.parquet, the same files", lambda: sink(spark.read.parquet(*data_files)), args.repeat
    )
    ours = timed("(c) read_table", lambda: sink(read_table(spark, warehouse, "bench.events")), args.repeat)
    print()
    print(f"rows/s  (a) {rows / source_s:12,.0f}   (b) {rows / floor:12,.0f}   (c) {rows / ours:12,.0f}")
    print(f"ratio a/b = {floor / source_s:.2f}  (goal >= 0.7);  a/c = {ours / source_s:.2f}")
    stop_session(spark)


if __name__ == "__main__":
    main()
