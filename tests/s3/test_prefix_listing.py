"""Listing a table on S3 by flat key ranges (jobs/deletion/prefix_listing.py), on moto behind the proxy.

The planted table has many partition and bucket directories, names that sort next to the range cuts
("dt=2024-01-03-x/" sorts before "dt=2024-01-03/"), a non-ASCII partition, a second partition level,
directory markers, foreign and temp files. Its objects are put straight into moto (not through the
proxy), so the proxy's ledger holds only what a listing asks.
"""

from __future__ import annotations

import math
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jobs.deletion.listing import list_in_waves, list_table_files
from jobs.deletion.prefix_listing import (
    key_ranges,
    list_by_key_ranges,
    list_range,
    lists_by_key_ranges,
    range_budget,
)
from jobs.runtime.local_frame import LocalSession
from paimon_format.errors import MissingFileError, StorageError
from paimon_format.maintenance.orphan_rules import FileNaming, judge_file
from paimon_format.storage.faults import FaultPlan, FaultyFileIO
from paimon_format.storage.fileio import FileIO
from tests.support.cli_runs import run_job
from tests.support.table_states import IDENTIFIER, build_sample_table, listed_files

NAMING = FileNaming()
PARTITIONS = [f"dt=2024-01-{day:02d}" for day in range(1, 41)] + [
    "dt=2024-01-03-x",  # sorts between dt=2024-01-02/ and dt=2024-01-03/ as a key
    "dt=2024-01-03.5",
    "dt=été",
    "region=eu/dt=2024-02-01",
]
MARKERS = ["dt=2024-01-05/", "dt=2024-01-05/bucket-1/", "manifest/", "notes/"]


def planted_keys() -> list[str]:
    """Relative keys of a table with 44 partitions x 4 buckets, its metadata, and what else lands there."""
    keys = [
        f"{partition}/bucket-{bucket}/data-{uuid.uuid4()}-{i}.parquet"
        for partition in PARTITIONS
        for bucket in range(4)
        for i in range(7)
    ]
    keys += [f"manifest/manifest-{uuid.uuid4()}-0" for _ in range(120)]
    keys += [f"manifest/manifest-list-{uuid.uuid4()}-0" for _ in range(10)]
    keys += [f"snapshot/snapshot-{i}" for i in range(1, 11)] + ["snapshot/LATEST", "snapshot/EARLIEST"]
    keys += [
        "schema/schema-0",
        "tag/tag-t1",
        "branch/branch-b/snapshot/snapshot-1",
        f"index/index-{uuid.uuid4()}-0",
    ]
    keys += [
        f"snapshot/.snapshot-11.{uuid.uuid4()}.tmp",
        f"dt=2024-01-01/bucket-0/.data-x.{uuid.uuid4()}.tmp",
    ]
    keys += ["README.txt", "dt=2024-01-02/_SUCCESS", "notes/today.txt", "dt=2024-01-04/bucket-9/notes.md"]
    return keys


