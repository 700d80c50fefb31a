"""Bytes a primary-key minor compaction rewrites against a full one (issue #29; bytes, not time).

    .venv/bin/python scripts/minor_compaction.py --rows 1000000           # CI-sized: 1M rows
    .venv/bin/python scripts/minor_compaction.py                          # the issue's 10M rows
    .venv/bin/python scripts/minor_compaction.py --rows 20000 --check     # a short smoke run

A deduplicate table of `--rows` rows in `--buckets` buckets is written and fully compacted (one
top-level run per bucket), then a `--upsert-percent` upsert batch lands, split into each of the
`--commits` counts in turn (one level-0 run per bucket per commit). For each split, two copies of
that table: `compact` with `strategy: minor` on one, `strategy: full` on the other. Prints the bytes
each rewrote (the run record's `files_rewritten` bytes), the ratio (issue target: minor <= 5% of
full) and whether both copies read the same rows. With fewer runs per bucket than
`num-sorted-run.compaction-trigger` (5) the universal rules pick nothing, as Paimon's writer would.
`--check` exits 1 when a ratio misses the target or the reads differ.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from jobs.compact import compact  # noqa: E402
from jobs.compaction.run import CompactRequest  # noqa: E402
from jobs.read import read_table  # noqa: E402
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from paimon_format.storage.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_tables import commit_files, create_table  # noqa: E402
from scripts.generate_events import events  # noqa: E402

TARGET = 0.05


def _rows(spark, warehouse: Path) -> pa.Table:
    frame = read_table(spark, str(warehouse), "bench.pk")
    return frame.toArrow().sort_by("id")


def _upsert(table: Table, rows: int, percent: float, commits: int, seed: int) -> None:
    """`percent` of the keys upserted with new values, in `commits` APPEND snapshots."""
    count = max(int(rows * percent / 100), commits)
    ids = np.random.default_rng(seed).choice(rows, size=count, replace=False).astype(np.int64)
    data = events(count, 1, seed).drop_columns(["dt"]).set_column(0, "id", pa.array(ids))
    share = -(-count // commits)
    for index in range(commits):
        part = data.slice(index * share, share)
        commit_files(table, [part], rows + 1_000_000 * (index + 1))


def measure(spark, work: Path, base: Path, args: argparse.Namespace, commits: int) -> tuple[float, bool]:
    """Minor vs full on two copies of the base table after the upsert batch; (ratio, same rows)."""
    copies = {}
    for strategy in ("minor", "full"):
        warehouse = work / f"{strategy}-{commits}"
        shutil.copytree(base, warehouse)
        table = _open(warehouse)
        _upsert(table, args.rows, args.upsert_percent, commits, seed=commits + 1)
        record = compact(spark, table, CompactRequest(strategy=strategy))
        copies[strategy] = (warehouse, record.bytes.get("files_rewritten", 0), record.counts.get("bins", 0))
    minor_bytes, full_bytes = copies["minor"][1], copies["full"][1]
    ratio = minor_bytes / full_bytes if full_bytes else 0.0
    same = _rows(spark, copies["minor"][0]).equals(_rows(spark, copies["full"][0]))
    print(
        f"  {commits} commit(s): minor rewrote {minor_bytes:,} bytes ({copies['minor'][2]} bins), "
        f"full {full_bytes:,} bytes ({copies['full'][2]} bins): minor/full = {ratio:.2%} "
        f"(target <= {TARGET:.0%}); same rows: {same}",
        flush=True,
    )
    return ratio, same


def _open(warehouse: Path) -> Table:
    root = str(warehouse / "bench.db" / "pk")
    return Table(FileIO.for_path(root), root)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--upsert-percent", type=float, default=1.0)
    parser.add_argument("--commits", default="1,5", help="comma-separated: the batch split into N commits")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="minor-compaction-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = get_or_create_spark("minor-compaction", {"spark.sql.shuffle.partitions": str(args.buckets)})
    base = work / "base"
    data = events(args.rows, 1, 1).drop_columns(["dt"])
    table = create_table(str(base / "bench.db" / "pk"), data, ["id"], {"bucket": str(args.buckets)})
    commit_files(table, [data], 0)
    compact(spark, table, CompactRequest(strategy="full"))
    print(f"{args.rows:,} rows x {args.buckets} buckets, fully compacted; {args.upsert_percent}% upserted:")
    results = [measure(spark, work, base, args, int(n)) for n in args.commits.split(",")]
    stop_session(spark)
    shutil.rmtree(work, ignore_errors=True)
    if args.check and not all(ratio <= TARGET and same for ratio, same in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
