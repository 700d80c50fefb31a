"""Manifest reads and existence checks in flight: the same results as one after another, with more than
one request at a time under an in-flight limit of 8 and exactly one under a limit of 1.

Concurrency is counted, never timed: the table's FileIO counts its calls running at once
(`tests.support.peak_io`). The functions are the executor-side ones, called directly (no Spark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from jobs.compact_manifests import _manifest_reader
from jobs.partitions.scan_tasks import scan_and_drop_task, scan_manifests_task
from jobs.remove_unexisting_files import _entry_reader, _missing_only
from paimon_format.commit import SnapshotCommit
from paimon_format.manifest.concat import merge_by_blocks, read_deletes
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.scan.snapshot_scan import data_manifests, live_entries, merge_entries, read_entries
from paimon_format.snapshot import Snapshot
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message, partition_of
from tests.support.peak_io import Probe, probing

MANIFESTS = 6


def _build(root: str) -> None:
    """A table of MANIFESTS appends (one manifest each) over three partitions, the last deleting one
    file of the first (so merges have a DELETE to cancel)."""
    table = make_table(root)
    committer = SnapshotCommit(table)
    for commit in range(MANIFESTS - 1):
        committer.append([message(table, [p], data_file(f"data-{commit}-{p}.parquet")) for p in "abc"])
    committer.append(
        [message(table, ["a"], data_file("data-last.parquet"), deleted=[data_file("data-0-a.parquet")])]
    )


def _opened(root: str, parallelism: int) -> Table:
    """The table through a FileIO made now (a probed one inside `probing`), its metadata loaded."""
    table = Table(FileIO.for_path(root, io_parallelism=parallelism), root)
    table.schema  # noqa: B018 - loaded before holding reads: a lone read would wait for a second
    return table


@dataclass
class Opened:
    """A table opened for one run, with what its set-up read (before any read is held)."""

    table: Table
    snapshot: Snapshot
    manifests: list[ManifestFileMeta]

    def names(self, name_column: str = "name") -> pa.RecordBatch:
        return pa.record_batch(
            [
                pa.array([0] * len(self.manifests), pa.int32()),
                pa.array(range(len(self.manifests)), pa.int64()),
                pa.array([m.file_name for m in self.manifests]),
                pa.array([m.file_size for m in self.manifests], pa.int64()),
            ],
            names=["grp", "idx", name_column, "size"],
        )


def _rows(batches: Iterable[pa.RecordBatch]) -> list[dict]:
    return [row for batch in batches for row in batch.to_pylist()]


def _probed(
    root: str, parallelism: int, run: Callable[[Opened], Any], operation: str = "read"
) -> tuple[Any, Probe]:
    """`run` on a freshly opened table whose `operation` calls are counted (and held, to make
    overlap observable, when more than one may run at once)."""
    with probing() as probe:
        table = Table(FileIO.for_path(root, io_parallelism=parallelism), root)
        snapshot = table.snapshot_manager.latest()
        assert snapshot is not None
        opened = Opened(table, snapshot, data_manifests(table, snapshot))
        table.schema  # noqa: B018 - loaded before holding reads: a lone read would wait for a second
        if parallelism > 1:
            probe.holding(operation)
        result = run(opened)
    assert not probe.gave_up
    return result, probe


@pytest.fixture
def root(tmp_path: Path) -> str:
    path = str(tmp_path / "db.db" / "t")
    _build(path)
    return path


def _merged_by_blocks(opened: Opened) -> list[tuple]:
    table = opened.table
    unprobed = FileIO(table.file_io.protocol)  # the one DELETE-holding manifest: a lone read
    deletes = read_deletes(unprobed, table.manifest_path, opened.manifests)
    metas = merge_by_blocks(
        table.file_io,
        table.manifest_path,
        opened.manifests,
        deletes,
        table.file_io.join(table.path, "manifest"),
        lambda: "unused",
        1 << 20,
        "zstd",
        table.partition_types,
        table.schema.id,
        strict=True,
        write=False,
    )
    return [(m.num_added_files, m.num_deleted_files) for m in metas]


def _appends_only(opened: Opened) -> pa.RecordBatch:
    """The manifests before the last (which holds a DELETE): the direct scan's input."""
    return opened.names().slice(0, len(opened.manifests) - 1)


READERS: dict[str, Callable[[Opened], Any]] = {
    "snapshot scan": lambda o: [e.identifier() for e in merge_entries(read_entries(o.table, o.manifests))],
    "partition scan": lambda o: _rows(
        scan_manifests_task([o.names()], o.table, {partition_of(o.table, "a")}.__contains__)
    ),
    "partition drop scan": lambda o: sorted(
        (row["partition"], row["files"])
        for row in _rows(scan_and_drop_task([_appends_only(o)], o.table, lambda _p: True, None))
        if row["hashes"] is None
    ),
    "compact-manifests reader": lambda o: _rows(_manifest_reader(o.table)([o.names()])),
    "compact-manifests blocks": _merged_by_blocks,
    "remove-unexisting-files entries": lambda o: [
        (row["key"], row["kind"], row["path"], row["entry"])
        for row in _rows(_entry_reader(o.table)([o.names("manifest")]))
    ],
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_manifest_reads_are_in_flight_and_change_nothing(root, reader):
    run = READERS[reader]
    serial, one = _probed(root, 1, run)
    parallel, eight = _probed(root, 8, run)
    assert parallel == serial
    assert serial  # the reader saw the manifests' entries
    assert one.peak["read"] == 1
    assert eight.peak["read"] > 1


def test_existence_checks_are_in_flight_and_find_the_same_missing_files(root):
    table = Table(FileIO.for_path(root), root)
    entries = live_entries(table, table.snapshot_manager.latest())
    paths = [table.data_file_path(entry) for entry in entries]
    for path in paths[::2]:  # every other live file exists; the rest are lost
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"x")
    batch = pa.record_batch(
        [pa.array(paths), pa.array(range(len(paths)), pa.int64())], names=["path", "rows"]
    )

    def missing(opened: Opened) -> list[str]:
        return [row["path"] for row in _rows(_missing_only(opened.table)([batch]))]

    serial, one = _probed(root, 1, missing, "exists")
    parallel, eight = _probed(root, 8, missing, "exists")
    assert serial == parallel == paths[1::2]
    assert one.peak["exists"] == 1
    assert eight.peak["exists"] > 1
