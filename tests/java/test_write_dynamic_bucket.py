"""The write job on dynamic-bucket primary-key tables (bucket -1), proven with Paimon's Java: on the
Java-written `pk_dynamic` fixture and on a table our job creates. Java reads each key once after our
write, and after Java's own writer (its HashBucketAssigner) wrote on top of our HASH index."""

from __future__ import annotations

import os
from collections import defaultdict

import pyarrow.parquet as pq
import pytest

from tests.java.helpers import assert_reads_kept, run_job
from tests.java.oracle import Row, sort_key
from tests.java.tables import JavaTable

pytestmark = pytest.mark.java

TARGET_ROW_NUM = 4  # the fixture's dynamic-bucket.target-row-num


def _merged(before: list[Row], ours: list[Row]) -> list[Row]:
    """Deduplicate: the last row of each key (k, p) wins."""
    rows = {(row["k"], row["p"]): row for row in before}
    rows.update({(row["k"], row["p"]): row for row in ours})
    return sorted(rows.values(), key=sort_key)


def _source(spark, tmp_path, rows: list[Row], name: str) -> dict:
    path = str(tmp_path / name)
    frame = spark.createDataFrame([(r["k"], r["p"], r["v"]) for r in rows], "k long, p string, v string")
    frame.coalesce(1).write.mode("overwrite").parquet(path)  # one file keeps the order
    return {"path": path}


def _hash_index_by_bucket(path: str) -> dict[tuple[bytes, int], set[int]]:
    """(partition, bucket) -> the hashes of its HASH index file, in the latest snapshot."""
    from paimon_format.index.hash_index import HASH_INDEX, read_hash_index
    from paimon_format.scan.snapshot_scan import index_entries

    table = _table(path)
    latest = table.snapshot_manager.latest()
    result: dict[tuple[bytes, int], set[int]] = {}
    for entry in index_entries(table, latest):
        if entry.index_type == HASH_INDEX:
            key = (bytes(entry.partition), entry.bucket)
            assert key not in result, f"two HASH index files for {key}"
            hashes = read_hash_index(table, entry)
            assert len(set(hashes.tolist())) == len(hashes) == entry.row_count
            result[key] = set(hashes.tolist())
    return result


def _index_entries(path: str) -> list:
    from paimon_format.scan.snapshot_scan import index_entries

    table = _table(path)
    return index_entries(table, table.snapshot_manager.latest())


def _table(path: str):
    from paimon_format.storage.fileio import FileIO
    from paimon_format.table import Table

    return Table(FileIO.for_path(path), path)


def _live_key_hashes(path: str) -> dict[tuple[bytes, int], set[int]]:
    """(partition, bucket) -> the key hashes of the keys in its live data files (latest snapshot)."""
    from paimon_format.data.bucket import hash_array
    from paimon_format.model.types import BIGINT
    from paimon_format.scan.snapshot_scan import live_entries

    table = _table(path)
    result: dict[tuple[bytes, int], set[int]] = defaultdict(set)
    for entry in live_entries(table, table.snapshot_manager.latest()):
        relative = f"{table.bucket_relpath(entry.partition, entry.bucket)}/{entry.file.file_name}"
        keys = pq.ParquetFile(table.full_path(relative)).read(columns=["_KEY_k"]).column("_KEY_k")
        result[(bytes(entry.partition), entry.bucket)].update(hash_array([keys], [BIGINT()]).tolist())
    return dict(result)


def _assert_index_matches_live_keys(path: str) -> None:
    """Every bucket's HASH file holds exactly the hashes of its keys (no deletes were written), and no
    bucket took more keys than the target row number."""
    index = _hash_index_by_bucket(path)
    assert index == _live_key_hashes(path)
    assert all(len(hashes) <= TARGET_ROW_NUM for hashes in index.values()), index


