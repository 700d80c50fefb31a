"""A task's data files fetched ahead (`paimon_format.data.prefetch`): bounded, ordered, and the same
results and errors as reading each file when its turn comes.

Fetches are held at a gate (an Event the test opens), so what is in flight is counted, not timed.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pyarrow as pa
import pytest

from paimon_format.data.prefetch import AHEAD_BYTES, Prefetch, tasks_for_files
from paimon_format.data.reader import prefetch_data_files, read_data_file
from paimon_format.errors import MissingFileError
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from tests.support.table_states import build_sample_table, open_table


class GatedFileIO(FileIO):
    """A memory FileIO whose `open_input` calls wait for `gate` and are counted while they run."""

    def __init__(self, parallelism: int) -> None:
        super().__init__("memory", io_parallelism=parallelism)
        self.gate = threading.Event()
        self.opened: list[str] = []
        self.running = self.peak = 0
        self._lock = threading.Lock()

    def open_input(self, path: str, size: int | None = None) -> Any:
        with self._lock:
            self.opened.append(path)
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            assert self.gate.wait(30), "the gate was never opened"
            return super().open_input(path, size)
        finally:
            with self._lock:
                self.running -= 1


def files(file_io: FileIO, count: int, size: int = 100) -> list[tuple[str, int]]:
    root = f"memory://prefetch-{uuid.uuid4().hex[:8]}"
    paths = [f"{root}/f-{i}" for i in range(count)]
    for i, path in enumerate(paths):
        file_io.write_bytes(path, bytes([i]) * size)
    return [(path, size) for path in paths]


def test_fetches_ahead_in_order_bounded_by_count():
    file_io = GatedFileIO(parallelism=3)
    planned = files(file_io, 8)
    with Prefetch(file_io, planned) as prefetch:
        assert prefetch.ahead_files == 3 and prefetch.ahead_bytes == 300
        assert file_io.opened == [path for path, _ in planned[:3]]  # the first three, in order
        file_io.gate.set()
        for i, (path, size) in enumerate(planned):
            with prefetch.open(path, size) as handle:
                assert handle.read() == bytes([i]) * size
            assert prefetch.ahead_files <= 3
    assert sorted(file_io.opened) == sorted(path for path, _ in planned)  # each file fetched once


def test_bytes_bound_the_files_ahead():
    file_io = GatedFileIO(parallelism=16)
    planned = files(file_io, 10, size=100)
    with Prefetch(file_io, planned, max_bytes=350) as prefetch:
        assert prefetch.ahead_files == 3 and prefetch.ahead_bytes == 300
        file_io.gate.set()
        for path, size in planned:
            prefetch.open(path, size).close()
            assert prefetch.ahead_bytes <= 350


def test_a_file_asked_for_out_of_order_is_read_now_and_not_fetched_again():
    file_io = GatedFileIO(parallelism=2)
    planned = files(file_io, 5)
    file_io.gate.set()
    with Prefetch(file_io, planned) as prefetch:
        last, size = planned[-1]
        assert prefetch.open(last, size).read() == bytes([4]) * size
        for i, (path, size) in enumerate(planned[:-1]):
            assert prefetch.open(path, size).read() == bytes([i]) * size
    assert sorted(file_io.opened) == sorted(path for path, _ in planned)


def test_a_failed_fetch_is_raised_when_its_file_is_asked_for_and_not_before():
    file_io = FileIO("memory", io_parallelism=4)
    planned = files(file_io, 3)
    gone = planned[1][0]
    file_io.delete(gone)
    with Prefetch(file_io, planned) as prefetch:
        assert prefetch.open(*planned[0]).read() == bytes([0]) * 100
        with pytest.raises(MissingFileError, match="f-1"):
            prefetch.open(*planned[1])
        assert prefetch.open(*planned[2]).read() == bytes([2]) * 100
    with Prefetch(file_io, planned) as prefetch:  # never asked for: nothing raised
        prefetch.open(*planned[0]).close()


def test_local_files_and_unknown_sizes_are_not_fetched_ahead(tmp_path):
    local = FileIO("file", io_parallelism=8)
    path = str(tmp_path / "a")
    local.write_bytes(path, b"abc")
    with Prefetch(local, [(path, 3)]) as prefetch:
        assert prefetch.ahead_files == 0
        with prefetch.open(path, 3) as handle:
            assert handle.read() == b"abc"
    memory = GatedFileIO(parallelism=8)
    planned = files(memory, 2)
    with Prefetch(memory, [(planned[0][0], None), planned[1]]) as prefetch:
        assert memory.opened == [planned[1][0]]
        memory.gate.set()


def test_a_table_read_through_the_prefetch_gives_the_same_rows():
    warehouse = f"memory://prefetch-{uuid.uuid4().hex[:8]}/wh"
    build_sample_table(warehouse, commits=4)
    table = open_table(warehouse)
    entries = list(live_entries(table, table.snapshot_manager.latest()))
    assert len(entries) >= 8
    refs = [(e.partition, e.bucket, e.file) for e in entries]

    def rows(prefetch: Prefetch | None) -> pa.Table:
        batches = [
            b for p, bucket, meta in refs for b in read_data_file(table, p, bucket, meta, prefetch=prefetch)
        ]
        return pa.Table.from_batches(batches)

    with prefetch_data_files(table, refs) as prefetch:
        assert prefetch.ahead_files == min(len(refs), table.file_io.io_parallelism)
        fetched = rows(prefetch)
    assert fetched.equals(rows(None))
    assert fetched.num_rows == sum(meta.row_count for _p, _b, meta in refs)


def test_tasks_are_a_few_a_core_and_more_only_for_many_bytes():
    assert tasks_for_files(4, 4_000, parallelism=2) == 4  # fewer units than 3 tasks a core: one each
    assert tasks_for_files(1_000, 5_000_000, parallelism=2) == 6  # small files: 3 tasks a core
    assert tasks_for_files(1_000, 5_000_000, parallelism=100) == 300
    assert tasks_for_files(1_000, 500 * AHEAD_BYTES, parallelism=2) == 500  # many bytes: by bytes
    assert tasks_for_files(50_000, 10**15, parallelism=2) == 10_000  # at most `most`
    assert tasks_for_files(0, 0, parallelism=2) == 1
