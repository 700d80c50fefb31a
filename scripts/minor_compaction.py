"""Bytes a primary-key minor compaction rewrites against a full one (issue #29; bytes, not time).

    .venv/bin/python scripts/minor_compaction.py --rows 1000000           # CI-sized: 1M rows
    .venv/bin/python scripts/minor_compaction.py --java                   # the issue's 10M rows + Java
    .venv/bin/python scripts/minor_compaction.py --rows 20000 --java      # a smoke run (proves it runs)

A deduplicate table of `--rows` rows in `--buckets` buckets is written and fully compacted (one
top-level run per bucket), then a `--upsert-percent` upsert batch lands, split into each of the
`--commits` counts in turn (one level-0 run per bucket per commit). For each split, two copies of
that table: `compact` with `strategy: minor` on one, `strategy: full` on the other. Prints the bytes
each rewrote (the run record's `files_rewritten` bytes: the input files replaced) and wrote, the
ratio (issue target: minor <= 5% of full) and whether each copy reads (`read_table`, Spark) exactly
the expected rows: every key of the base table once, with the upsert batch's values where it
upserted the key. With `--java`, Paimon's own Java reader (a fresh oracle JVM, tests/java/oracle.py)
counts and sums both copies too: row count, sum of the keys and of `amount` (the upserted values)
must be the expected ones. With fewer runs per bucket than `num-sorted-run.compaction-trigger` (5)
the universal rules pick nothing, as Paimon's writer would (the 1-commit split: 0 bytes). At small
sizes a file's fixed Parquet costs dominate, so the ratio misses the target (14% at 20,000 rows).
`--check` exits 1 when a ratio misses the target, a split at or above the trigger picked nothing (a 0% that
compacted nothing proves nothing), or a read differs from the expected rows.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from jobs.compact import compact  # noqa: E402
from jobs.compaction.run import CompactRequest  # noqa: E402
from jobs.read import read_table  # noqa: E402
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from paimon_format.storage.fileio import FileIO  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_peers import java_unavailable, load_average, run_java  # noqa: E402
from scripts.bench_tables import commit_files, create_table  # noqa: E402
from scripts.generate_events import events  # noqa: E402

TARGET = 0.05
TRIGGER = 5  # num-sorted-run.compaction-trigger, Paimon's default (the table leaves it unset)
SUMS = ("id", "amount")  # what the Java oracle's count_rows sums (amount: the upserted values)


@dataclass
class Outcome:
    """One strategy's run on its copy: what the run record says it did and whether reads match."""

    warehouse: Path
    bins: int
    files_in: int
    bytes_in: int
    bytes_out: int
    rows_in: int
    read_ok: bool = False
    read_note: str = ""
    java_ok: bool | None = None  # None: not checked


def _read(spark: SparkSession, warehouse: Path, schema: pa.Schema) -> pa.Table:
    """The table as Spark reads it through the product's `read_table`, in key order."""
    frame = read_table(spark, str(warehouse), "bench.pk", columns=schema.names)
    return frame.toArrow().cast(schema).sort_by("id")


def _compare(actual: pa.Table, expected: pa.Table) -> tuple[bool, str]:
    """Equal, or a note saying how they differ (row counts, or how many keys' rows differ)."""
    if actual.num_rows != expected.num_rows:
        return False, f"{actual.num_rows:,} rows read, {expected.num_rows:,} expected"
    if actual.equals(expected):
        return True, ""
    wrong = np.zeros(expected.num_rows, dtype=bool)
    for name in expected.column_names:
        same = pc.fill_null(pc.equal(actual.column(name), expected.column(name)), False)
        wrong |= ~same.to_numpy(zero_copy_only=False)
    return False, f"{int(wrong.sum()):,} of {expected.num_rows:,} rows differ (first id {_first(wrong)})"


def _first(wrong: np.ndarray) -> int:
    return int(np.flatnonzero(wrong)[0]) if wrong.any() else -1


def _upsert_batch(rows: int, percent: float, commits: int, seed: int) -> pa.Table:
    """`percent` of the keys (distinct, random) with new values from another seed."""
    count = max(int(rows * percent / 100), commits)
    ids = np.random.default_rng(seed).choice(rows, size=count, replace=False).astype(np.int64)
    return events(count, 1, seed).drop_columns(["dt"]).set_column(0, "id", pa.array(ids))


def _expected(base: pa.Table, batch: pa.Table) -> pa.Table:
    """Every key of `base` (ids 0..n-1 in order) once, with `batch`'s row where it upserted the key."""
    take = np.arange(base.num_rows, dtype=np.int64)
    take[batch.column("id").to_numpy()] = base.num_rows + np.arange(batch.num_rows, dtype=np.int64)
    return pa.concat_tables([base, batch]).take(pa.array(take))


