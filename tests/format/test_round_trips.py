"""Reads and writes that need nothing from each other go out at once: on an object store each waits a
round trip, so two of them one after another cost two. Overlap is made observable, never timed: the
chosen calls wait for each other (`Overlap`), so code that runs them one after another makes the
first one give up after a guard and the test fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from paimon_format.commit import SnapshotCommit
from paimon_format.errors import StorageError
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message

GUARD_S = 10.0  # only ever waited out when the calls do not overlap (the test then fails)
R = TypeVar("R")


class Overlap:
    """Holds each chosen call (by the start of its file name) until another chosen call runs; records
    which ran together, and the most calls of any kind that ran at once."""

    def __init__(self, *prefixes: str) -> None:
        self.prefixes = prefixes
        self._lock = threading.Lock()
        self._running: list[str] = []
        self.together: set[str] = set()
        self._met = threading.Event()
        self.gave_up = False
        self._calls = 0
        self.peak = 0  # the most storage calls (chosen or not) that ever ran at once

    def chosen(self, path: str) -> str | None:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return next((s for s in self.prefixes if name and name.startswith(s)), None)

    def run(self, path: str, call: Callable[[], R]) -> R:
        with self._lock:
            self._calls += 1
            self.peak = max(self.peak, self._calls)
        try:
            return self._held(path, call)
        finally:
            with self._lock:
                self._calls -= 1

    def _held(self, path: str, call: Callable[[], R]) -> R:
        chosen = self.chosen(path)
        if chosen is None or self.gave_up:
            return call()
        with self._lock:
            self._running.append(chosen)
            if len(self._running) >= 2:
                self.together.update(self._running)
                self._met.set()
        try:
            if not self._met.wait(GUARD_S):
                self.gave_up = True
            return call()
        finally:
            with self._lock:
                self._running.remove(chosen)


def overlapping_io(overlap: Overlap, parallelism: int = 8, held: frozenset[str] = frozenset()) -> FileIO:
    """A local FileIO whose reads, checks, listings and writes report to `overlap`; those of the
    chosen names wait for each other, of the operations in `held` only when it is given."""

    class OverlapFileIO(FileIO):
        def _run(self, operation: str, path: str, call: Callable[[], R]) -> R:
            chosen = not held or operation in held
            return overlap.run(path if chosen else "", call)

        def read_bytes(self, path: str) -> bytes:
            return self._run("read", path, lambda: super(OverlapFileIO, self).read_bytes(path))

        def file_exists(self, path: str) -> bool:
            return self._run("exists", path, lambda: super(OverlapFileIO, self).file_exists(path))

        def list_dir(self, path: str) -> list:
            return self._run("list", path, lambda: super(OverlapFileIO, self).list_dir(path))

        def write_bytes(self, path: str, data: bytes) -> None:
            self._run("write", path, lambda: super(OverlapFileIO, self).write_bytes(path, data))

    return OverlapFileIO("file", None, False, parallelism)


@pytest.fixture
def root(tmp_path) -> str:
    """A table of two appends: LATEST names snapshot-2."""
    path = str(tmp_path / "db.db" / "t")
    table = make_table(path)
    for name in ("data-1.parquet", "data-2.parquet"):
        SnapshotCommit(table).append([message(table, ["a"], data_file(name))])
    return path


def test_latest_checks_the_next_id_while_it_reads_the_hinted_snapshot(root):
    overlap = Overlap("snapshot-3", "snapshot-2")
    latest = Table(overlapping_io(overlap), root).snapshot_manager.latest()
    assert latest is not None and latest.id == 2
    assert overlap.together == {"snapshot-3", "snapshot-2"} and not overlap.gave_up


def test_latest_id_checks_both_ids_at_once(root):
    overlap = Overlap("snapshot-3", "snapshot-2")
    assert Table(overlapping_io(overlap), root).snapshot_manager.latest_id() == 2
    assert overlap.together == {"snapshot-3", "snapshot-2"} and not overlap.gave_up


def test_a_stale_hint_naming_a_broken_snapshot_sends_the_reader_to_the_listing(root):
    """The hinted snapshot is read beside the check of the next id; when the next id exists the hint
    is stale, and what reading the hinted one gave (here a corrupt file) must not count."""
    table = Table(FileIO.for_path(root, io_parallelism=8), root)
    manager = table.snapshot_manager
    SnapshotCommit(table).append([message(table, ["a"], data_file("data-3.parquet"))])
    manager.write_latest_hint(2)
    table.file_io.write_bytes(manager.snapshot_path(2), b"{not json")
    latest = manager.latest()
    assert latest is not None and latest.id == 3


def test_the_open_check_reads_the_schema_and_the_latest_at_once(root):
    overlap = Overlap("schema", "LATEST")
    table = Table(overlapping_io(overlap), root)
    table.check_metadata()
    assert overlap.together == {"schema", "LATEST"} and not overlap.gave_up
    assert table.snapshot_manager.handed_over() is not None


def test_one_by_one_under_an_in_flight_limit_of_one(root):
    """io_parallelism 1: nothing overlaps (the calls are not held: each would wait out the guard)."""
    overlap = Overlap()
    table = Table(overlapping_io(overlap, parallelism=1), root)
    table.check_metadata()
    assert SnapshotCommit(table).append([message(table, ["b"], data_file("data-b.parquet"))]) is not None
    assert overlap.peak == 1


def test_a_commit_writes_its_base_and_delta_lists_at_once(root):
    overlap = Overlap("manifest-list-")
    table = Table(overlapping_io(overlap, held=frozenset({"write"})), root)
    snapshot = SnapshotCommit(table).append([message(table, ["b"], data_file("data-b.parquet"))])
    assert snapshot is not None and snapshot.id == 3
    assert overlap.together == {"manifest-list-"} and not overlap.gave_up
    reread = Table(FileIO.for_path(root), root)
    names = {meta.file_name for meta in reread.manifest_list(snapshot.delta_manifest_list)}
    assert len(names) == 1 and snapshot.base_manifest_list != snapshot.delta_manifest_list


def test_a_side_that_fails_leaves_none_of_the_attempts_files(root):
    """The first list to be written fails once the other side is writing its own; the commit must
    wait for that side before it removes what the attempt wrote, or its list would stay behind."""
    failed = threading.Event()

    class FailingFirstList(FileIO):
        def write_bytes(self, path: str, data: bytes) -> None:
            if path.rsplit("/", 1)[-1].startswith("manifest-list-"):
                if not failed.is_set():
                    failed.set()
                    raise StorageError(f"write {path}: refused by the test")
                failed.wait(GUARD_S)
            super().write_bytes(path, data)

    table = Table(FailingFirstList("file", None, False, 8), root)
    manifest_dir = table.file_io.join(root, "manifest")
    before = {status.path for status in table.file_io.list_dir(manifest_dir)}
    with pytest.raises(StorageError, match="refused by the test"):
        SnapshotCommit(table).append([message(table, ["b"], data_file("data-b.parquet"))])
    assert {status.path for status in table.file_io.list_dir(manifest_dir)} == before
    assert table.snapshot_manager.latest_id() == 2
