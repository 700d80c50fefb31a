"""maintain benchmark: many small tables, each run on Spark and in the driver process, side by side.

    .venv/bin/python scripts/bench_maintain.py --tables 200 --commits 8 --parallelism 4

Builds `--tables` small tables (each `--commits` commits of one data file, every third commit also
replacing an older file, snapshot.num-retained.max 3, one planted orphan, every file two days old),
then times `maintain` with the built-in default flow on every table: expire-snapshots,
compact-manifests (full) and remove-orphan-files, on fresh copies:

  (spark)  `local: never`: every job on Spark (the session is started and warmed beforehand, so
           its start-up is not counted against it);
  (driver) `local: auto`: small tables are planned and executed in the driver process.

Both runs must give the same results: the same snapshots left, the same files deleted, the same
counts per table; the script fails otherwise. Prints seconds, tables/s and the ratio, and the load
average (the machine may be shared). `--spark-tables N` times the Spark run on the first N tables
only (its tables/s is what is compared; the results are compared on those N tables).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.maintain import run  # noqa: E402
from jobs.runtime.config import validate  # noqa: E402
from jobs.runtime.maintain_config import MaintainConfig  # noqa: E402
from jobs.runtime.registry import JobContext  # noqa: E402
from jobs.runtime.report import RunRecord  # noqa: E402
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from paimon_format.commit import SnapshotCommit  # noqa: E402
from tests.support.factories import data_file, make_table, message  # noqa: E402

TABLE_OPTIONS = {
    "manifest.merge-min-count": "1000",
    "manifest.full-compaction-threshold-size": "1 gb",
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "3",
}
TWO_DAYS_S = 2 * 86_400


def build(warehouse: str, tables: int, commits: int) -> None:
    """Small tables with real (tiny) data files, expirable snapshots and one orphan each."""
    for t in range(tables):
        table = make_table(f"{warehouse}/bench.db/t{t:03d}", options=TABLE_OPTIONS)
        committer = SnapshotCommit(table)
        added = []
        for i in range(commits):
            partition = [f"p{i % 3}"]
            new = data_file(f"data-{uuid.uuid4()}-{i}.parquet")
            replaced = [added[i - 3][1]] if i >= 3 and i % 3 == 0 else []
            change = message(table, partition, new, deleted=replaced)
            path = Path(table.full_path(table.data_file_relpaths(change.partition, 0, new)[0]))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x" * new.file_size)
            committer.append([change])  # with a replaced file: an OVERWRITE commit
            added.append((partition, new))
        orphan = Path(table.path) / "dt=p0" / "bucket-0" / f"data-{uuid.uuid4()}-0.parquet"
        orphan.write_bytes(b"orphan")
    then = time.time() - TWO_DAYS_S
    for directory, _dirs, files in os.walk(warehouse):
        for name in files:
            os.utime(os.path.join(directory, name), (then, then))


def files_of(warehouse: str) -> set[str]:
    return {
        os.path.relpath(os.path.join(directory, name), warehouse)
        for directory, _dirs, files in os.walk(warehouse)
        for name in files
        if "_maintenance" not in directory
    }


def timed_run(
    spark, warehouse: str, parallelism: int, local: str, tables: list[str]
) -> tuple[float, RunRecord]:
    config = validate(
        {
            "warehouse": warehouse,
            "tables": tables,
            "parallelism": parallelism,
            "local": local,
            "defaults": {
                "expire_snapshots": {},
                "compact_manifests": {"mode": "full"},
                "remove_orphan_files": {},
            },
        },
        MaintainConfig,
        "bench",
    )
    record = RunRecord("maintain")
    context = JobContext(
        "maintain", config, False, record, logging.getLogger("bench"), spark_provider=lambda: spark
    )
    started = time.perf_counter()
    run(context, config)
    return time.perf_counter() - started, record


def outcome_of(record: RunRecord, table: str) -> dict:
    found = record.details["tables"][table]
    return {key: found[key] for key in ("status", "snapshots_expired", "files_removed", "bytes_removed")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--commits", type=int, default=8)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--spark-tables", type=int, default=None, help="time Spark on the first N tables")
    args = parser.parse_args()
    spark_tables = min(args.spark_tables or args.tables, args.tables)
    print(f"load average before: {os.getloadavg()}")
    spark = get_or_create_spark("bench maintain")
    names = [f"bench.t{t:03d}" for t in range(args.tables)]
    with tempfile.TemporaryDirectory() as directory:
        template = f"{directory}/template"
        build(template, args.tables, args.commits)
        before = files_of(template)
        shutil.copytree(template, f"{directory}/warmup")
        timed_run(spark, f"{directory}/warmup", args.parallelism, "never", names[:4])  # JVM, workers warm
        results = {}
        for label, local, chosen in (("spark", "never", names[:spark_tables]), ("driver", "auto", names)):
            warehouse = f"{directory}/{label}"
            shutil.copytree(template, warehouse)
            seconds, record = timed_run(spark, warehouse, args.parallelism, local, chosen)
            assert record.counts["tables_done"] == len(chosen), record.details.get("summary")
            engines = {
                op["details"].get("executed_in")
                for table in record.details["tables"].values()
                for op in table["operations"]
            }
            results[label] = (seconds, len(chosen) / seconds, record, warehouse, engines)
            print(
                f"({label}) local: {local}: {len(chosen)} tables in {seconds:.1f} s "
                f"= {len(chosen) / seconds:.2f} tables/s (jobs executed in: {', '.join(sorted(engines))})"
            )
        spark_record, driver_record = results["spark"][2], results["driver"][2]
        compared = names[:spark_tables]
        for name in compared:
            assert outcome_of(spark_record, name) == outcome_of(driver_record, name), name
        prefixes = tuple(f"bench.db/t{int(name[len('bench.t') :]):03d}/" for name in compared)
        deleted = {
            label: {p for p in before - files_of(results[label][3]) if p.startswith(prefixes)}
            for label in ("spark", "driver")
        }
        assert deleted["spark"] == deleted["driver"], "the two runs deleted different files"
        print(
            f"identical results on {len(compared)} tables: {len(deleted['spark'])} files deleted by each, "
            f"{sum(outcome_of(spark_record, n)['snapshots_expired'] for n in compared)} snapshots expired"
        )
        print(
            f"tables/s: spark {results['spark'][1]:.2f} | driver {results['driver'][1]:.2f} | "
            f"driver/spark = {results['driver'][1] / results['spark'][1]:.1f}x"
        )
    print(f"load average after: {os.getloadavg()}")
    stop_session(spark)


if __name__ == "__main__":
    main()
