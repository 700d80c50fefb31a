"""expire-tags benchmark: tags/s, files deleted/s, and the driver's memory peak per table size.

    .venv/bin/python scripts/bench_expire_tags.py --tags 500 --files 20000,200000 --expire 400

For each size builds a metadata-consistent table (as `bench_expire.py`: empty data files, every
snapshot rewriting the previous one's files), tags every snapshot with a daily automatic tag name
(2023-01-01, 2023-01-02, ...), then removes all snapshot files but the newest 10 (as an expiry that
the tags outlive would), so the tags alone hold most files. expire-tags with `num_retained_max =
tags - expire` then deletes the oldest `expire` tags and every file only they used.

Records wall time, tags/s, data files deleted/s and the driver's Python heap peak (tracemalloc
around the job call; executors are separate Python workers). Goal: the peak does not grow with the
number of files.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.expire_tags import ExpireTagsRequest, expire_tags  # noqa: E402
from jobs.runtime.spark import get_or_create_spark  # noqa: E402
from paimon_format.table import Table  # noqa: E402
from scripts.bench_expire import build  # noqa: E402

KEEP_SNAPSHOTS = 10
FIRST_DAY = dt.date(2023, 1, 1)


def build_tagged(root: str, tags: int, files: int) -> Table:
    table = build(root, tags, files)
    manager = table.snapshot_manager
    for snapshot_id in range(1, tags + 1):
        name = (FIRST_DAY + dt.timedelta(days=snapshot_id - 1)).isoformat()
        table.tag_manager.create_tag(name, manager.snapshot(snapshot_id))
    for snapshot_id in range(1, tags - KEEP_SNAPSHOTS + 1):
        os.remove(manager.snapshot_path(snapshot_id))
    manager.write_earliest_hint(tags - KEEP_SNAPSHOTS + 1)
    return table


def run_size(spark, tags: int, files: int, expire: int) -> dict[str, float]:
    root = str(Path(tempfile.mkdtemp(prefix="bench-expire-tags-")) / "db.db" / "t")
    start = time.perf_counter()
    table = build_tagged(root, tags, files)
    print(f"[{files:,}] built {tags:,} tagged snapshots in {time.perf_counter() - start:.1f} s", flush=True)
    tracemalloc.start()
    start = time.perf_counter()
    record = expire_tags(spark, table, ExpireTagsRequest(num_retained_max=tags - expire))
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    expired = record.counts["tags_deleted"]
    deleted = record.counts["files_deleted"]
    assert expired == expire and len(table.tag_manager.tag_names()) == tags - expire
    print(
        f"[{files:,}] expired {expired:,} tags, deleted {deleted:,} data files, "
        f"{record.counts.get('manifests_deleted', 0):,} manifests, "
        f"{record.counts.get('manifest_lists_deleted', 0):,} lists in {elapsed:.1f} s: "
        f"{expired / elapsed:,.1f} tags/s, {deleted / elapsed:,.0f} files deleted/s; "
        f"driver Python heap peak {peak / 2**20:.1f} MiB",
        flush=True,
    )
    return {"files": deleted, "seconds": elapsed, "tags": expired, "peak_mib": peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", type=int, default=500)
    parser.add_argument("--files", default="20000,200000", help="comma-separated data-file counts")
    parser.add_argument("--expire", type=int, default=400, help="tags to expire (the oldest)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = get_or_create_spark("bench-expire-tags", {"spark.driver.memory": "2g"})
    warm = build_tagged(
        str(Path(tempfile.mkdtemp(prefix="bench-expire-tags-warmup-")) / "db.db" / "t"), 20, 200
    )
    expire_tags(spark, warm, ExpireTagsRequest(num_retained_max=10), dry_run=True)
    print(f"load average before: {os.getloadavg()}", flush=True)
    results = [run_size(spark, args.tags, int(size), args.expire) for size in args.files.split(",")]
    print(f"load average after: {os.getloadavg()}")
    for result in results:
        seconds = result["seconds"]
        print(
            f"{result['files']:>9,} files deleted: {result['tags'] / seconds:,.1f} tags/s, "
            f"{result['files'] / seconds:,.0f} files/s, driver peak {result['peak_mib']:.1f} MiB"
        )


if __name__ == "__main__":
    main()
