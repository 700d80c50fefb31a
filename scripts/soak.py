"""Soak a live table: Paimon's Java writer commits while our maintenance runs, and nothing is lost.

    .venv/bin/python scripts/soak.py --minutes 10 [--warehouse DIR] [--seed 7] [--tables events,dedup]
                                     [--checkpoint-seconds 60]

Tables (scripts/soak/ledger.py): an append table partitioned by day, and primary-key tables
(deduplicate with fixed buckets, partial-update, dynamic bucket, deletion vectors with
`changelog-producer: lookup`). Java's writer (its own JVM, Paimon's own write and commit path, its
compaction, a Java tag every 5 commits, Java's own snapshot expiry) commits batches to each in turn;
a ledger keeps every row. Our `maintain` with every block and drop-partition of old days run beside
it, in this process (as `python -m jobs` would, on one SparkSession). Checkpoints hold the writer and
compare Java's reads of the latest snapshot and every tag with the ledger, check that every file any
root names exists and that orphans left are younger than remove-orphan-files' cutoff; a thread
watches that snapshot ids are never skipped or overwritten. See docs/safety.md, "Live tables".

Prints commits by Java, our runs by operation, exit-3 conflicts, what was checked, and the losses.
Exit code 1 when anything was lost, doubled, missing, or a writer or job failed. Logs: soak.log in
the work directory (the warehouse's parent unless --warehouse is given, then kept for inspection).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

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
    args = parser.parse_args(argv)

    from scripts.chaos import quiet
    from scripts.soak.ledger import SPECS
    from scripts.soak.run import SoakOptions, report, soak, start_java

    tables = tuple(t for t in args.tables.split(",") if t) or tuple(SPECS)
    unknown = [t for t in tables if t not in SPECS]
    if unknown:
        parser.error(f"unknown tables {unknown}; choose from {sorted(SPECS)}")
    workdir = tempfile.mkdtemp(prefix="paimon-soak-")
    warehouse = os.path.abspath(args.warehouse) if args.warehouse else os.path.join(workdir, "warehouse")
    if os.path.exists(os.path.join(warehouse, "soak.db")):
        parser.error(f"{warehouse}/soak.db exists: give an empty or new --warehouse")
    options = SoakOptions(args.minutes, warehouse, args.seed, tables, args.checkpoint_seconds)
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
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
