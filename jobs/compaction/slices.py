"""Slices of a compaction: which buckets one run takes, so a huge table is compacted run by run.

Two knobs bound a run (issue #29):

* `buckets` ranges (`'0-3,7'`, as the `buckets` argument of Paimon's compact procedure): only the
  live files of those bucket ids are planned, in every selected partition;
* `max_bytes_per_run`: the planned buckets are put in `job_order` (most bytes, most files = the
  most fragmented, or oldest partitions first, as Iceberg's `rewrite-job-order` does) and taken
  while their input bytes fit; the first is always taken, so one bucket larger than the bound is
  still compacted, alone.

A bucket is never split: its bins are taken together or not at all (a bucket's deletion vectors
leave the index with its rewrite, see `jobs.compaction.groups`). What a run leaves is still
uncompacted at the next run and planned again, so the next run continues where this one stopped,
without any state kept between runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.compaction.plan import BinSummary
from jobs.runtime.errors import BadInputError
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import Column

JOB_ORDERS = ("files-desc", "bytes-desc", "partition-asc", "none")
BucketRanges = tuple[tuple[int, int], ...]
_RANGE = re.compile(r"^(\d+)(?:\s*-\s*(\d+))?$")


def parse_bucket_ranges(text: str) -> BucketRanges:
    """`'0-3,7'` -> ((0, 3), (7, 7)); ValueError naming the bad part (bucket ids are >= 0)."""
    ranges = []
    for part in str(text).split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"{part.strip()!r} is not a bucket id or a range such as 0-3 (e.g. '0-3,7')")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(f"range {part.strip()!r} ends before it starts")
        ranges.append((low, high))
    return tuple(sorted(ranges))


def check_bucket_ranges(ranges: BucketRanges, bucket_count: int, where: str) -> None:
    """On a fixed-bucket table, a range that starts at or beyond the bucket count names no bucket:
    a typo (exit 2), not an empty run."""
    if bucket_count <= 0:
        return  # dynamic or unaware buckets: any id may exist
    beyond = [f"{low}-{high}" if low != high else str(low) for low, high in ranges if low >= bucket_count]
    if beyond:
        raise BadInputError(
            f"{where}: buckets {', '.join(beyond)} do not exist (the table has {bucket_count} buckets, "
            f"0-{bucket_count - 1})"
        )


def bucket_condition(ranges: BucketRanges) -> Column:
    """A Spark condition on the `bucket` column: inside one of the ranges."""
    from pyspark.sql import functions as F  # pyspark: loaded when the job runs, not on import (--help)

    condition = None
    for low, high in ranges:
        test = F.col("bucket").between(low, high)
        condition = test if condition is None else condition | test
    return condition


@dataclass(frozen=True)
class Slice:
    """The bins one run takes (in job order, each bucket's bins together) and what it leaves."""

    summaries: list[BinSummary]
    buckets_left: int = 0
    bytes_left: int = 0


def order_and_cut(
    table: Table, summaries: Sequence[BinSummary], job_order: str, max_bytes: int | None
) -> Slice:
    """The planned bins in `job_order` (by partition: the partition's totals decide; its buckets by
    id), cut after the buckets whose input bytes fit into `max_bytes` (None: no bound)."""
    buckets: dict[tuple[bytes, int], list[BinSummary]] = {}
    for summary in summaries:
        buckets.setdefault((summary.partition, summary.bucket), []).append(summary)
    totals: dict[bytes, list[int]] = {}
    for (partition, _bucket), bins in buckets.items():
        files_bytes = totals.setdefault(partition, [0, 0])
        files_bytes[0] += sum(s.files for s in bins)
        files_bytes[1] += sum(s.bytes for s in bins)
    partitions = sorted(totals, key=_partition_key(table, job_order, totals))
    rank = {partition: index for index, partition in enumerate(partitions)}
    ordered = sorted(buckets, key=lambda key: (rank[key[0]], key[1]))
    chosen: list[BinSummary] = []
    taken = 0
    for index, key in enumerate(ordered):
        size = sum(s.bytes for s in buckets[key])
        if max_bytes is not None and chosen and taken + size > max_bytes:
            rest = ordered[index:]
            left = sum(s.bytes for k in rest for s in buckets[k])
            return Slice(chosen, buckets_left=len(rest), bytes_left=left)
        chosen.extend(sorted(buckets[key], key=lambda s: s.bin))
        taken += size
    return Slice(chosen)


def _partition_key(table: Table, job_order: str, totals: dict[bytes, list[int]]) -> Any:
    """The sort key of a partition for `job_order` (ties and `none`: the serialized partition)."""
    if job_order == "files-desc":
        return lambda partition: (-totals[partition][0], partition)
    if job_order == "bytes-desc":
        return lambda partition: (-totals[partition][1], partition)
    if job_order == "partition-asc":
        return lambda partition: (_comparable(table.partition_values(partition)), partition)
    return lambda partition: partition


def _comparable(values: Sequence[Any]) -> tuple[tuple[bool, Any], ...]:
    """Partition values as a sortable key: nulls (the default partition) last."""
    return tuple((value is None, value if value is not None else 0) for value in values)
