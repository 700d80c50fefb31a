"""cProfile of the partition jobs' executor functions on one representative manifest (no Spark).

    .venv/bin/python scripts/profile_partition_scan.py --entries 20000

Builds one manifest of `--entries` entries over 100 partitions (the benchmark table's shape), then
runs what a drop-partition task does with it, half of the partitions wanted: the scan task
(`scan_manifests_task`: read, decode, route by partition) and the merge task
(`merge_partitions_task`: cancel, summarise, write the DELETE manifest), each under cProfile, and
prints entries per CPU-second next to the 1-minute load.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from jobs.partitions.scan_tasks import ManifestTarget, merge_partitions_task, scan_manifests_task  # noqa: E402
from paimon_format.model.binary_row import deserialize_row  # noqa: E402
from paimon_format.scan.snapshot_scan import data_manifests  # noqa: E402
from scripts.bench_compact_manifests import build  # noqa: E402
from scripts.bench_spark_startup import load  # noqa: E402


def wanted_half(partition: bytes, types: list) -> bool:
    return deserialize_row(partition, types)[0] >= "2024-01-050"


def profiled(name: str, entries: int, run: functools.partial) -> object:
    run()  # warm: imports, codec
    start = time.process_time()
    result = run()
    took = time.process_time() - start
    print(
        f"== {name}: {entries:,} entries in {took * 1000:.0f} CPU-ms = "
        f"{entries / took:,.0f} entries/CPU-s ({load()})"
    )
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(8)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    args = parser.parse_args()
    root = str(Path(tempfile.mkdtemp(prefix="profile-partitions-")) / "db.db" / "t")
    table = build(root, 1, args.entries)
    meta = data_manifests(table, table.snapshot_manager.latest())[0]
    names = pa.record_batch(
        [pa.array([0], pa.int64()), pa.array([meta.file_name]), pa.array([meta.file_size], pa.int64())],
        names=["idx", "name", "size"],
    )
    wanted = functools.partial(wanted_half, types=table.partition_types)
    scanned = profiled(
        "scan task (read once, route by partition)",
        args.entries,
        lambda: list(scan_manifests_task([names], table, wanted)),
    )
    arranged = pa.Table.from_batches(scanned).sort_by([("partition", "ascending"), ("ord", "ascending")])
    batches = arranged.to_batches()
    target = ManifestTarget.of(table)
    profiled(
        "merge task (cancel, summarise, write the DELETE manifest) for the wanted half",
        args.entries // 2,
        lambda: list(merge_partitions_task(batches, table, "profile", target, None)),
    )


if __name__ == "__main__":
    main()