def _commit_batch(table: Table, batch: pa.Table, rows: int, commits: int) -> None:
    """The batch in `commits` APPEND snapshots, with sequence numbers above every base row's (the
    base rows have 0..rows-1), rising from commit to commit."""
    share = -(-batch.num_rows // commits)
    for index in range(commits):
        commit_files(table, [batch.slice(index * share, share)], rows + index * share)


def _run(spark: SparkSession, warehouse: Path, strategy: str) -> Outcome:
    table = _open(warehouse)
    record = compact(spark, table, CompactRequest(strategy=strategy))
    return Outcome(
        warehouse,
        bins=record.counts.get("bins", 0),
        files_in=record.counts.get("files_rewritten", 0),
        bytes_in=record.bytes.get("files_rewritten", 0),
        bytes_out=record.bytes.get("files_written", 0),
        rows_in=record.counts.get("rows_rewritten", 0),
    )


def _java_counts(outcomes: dict[str, Outcome], expected: pa.Table) -> None:
    """Paimon's Java reader on each copy: row count and sums must be the expected rows'."""
    want = {
        "rows": expected.num_rows,
        "sums": {
            "id": int(pc.sum(expected.column("id")).as_py()),
            "amount": int(np.round(expected.column("amount").to_numpy() * 100).astype(np.int64).sum()),
        },
    }
    paths = {name: str(o.warehouse / "bench.db" / "pk") for name, o in outcomes.items()}
    timing = run_java(lambda oracle: {name: oracle.count_rows(path, SUMS) for name, path in paths.items()})
    for name, got in timing.result.items():
        outcomes[name].java_ok = got == want
        if got != want:
            print(f"    Java read of the {name} copy: {got}, expected {want}", flush=True)


def measure(
    spark: SparkSession, work: Path, base: Path, data: pa.Table, args: argparse.Namespace, commits: int
) -> tuple[float, bool, bool]:
    """Minor vs full on two copies of the base table after the upsert batch; (ratio, picked
    something, every read correct)."""
    batch = _upsert_batch(args.rows, args.upsert_percent, commits, seed=commits + 1)
    expected = _expected(data, batch)
    outcomes: dict[str, Outcome] = {}
    for strategy in ("minor", "full"):
        warehouse = work / f"{strategy}-{commits}"
        shutil.copytree(base, warehouse)
        _commit_batch(_open(warehouse), batch, args.rows, commits)
        outcome = outcomes[strategy] = _run(spark, warehouse, strategy)
        outcome.read_ok, outcome.read_note = _compare(_read(spark, warehouse, data.schema), expected)
    if args.java:
        _java_counts(outcomes, expected)
    minor, full = outcomes["minor"], outcomes["full"]
    ratio = minor.bytes_in / full.bytes_in if full.bytes_in else 0.0
    print(f"  {commits} commit(s) of {batch.num_rows:,} upserted keys ({load_average()}):", flush=True)
    for name, o in outcomes.items():
        java = "" if o.java_ok is None else f"; Java reads the expected rows: {o.java_ok}"
        note = f" ({o.read_note})" if o.read_note else ""
        print(
            f"    {name:5}: {o.bins} bins, {o.files_in:,} files ({o.rows_in:,} rows, {o.bytes_in:,} bytes) "
            f"rewritten into {o.bytes_out:,} bytes; reads the expected rows: {o.read_ok}{note}{java}",
            flush=True,
        )
    print(f"    minor/full = {ratio:.2%} of the bytes (target <= {TARGET:.0%})", flush=True)
    picked = minor.bytes_in > 0 or commits + 1 < TRIGGER
    correct = all(o.read_ok and o.java_ok is not False for o in outcomes.values())
    return ratio, picked, correct


def _open(warehouse: Path) -> Table:
    root = str(warehouse / "bench.db" / "pk")
    return Table(FileIO.for_path(root), root)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--upsert-percent", type=float, default=1.0)
    parser.add_argument("--commits", default="1,5", help="comma-separated: the batch split into N commits")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--java", action="store_true", help="Paimon's Java reader checks both copies too")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.java and (why := java_unavailable()):
        parser.error(f"--java: {why}")
    return args


def main() -> None:
    args = _arguments()
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="minor-compaction-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spark = get_or_create_spark(
        "minor-compaction", {"spark.sql.shuffle.partitions": str(args.buckets)}, moves_rows=True
    )
    base = work / "base"
    data = events(args.rows, 1, 1).drop_columns(["dt"])
    table = create_table(str(base / "bench.db" / "pk"), data, ["id"], {"bucket": str(args.buckets)})
    commit_files(table, [data], 0)
    compact(spark, table, CompactRequest(strategy="full"))
    print(f"{args.rows:,} rows x {args.buckets} buckets, fully compacted; {args.upsert_percent}% upserted:")
    results: list[Any] = [measure(spark, work, base, data, args, int(n)) for n in args.commits.split(",")]
    stop_session(spark)
    shutil.rmtree(work, ignore_errors=True)
    if args.check and not all(ratio <= TARGET and picked and ok for ratio, picked, ok in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