def test_write_job_on_java_dynamic_bucket_table(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path
):
    table: JavaTable = java_templates[1]["pk_dynamic"]
    path = table.path(java_warehouse)
    latest = max(int(ref[1]) for ref in table.reads if ref[0] == "snapshot")
    before = table.reads[("snapshot", str(latest))]
    _assert_index_matches_live_keys(path)  # Java's own index, read by our reader
    buckets_before = {key[1] for key in _hash_index_by_bucket(path)}

    ours = [
        {"k": 4, "p": "a", "v": "ours"},  # existing keys: they stay in their buckets
        {"k": 5, "p": "b", "v": "ours"},
        *({"k": k, "p": "a", "v": "new"} for k in range(20, 30, 2)),  # 5 new keys: a full bucket 0
        {"k": 1, "p": "c", "v": "new-partition"},
        {"k": 1, "p": "c", "v": "new-partition-last"},  # twice in one write: the last wins
    ]
    config = {"warehouse": java_warehouse, "table": table.identifier}
    code, record = run_job(
        tmp_path / "job", "write", {**config, "source": _source(spark_session, tmp_path, ours, "a")}
    )
    assert code == 0, record.get("error")
    assert record["snapshot_ids"]["committed"] == latest + 1
    expected = _merged(before, ours)
    assert java_paimon.read(path) == expected
    assert_reads_kept(java_paimon, table, java_warehouse)
    _assert_index_matches_live_keys(path)
    assert {key[1] for key in _hash_index_by_bucket(path)} > buckets_before  # new buckets were opened

    # Java's writer assigns from our index: keys we wrote, keys it wrote before, a new one
    theirs = [
        {"k": k, "p": p, "v": "java"}
        for k, p in ((20, "a"), (5, "b"), (6, "a"), (7, "b"), (40, "a"), (1, "c"))
    ]
    java_paimon.write(path, theirs)
    assert java_paimon.read(path) == _merged(expected, theirs)
    _assert_index_matches_live_keys(path)


def test_write_job_creates_and_rewrites_a_dynamic_bucket_table(spark_session, java_paimon, tmp_path):
    """Our own bucket -1 table, written twice with overlapping keys (and an overwrite of one partition):
    Java and pypaimon read each key once; Java writes on top; expire-snapshots and
    remove-orphan-files keep every live HASH index file (compact on dynamic-bucket tables, which leaves
    the HASH index as it is: tests/interop/test_compact_java.py)."""
    from tests.support.pypaimon_reads import pypaimon_rows

    warehouse = str(tmp_path / "wh")
    path = os.path.join(warehouse, "db.db", "t")
    config = {
        "warehouse": warehouse,
        "table": "db.t",
        "create": {
            "partition_keys": ["p"],
            "primary_keys": ["k", "p"],
            "options": {"dynamic-bucket.target-row-num": str(TARGET_ROW_NUM)},
        },
    }
    first = [{"k": k, "p": "ab"[k % 2], "v": "one"} for k in range(10)]
    second = [{"k": k, "p": "abc"[k % 3], "v": "two"} for k in range(6, 16)]
    for name, rows in (("first", first), ("second", second)):
        code, record = run_job(
            tmp_path / name, "write", {**config, "source": _source(spark_session, tmp_path, rows, name)}
        )
        assert code == 0, record.get("error")
    expected = _merged(first, second)
    assert java_paimon.read(path) == expected
    assert sorted(pypaimon_rows(warehouse, "db.t"), key=sort_key) == expected
    _assert_index_matches_live_keys(path)

    # overwrite partition c: its keys and HASH files start afresh, other partitions keep theirs
    replacement = [{"k": 100, "p": "c", "v": "three"}]
    code, record = run_job(
        tmp_path / "overwrite",
        "write",
        {**config, "mode": "overwrite", "source": _source(spark_session, tmp_path, replacement, "third")},
    )
    assert code == 0, record.get("error")
    expected = sorted([r for r in expected if r["p"] != "c"] + replacement, key=sort_key)
    assert java_paimon.read(path) == expected
    _assert_index_matches_live_keys(path)

    theirs = [{"k": k, "p": p, "v": "java"} for k, p in ((6, "a"), (7, "b"), (100, "c"), (50, "c"))]
    java_paimon.write(path, theirs)
    expected = _merged(expected, theirs)
    assert java_paimon.read(path) == expected

    # expiry down to the latest snapshot deletes the HASH files our writes and Java's replaced, and
    # keeps the live ones; orphan cleaning then finds nothing of them to delete
    base = {"warehouse": warehouse, "table": "db.t"}
    for operation, extra in (
        ("expire-snapshots", {"retain_min": 1, "retain_max": 1, "older_than": "0s"}),
        ("remove-orphan-files", {"older_than": "0s", "force": True}),
    ):
        code, record = run_job(tmp_path / operation, operation, {**base, **extra})
        assert code == 0, (operation, record.get("error"))
    live_index = {entry.file_name for entry in _index_entries(path)}
    assert set(os.listdir(os.path.join(path, "index"))) == live_index
    assert java_paimon.read(path) == expected
    _assert_index_matches_live_keys(path)