@pytest.fixture(scope="module")
def planted(moto_s3, s3_proxy) -> tuple[str, dict[str, Any], list[str]]:
    """(table root, storage options through the proxy, the relative keys of its files), put once."""
    import boto3

    endpoint_url, bucket, _ = moto_s3
    prefix = f"prefix-listing-{uuid.uuid4().hex[:8]}/db.db/t"
    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1")
    files = planted_keys()

    def put(key: str) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=b"x" * (len(key) % 17))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files + MARKERS))
    options = {"endpoint_url": s3_proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    return f"s3://{bucket}/{prefix}", options, files


def rows_of(listing_files: Any) -> set[tuple]:
    return {(r["path"], r["size"], r["rule"], r["kind"]) for r in listing_files.collect()}


def expected_rows(files: list[str]) -> set[tuple]:
    return {(key, len(key) % 17, judge_file(key, NAMING).rule, judge_file(key, NAMING).kind) for key in files}


def list_requests(proxy: Any) -> int:
    return proxy.count("GET", "list-type=2")


def holders(key: str, ranges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(start, stop) for start, stop in ranges if start < key < stop]


def test_key_ranges_cover_each_directory_once_in_key_order() -> None:
    """Runs of directories in the order of their keys ("dt=1-x/" before "dt=1/"); small metadata
    directories join the run before them (or, first, the next one); root-level keys are in none."""
    ranges = key_ranges(["dt=1", "dt=1-x", "dt=1.5", "manifest", "schema", "snapshot", "tag", "branch"], 64)
    assert ranges == [
        ("branch/", "dt=1-x0"),
        ("dt=1.5/", "dt=1.50"),
        ("dt=1/", "dt=10"),
        ("manifest/", "tag0"),
    ]
    names = ["a", "a-b", "a.b", "a0", "a0b", "ab", "b", "é", "schema", "snapshot", "dt=2024-01-01"]
    for max_ranges in (64, 3, 1):
        ranges = key_ranges(names, max_ranges)
        assert len(ranges) == min(max_ranges, 9)  # schema/ and snapshot/ join the run of dt=.../
        assert all(start < stop for start, stop in ranges)
        assert all(stop <= start for (_, stop), (start, _) in zip(ranges, ranges[1:], strict=False))
        for name in names:
            for key in (f"{name}/f", f"{name}/x/y.parquet", f"{name}/\U0010ffff"):
                assert len(holders(key, ranges)) == 1, (max_ranges, key)
    for root_key in ("a", "a0", "README", "zzz"):  # in a range only when grouped: skipped there
        assert holders(root_key, key_ranges(names, 64)) == [], root_key


def test_key_ranges_group_many_directories_evenly() -> None:
    directories = [f"dt={day:04d}" for day in range(1000)]
    ranges = key_ranges(directories, 64)
    assert len(ranges) == 64 and ranges[0][0] == "dt=0000/" and ranges[-1][1] == "dt=09990"
    sizes = [sum(1 for name in directories if holders(f"{name}/f", [r])) for r in ranges]
    assert sum(sizes) == 1000 and max(sizes) - min(sizes) <= 1
    assert key_ranges([], 64) == [] and key_ranges(directories, 1) == [("dt=0000/", "dt=09990")]


def test_only_plain_s3_file_ios_list_by_key_ranges(tmp_path) -> None:
    s3 = FileIO.for_path("s3://bucket/t")
    assert lists_by_key_ranges(s3)
    assert not lists_by_key_ranges(FileIO.for_path(str(tmp_path)))
    faulty = FaultyFileIO.wrapping(s3, FaultPlan.parse("list:1"))
    assert not lists_by_key_ranges(faulty)  # its faults are injected in list_dir: waves go through it


def test_key_ranges_list_what_waves_list_with_fewer_requests(planted, s3_proxy) -> None:
    root, options, files = planted
    file_io = FileIO.for_path(root, options)
    s3_proxy.reset()
    by_ranges = list_by_key_ranges(LocalSession(), file_io, root, NAMING)
    range_lists = list_requests(s3_proxy)
    s3_proxy.reset()
    in_waves = list_in_waves(LocalSession(), file_io, root, NAMING)
    wave_lists = list_requests(s3_proxy)

    assert rows_of(by_ranges.files) == rows_of(in_waves.files) == expected_rows(files)
    objects = len(files) + len(MARKERS)
    assert objects > 1000  # the listing pages
    assert range_lists == by_ranges.pages + 1  # the ranges' pages and the root's one
    assert range_lists <= math.ceil(objects / 1000) + by_ranges.ranges + 1
    # a range per root directory (51), but branch/ runs with dt=2024-01-01/, and schema/, snapshot/
    # and tag/ with region=eu/
    assert by_ranges.ranges == 47
    assert wave_lists >= in_waves.directories > 200 and range_lists * 3 < wave_lists


def test_a_range_bigger_than_its_estimate_comes_a_page_at_a_time(planted, s3_proxy) -> None:
    """A table that holds far more than its snapshot says gets one huge range (expected_objects=1);
    it is handed on page by page, so a task never holds a whole range, and lists the same files."""
    root, options, files = planted
    file_io = FileIO.for_path(root, options)
    s3_proxy.reset()
    (whole,) = key_ranges(["a", "zzz"], 1)
    pages = list(list_range(file_io, root, NAMING, ("", whole[1])))
    assert len(pages) == list_requests(s3_proxy) >= 2
    assert all(batch is None or batch.num_rows <= 1000 for batch, _ in pages)
    assert sum(files_in_page for _, files_in_page in pages) == len(files) - 1  # README.txt is at the root
    s3_proxy.reset()
    one_range = list_by_key_ranges(LocalSession(), file_io, root, NAMING, expected_objects=1)
    assert one_range.ranges == 1 and rows_of(one_range.files) == expected_rows(files)


def test_key_ranges_on_spark_list_the_same_files(planted, s3_proxy, spark_session) -> None:
    root, options, files = planted
    file_io = FileIO.for_path(root, options)
    s3_proxy.reset()
    listing = list_table_files(spark_session, file_io, root, NAMING)
    assert listing.ranges > 1 and listing.directories == 1
    assert rows_of(listing.files) == expected_rows(files)
    assert list_requests(s3_proxy) == listing.pages + 1


def test_a_denied_range_fails_the_listing_naming_it(planted, s3_proxy) -> None:
    root, options, _ = planted
    denied = f"{root.split('/', 3)[3]}/dt=2024-01-20/"

    def deny(method: str, path: str, query: str) -> bool:
        return method == "GET" and f"start-after={denied}" in query

    s3_proxy.reset(deny=deny)
    with pytest.raises(StorageError, match="dt=2024-01-20") as raised:
        list_by_key_ranges(LocalSession(), FileIO.for_path(root, options), root, NAMING)
    assert s3_proxy.count(status=403) >= 1 and "AccessDenied" in str(raised.value)
    s3_proxy.reset()


def test_a_missing_table_root_is_an_error_not_an_empty_listing(planted, s3_proxy) -> None:
    root, options, _ = planted
    s3_proxy.reset()
    with pytest.raises(MissingFileError):
        list_by_key_ranges(LocalSession(), FileIO.for_path(root, options), f"{root}-gone", NAMING)


def test_remove_orphan_files_on_s3_lists_by_key_ranges_and_fails_when_a_range_is_denied(
    spark_session, s3, age_s3_objects, tmp_path, capsys
):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=2, storage_options=options)
    orphan = f"dt=2024-01-01/bucket-0/data-{uuid.uuid4()}-0.parquet"
    table.file_io.write_bytes(f"{table.path}/{orphan}", b"left behind")
    listed = listed_files(table)
    age_s3_objects([f"{table.path}/{path}" for path in listed], 2 * 86_400)
    # the table lock on local disk: the deletes counted below are the table's alone
    config = {
        "warehouse": warehouse,
        "table": IDENTIFIER,
        "storage_options": options,
        "lock": {"dir": str(tmp_path / "locks")},
    }

    proxy.reset()
    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys, "--dry-run")
    assert code == 0, record["error"]
    counts = record["counts"]
    assert counts["orphan_files"] == 1 and counts["directories_listed"] == 1
    # a table this small (far below PAGES_PER_RANGE pages) is one range of one page
    assert counts["listing_key_ranges"] == counts["listing_pages"] == 1

    denied = f"{table.path.removeprefix('s3://').split('/', 1)[1]}/dt=2024-01-01/"
    proxy.reset(deny=lambda method, path, query: method == "GET" and f"start-after={denied}" in query)
    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys)
    deletes = proxy.count("POST", "delete") + proxy.count("DELETE")
    proxy.reset()
    assert code == 1 and "dt=2024-01-01" in record["error"], record["error"]
    assert deletes == 0
    table.file_io.fs.invalidate_cache()
    assert listed_files(table) == listed


def test_ranges_hold_about_ten_pages_each_when_the_table_says_how_many_objects_it_has() -> None:
    assert range_budget(None, 2) == 64  # unknown: enough to keep the pools busy
    assert range_budget(None, 100) == 400
    assert range_budget(100_000, 2) == 10  # at most 10 extra requests for 100 pages
    assert range_budget(1_000_000, 100) == 100
    assert range_budget(1_000, 2) == 1
    assert range_budget(0, 2) == 1
