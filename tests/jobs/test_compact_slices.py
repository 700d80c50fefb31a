"""Commit groups and run slices of the compact job, without Spark: how the planned bins are cut into
commits (a bucket never split) and which buckets a bounded run takes (issue #29)."""

from __future__ import annotations

import pytest

from jobs.compact import CompactConfig, compact_request
from jobs.compaction.groups import plan_groups
from jobs.compaction.plan import BinSummary
from jobs.compaction.slices import check_bucket_ranges, order_and_cut, parse_bucket_ranges
from jobs.runtime.errors import BadInputError
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.type_parsing import parse_type


class _Table:
    """What the slicing reads of a table: its partition values (one STRING key)."""

    path = "/wh/db.db/t"

    def partition_values(self, partition: bytes) -> list[object]:
        return [PARTITIONS[partition]]


_STRING = parse_type("STRING")
PARTITIONS = {serialize_row([day], [_STRING]): day for day in ("2024-01-01", "2024-01-02", "2024-01-03")}
P1, P2, P3 = sorted(PARTITIONS, key=PARTITIONS.get)


def summary(partition: bytes, bucket: int, bin_: int, files: int, size: int) -> BinSummary:
    return BinSummary(partition, bucket, bin_, files, size, files * 10, files)


def test_bucket_ranges_parse_and_name_what_is_wrong():
    assert parse_bucket_ranges("0-3,7") == ((0, 3), (7, 7))
    assert parse_bucket_ranges(" 7 , 2 - 4 ") == ((2, 4), (7, 7))
    for text, words in (("3-1", "ends before it starts"), ("a", "'a' is not"), ("1,,2", "'' is not")):
        with pytest.raises(ValueError, match=words):
            parse_bucket_ranges(text)
    with pytest.raises(BadInputError, match="buckets 4-9 do not exist .*4 buckets"):
        check_bucket_ranges(((0, 1), (4, 9)), 4, "t")
    check_bucket_ranges(((0, 1), (3, 9)), 4, "t")  # overlapping the buckets: the rest is empty
    check_bucket_ranges(((100, 200),), -1, "t")  # dynamic bucket: any id may exist


def test_config_keys_become_the_request():
    config = CompactConfig(
        warehouse="/wh", table="db.t", buckets="0-3,7", max_bytes_per_run="1 gb", max_commit_bytes="2 mb"
    )
    request = compact_request(config)
    assert request.bucket_ranges == ((0, 3), (7, 7)) and request.max_bytes_per_run == 1024**3
    assert request.max_commit_bytes == 2 * 1024**2 and request.partial_progress
    assert compact_request(CompactConfig(warehouse="/wh", table="db.t", buckets=3)).bucket_ranges == ((3, 3),)
    for bad in ({"buckets": "x"}, {"max_bytes_per_run": "lots"}, {"max_commit_bins": 0}, {"job_order": "up"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            CompactConfig(warehouse="/wh", table="db.t", **bad)


def test_groups_keep_a_bucket_whole_and_respect_both_caps():
    bins = [
        summary(P1, 0, 0, 3, 100),
        summary(P1, 0, 1, 3, 100),
        summary(P1, 1, 0, 3, 100),
        summary(P2, 0, 0, 3, 500),  # alone over the byte cap: a group of its own
        summary(P3, 0, 0, 3, 50),
        summary(P3, 1, 0, 3, 50),
    ]
    groups = plan_groups(bins, True, max_bins=2, max_bytes=300)
    assert [[(s.partition, s.bucket, s.bin) for s in g.summaries] for g in groups] == [
        [(P1, 0, 0), (P1, 0, 1)],
        [(P1, 1, 0)],
        [(P2, 0, 0)],
        [(P3, 0, 0), (P3, 1, 0)],
    ]
    assert [g.index for g in groups] == [1, 2, 3, 4] and groups[3].bytes == 100 and groups[3].files == 6
    three_bins_one_bucket = [summary(P1, 0, i, 1, 1) for i in range(3)]
    assert len(plan_groups(three_bins_one_bucket, True, max_bins=1, max_bytes=300)) == 1
    assert [len(g.summaries) for g in plan_groups(bins, False, max_bins=1, max_bytes=1)] == [6]
    assert plan_groups([], True, 1, 1) == []


def test_a_bounded_run_takes_buckets_in_job_order_until_the_bytes_are_used():
    bins = [
        summary(P3, 0, 0, 9, 100),
        summary(P1, 0, 0, 2, 300),
        summary(P1, 1, 0, 2, 300),
        summary(P2, 0, 0, 5, 50),
    ]
    table = _Table()

    def order(job_order: str, max_bytes: int | None = None) -> list[tuple[bytes, int]]:
        cut = order_and_cut(table, bins, job_order, max_bytes)
        return [(s.partition, s.bucket) for s in cut.summaries]

    assert order("files-desc") == [(P3, 0), (P2, 0), (P1, 0), (P1, 1)]
    assert order("bytes-desc") == [(P1, 0), (P1, 1), (P3, 0), (P2, 0)]
    assert order("partition-asc") == [(P1, 0), (P1, 1), (P2, 0), (P3, 0)]
    assert order("partition-asc", 600) == [(P1, 0), (P1, 1)]
    cut = order_and_cut(table, bins, "files-desc", 200)
    assert [(s.partition, s.bucket) for s in cut.summaries] == [(P3, 0), (P2, 0)]
    assert (cut.buckets_left, cut.bytes_left) == (2, 600)
    # the first bucket is taken even when it alone is over the bound, so a run always progresses
    assert order("bytes-desc", 10) == [(P1, 0)]
