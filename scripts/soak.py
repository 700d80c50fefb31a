"""Soak a live table: Paimon's Java writer commits while our maintenance runs, and nothing is lost.

    .venv/bin/python scripts/soak.py --minutes 10 [--warehouse DIR] [--seed 7] [--tables events,dedup]
                                     [--checkpoint-seconds 60] [--orphan-older-than-seconds 60]
                                     [--json RESULT.json] [--ledgers LEDGERS.pickle]

Tables (scripts/soak/ledger.py): an append table partitioned by day, and primary-key tables
(deduplicate with fixed buckets, partial-update, dynamic bucket, deletion vectors with
`changelog-producer: lookup`). Java's writer (its own JVM, Paimon's own write and commit path, its
compaction, a Java tag every 5 commits, Java's own snapshot expiry) commits batches to each in turn;
a ledger keeps every row. Our `maintain` with every block and drop-partition of old days run beside
it, in this process (as `python -m jobs` would, on one SparkSession). Checkpoints hold the writer and
compare Java's reads of the latest snapshot and every tag with the ledger, check that every file any
root names exists and that orphans left are younger than remove-orphan-files' cutoff; a thread
watches that snapshot ids are never skipped or overwritten. See docs/safety.md, "Live tables".

    .venv/bin/python scripts/soak.py --s3 --minutes 30 [--throttle 0.01] [--writers 2] [--seed 7]

With --s3 the tables live on moto's S3 server behind the throttling proxy (tests/s3/proxy.py, in a
process of its own, `--throttle` of the requests answered 503 SlowDown), and two writers of ours
(the write job, scripts/soak/our_writer.py) take the Java writer's place, since Java's S3 file
system is not in the test bundle; checkpoints read with our own reader (scripts/soak/s3_run.py).

Prints commits by Java (with --s3: by each writer of ours), our runs by operation, exit-3 conflicts,
what was checked and the losses; with --s3 also the store's requests and 503s.
Exit code 1 when anything was lost, doubled, missing, or a writer or job failed. Logs: soak.log in
the work directory (the warehouse's parent unless --warehouse is given, then kept for inspection).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("TZ", "UTC")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, required=True, help="how long Java's writer commits")
    parser.add_argument("--warehouse", default=None, help="where the tables go (kept); default: a temp dir")
    parser.add_argument("--seed", type=int, default=7, help="the rows and keys the writer picks")
    parser.add_argument("--tables", default="", help="comma-separated soak tables (default: all)")
    parser.add_argument("--checkpoint-seconds", type=float, default=60.0, help="seconds between checks")
    parser.add_argument(
        "--orphan-older-than-seconds", type=int, default=60, help="remove-orphan-files' older_than"
    )
    parser.add_argument("--json", default=None, help="also write the figures to this file, as JSON")
    parser.add_argument(
        "--ledgers", default=None, help="also pickle the ledgers (every row Java sent) to this file"
    )
    parser.add_argument("--s3", action="store_true", help="on moto's S3 behind the proxy, our writers")
    parser.add_argument("--throttle", type=float, default=0.01, help="--s3: share of requests answered 503")
    parser.add_argument("--writers", type=int, default=2, help="--s3: writers of ours at once")
    args = parser.parse_args(argv)
    if args.s3 and (args.warehouse or args.json or args.ledgers):
        parser.error("--warehouse, --json and --ledgers are for the local soak; the S3 soak's are in moto")

    from scripts.chaos import quiet
    from scripts.soak.ledger import SPECS
    from scripts.soak.run import SoakOptions, report, soak, start_java, summary

    tables = tuple(t for t in args.tables.split(",") if t) or tuple(SPECS)
    unknown = [t for t in tables if t not in SPECS]
    if unknown:
        parser.error(f"unknown tables {unknown}; choose from {sorted(SPECS)}")
    workdir = tempfile.mkdtemp(prefix="paimon-soak-")
    if args.s3:
        return s3_main(args, tables, workdir)
    warehouse = os.path.abspath(args.warehouse) if args.warehouse else os.path.join(workdir, "warehouse")
    if os.path.exists(os.path.join(warehouse, "soak.db")):
        parser.error(f"{warehouse}/soak.db exists: give an empty or new --warehouse")
    options = SoakOptions(
        args.minutes,
        warehouse,
        args.seed,
        tables,
        args.checkpoint_seconds,
        orphan_older_than_s=args.orphan_older_than_seconds,
    )
    out = os.fdopen(os.dup(1), "w", buffering=1)
    log_path = os.path.join(workdir, "soak.log")
    with quiet(log_path):
        from jobs.runtime.spark import get_or_create_spark

        spark = get_or_create_spark("soak", {"spark.master": "local[2]", "spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("OFF")
        java = start_java(workdir)
        try:
            result = soak(options, java, workdir)
        finally:
            java.close()
    report(result, out)
    out.write(f"logs: {log_path}\n")
    if args.ledgers:  # before the JSON: a reader that waits for the JSON finds both
        with open(args.ledgers, "wb") as f:
            pickle.dump(result.ledgers, f)
    if args.json:
        with open(args.json + ".part", "w") as f:
            json.dump(summary(result), f, indent=1)
        os.replace(args.json + ".part", args.json)
    return 1 if result.failed else 0


def s3_main(args: argparse.Namespace, tables: tuple[str, ...], workdir: str) -> int:
    """The S3 soak: moto and the proxy in a process of their own (scripts/s3bench/store.py), the
    writers and our jobs in this one."""
    # after argument parsing, as in main(): --help and bad arguments load neither Spark nor moto
    from scripts.chaos import quiet
    from scripts.s3bench.store import AWS_ENV, Store
    from scripts.soak.s3_run import S3SoakOptions, report, s3_soak

    os.environ.update(AWS_ENV)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    log_path = os.path.join(workdir, "soak.log")
    store = Store.start(Path(workdir))
    try:
        empty = Path(workdir) / "empty"
        empty.mkdir()
        store.upload(empty, "soak", "wh")  # creates the bucket
        store.reset(latency_ms=0, throttle_ratio=args.throttle, seed=args.seed)
        options = S3SoakOptions(
            args.minutes,
            "s3://soak/wh",
            store.storage_options(),
            args.seed,
            tables,
            args.writers,
            args.checkpoint_seconds,
        )
        with quiet(log_path):
            from jobs.runtime.spark import get_or_create_spark  # Spark's output goes to the log

            spark = get_or_create_spark("soak", {"spark.master": "local[2]", "spark.ui.enabled": "false"})
            spark.sparkContext.setLogLevel("OFF")
            result = s3_soak(options, workdir, store.ledger)
    finally:
        store.stop()
    report(result, out)
    out.write(f"logs: {log_path}\n")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
