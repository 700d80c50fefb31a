"""maintain benchmark: many small tables in one run, one table at a time vs several at a time.

    .venv/bin/python scripts/bench_maintain.py --tables 8 --commits 20 --parallelism 4

Builds `--tables` metadata-only tables (manifest compaction needs no data files), each with
`--commits` one-manifest commits, then times the maintain job (compact-manifests, mode full, no
lock contention) with (a) `parallelism: 1` and (b) `parallelism: N` on fresh copies. Per-table work
here is small, so the run time is dominated by per-job Spark overhead, which several tables at a
time overlap; the ratio a/b shows how much. Prints seconds, tables/s and the ratio.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.config import validate  # noqa: E402
from jobs.maintain import run  # noqa: E402
from jobs.maintain_config import MaintainConfig  # noqa: E402
from jobs.registry import JobContext  # noqa: E402
from jobs.report import RunRecord  # noqa: E402
from jobs.spark import get_or_create_spark  # noqa: E402
from paimon_format.commit import SnapshotCommit  # noqa: E402
from tests.factories import data_file, make_table, message  # noqa: E402

NO_AUTO_MERGE = {"manifest.merge-min-count": "1000", "manifest.full-compaction-threshold-size": "1 gb"}


def build(warehouse: str, tables: int, commits: int) -> None:
    for t in range(tables):
        table = make_table(f"{warehouse}/bench.db/t{t:03d}", options=NO_AUTO_MERGE)
        committer = SnapshotCommit(table)
        for i in range(commits):
            committer.append([message(table, [f"p{i % 5}"], data_file(f"data-{t}-{i}.parquet"))])


def timed_run(spark, warehouse: str, parallelism: int) -> tuple[float, RunRecord]:
    import logging

    config = validate(
        {
            "warehouse": warehouse,
            "tables": ["bench.*"],
            "parallelism": parallelism,
            "lock": {"enabled": True},
            "defaults": {"compact_manifests": {"mode": "full"}},
        },
        MaintainConfig,
        "bench",
    )
    record = RunRecord("maintain")
    context = JobContext("maintain", config, False, record, logging.getLogger("bench"), _spark=spark)
    started = time.perf_counter()
    run(context, config)
    return time.perf_counter() - started, record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=4)
    args = parser.parse_args()
    spark = get_or_create_spark("bench maintain")
    with tempfile.TemporaryDirectory() as directory:
        template = f"{directory}/template"
        build(template, args.tables, args.commits)
        shutil.copytree(template, f"{directory}/warmup")
        timed_run(spark, f"{directory}/warmup", 1)  # JVM and Python workers warm
        results = {}
        for label, parallelism in (("a", 1), ("b", args.parallelism)):
            warehouse = f"{directory}/{label}"
            shutil.copytree(template, warehouse)
            seconds, record = timed_run(spark, warehouse, parallelism)
            assert record.counts["tables_done"] == args.tables, record.details.get("summary")
            results[label] = seconds
            print(
                f"({label}) parallelism {parallelism}: {args.tables} tables in {seconds:.1f} s "
                f"= {args.tables / seconds:.2f} tables/s"
            )
        print(f"a/b = {results['a'] / results['b']:.2f} (speed-up of {args.parallelism} tables at a time)")
    spark.stop()


if __name__ == "__main__":
    main()
