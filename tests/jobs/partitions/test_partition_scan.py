"""The partition jobs' executor functions without Spark: one read routes, merges, summarises, writes."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

from jobs.partitions.scan import _collect
from jobs.partitions.scan_tasks import (
    ManifestTarget,
    check_identities_task,
    merge_partitions_task,
    scan_and_drop_task,
    scan_manifests_task,
)
from paimon_format.commit import SnapshotCommit
from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import DELETE, ManifestEntry
from paimon_format.scan.snapshot_scan import data_manifests, live_entries
from tests.support.factories import data_file, make_table, message, partition_of


def _names(table):
    manifests = data_manifests(table, table.snapshot_manager.latest())
    return pa.record_batch(
        [
            pa.array(range(len(manifests)), pa.int64()),
            pa.array([m.file_name for m in manifests]),
            pa.array([m.file_size for m in manifests], pa.int64()),
        ],
        names=["idx", "name", "size"],
    )


def _scan_and_merge(table, wanted, target=None):
    scanned = pa.Table.from_batches(list(scan_manifests_task([_names(table)], table, wanted)))
    arranged = scanned.sort_by([("partition", "ascending"), ("ord", "ascending")])
    merged = list(merge_partitions_task(arranged.to_batches(), table, "test", target, None))
    return scanned, pa.Table.from_batches(merged).to_pylist() if merged else []


def test_wanted_partitions_are_merged_and_dropped_the_others_only_counted(tmp_path):
    table = make_table(str(tmp_path / "db.db" / "t"))
    committer = SnapshotCommit(table)
    for batch in range(2):
        committer.append(
            [message(table, [p], data_file(f"data-{batch}-{p}.parquet", rows=3, size=7)) for p in "abc"]
        )
    committer.append(
        [message(table, ["b"], data_file("data-new-b.parquet"), deleted=[data_file("data-0-b.parquet")])]
    )
    committer.append([message(table, ["c"], deleted=[data_file("data-0-c.parquet", rows=3, size=7)])])
    wanted = {partition_of(table, "b")}

    scanned, rows = _scan_and_merge(table, wanted.__contains__, ManifestTarget.of(table))

    shipped = {bytes(r["partition"]) for r in scanned.to_pylist() if r["payload"] is not None}
    assert shipped == wanted, "only the wanted partition's records travel"
    summaries = {table.partition_values(bytes(r["partition"]))[0]: r for r in rows if r["meta"] is None}
    assert {key: (r["files"], r["bytes"], r["rows"]) for key, r in summaries.items()} == {
        "a": (2, 14, 6),  # counted: two ADDs
        "b": (2, 107, 13),  # merged: data-1-b and data-new-b survive
        "c": (1, 7, 3),  # counted: two ADDs minus one DELETE
    }
    metas = [pickle.loads(r["meta"]) for r in rows if r["meta"] is not None]
    written = [e for m in metas for e in read_manifest(table.file_io, table.manifest_path(m.file_name))]
    live_b = {
        e.file.file_name
        for e in live_entries(table, table.snapshot_manager.latest())
        if e.partition in wanted
    }
    assert {e.file.file_name for e in written} == live_b == {"data-1-b.parquet", "data-new-b.parquet"}
    assert all(e.kind == DELETE for e in written)


def test_inconsistent_metadata_answers_an_error_and_writes_nothing(tmp_path):
    root = tmp_path / "db.db" / "t"
    table = make_table(str(root))
    committer = SnapshotCommit(table)
    committer.append([message(table, ["a"], data_file("data-twice.parquet"))])
    committer.append([message(table, ["a"], data_file("data-twice.parquet"))])  # added twice
    never_added = ManifestEntry(DELETE, partition_of(table, "z"), 0, -1, data_file("data-never.parquet"))
    committer.commit(lambda _ctx: [never_added], kind="APPEND", check_conflicts=False)
    manifests = {p.name for p in (root / "manifest").iterdir()}

    _scanned, wanted_rows = _scan_and_merge(
        table, {partition_of(table, "a")}.__contains__, ManifestTarget.of(table)
    )
    _scanned, counted_rows = _scan_and_merge(table, lambda _partition: False)

    assert [r["error"] for r in wanted_rows] == [
        "test: trying to add file data-twice.parquet (bucket 0, level 0) which is already added"
    ]
    assert [r["error"] for r in counted_rows] == ["test: partition dt=z deletes 1 more files than it adds"]
    assert {p.name for p in (root / "manifest").iterdir()} == manifests


def test_without_deletes_each_task_drops_what_it_reads_as_the_shuffle_would(tmp_path):
    """An append-only snapshot (no manifest counts a DELETE): `scan_and_drop_task` writes the wanted
    partitions' DELETEs in the scan itself; its summaries (added up per partition) and the files it
    deletes equal the shuffle path's, and a DELETE it meets anyway is refused."""
    table = make_table(str(tmp_path / "db.db" / "t"))
    committer = SnapshotCommit(table)
    for batch in range(3):
        committer.append(
            [
                message(table, [p], data_file(f"data-{batch}-{p}.parquet", rows=batch + 1, size=5))
                for p in "abc"
            ]
        )
    wanted = {partition_of(table, "a"), partition_of(table, "c")}
    names = _names(table)
    # two "tasks", each with part of the manifests
    batches = [names.slice(0, 1), names.slice(1)]
    outputs = [
        out
        for batch in batches
        for out in scan_and_drop_task([batch], table, wanted.__contains__, ManifestTarget.of(table))
    ]
    direct = [row for out in outputs for row in out.to_pylist()]

    class Collected:
        def __init__(self, rows):
            self.rows = rows

        def collect(self):
            return self.rows

    hashes = [
        h for row in direct if row["hashes"] is not None for h in np.frombuffer(row["hashes"], np.int64)
    ]
    assert len(hashes) == len(set(hashes)) == 6, "one distinct identity hash per dropped file"
    checked = [row for out in check_identities_task(outputs) for row in out.to_pylist()]
    assert [row["repeats"] for row in checked if row["repeats"] is not None] == [0]
    passed = [row for row in checked if row["repeats"] is None]
    manifest_rows = [row["meta"] for row in direct if row["meta"] is not None]
    assert [row["meta"] for row in passed if row["meta"] is not None] == manifest_rows, "they pass through"
    summarised = sorted(bytes(row["partition"]) for row in passed if row["meta"] is None)
    assert summarised == sorted(wanted), "the tasks' summaries added up: one row per partition"
    # the same task's output seen twice: every file "added twice", each one a repeat
    twice = [row for out in check_identities_task(outputs + outputs) for row in out.to_pylist()]
    assert [row["repeats"] for row in twice if row["repeats"] is not None] == [6]
    stats, written = _collect(table, 3, Collected(passed))
    _scanned, shuffled = _scan_and_merge(table, wanted.__contains__, None)
    expected = {
        table.partition_values(bytes(r["partition"]))[0]: (r["files"], r["bytes"], r["rows"], r["created"])
        for r in shuffled
        if bytes(r["partition"]) in wanted
    }
    got = {
        table.partition_values(s.partition)[0]: (
            s.file_count,
            s.file_bytes,
            s.row_count,
            s.last_file_creation,
        )
        for s in stats
    }
    assert (
        {k: v[:3] for k, v in got.items()}
        == {k: v[:3] for k, v in expected.items()}
        == {
            "a": (3, 15, 6),
            "c": (3, 15, 6),
        }
    )
    deleted = [
        e for m in written.manifests for e in read_manifest(table.file_io, table.manifest_path(m.file_name))
    ]
    assert all(e.kind == DELETE for e in deleted)
    assert sorted(e.file.file_name for e in deleted) == sorted(
        e.file.file_name
        for e in live_entries(table, table.snapshot_manager.latest())
        if e.partition in wanted
    )
    assert (written.files, written.rows) == (6, 12)

    committer.append([message(table, ["a"], deleted=[data_file("data-0-a.parquet", rows=1, size=5)])])
    lying = _names(table)  # the last manifest holds a DELETE; a task told otherwise refuses it
    with pytest.raises(InvalidTableStateError, match="counts no DELETE"):
        list(scan_and_drop_task([lying], table, wanted.__contains__, ManifestTarget.of(table)))
