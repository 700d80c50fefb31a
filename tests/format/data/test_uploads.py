"""A task's finished files stored in the background (`paimon_format.data.uploads`): bounded by count
and bytes, every upload finished before `wait` returns, a failed one raised, and nothing left behind
by a writer that fails.

Uploads are held at a gate (an Event the test opens), so what is pending is counted, not timed.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from paimon_format.data.uploads import Uploads
from paimon_format.data.writer import write_bucket_outputs
from paimon_format.errors import StorageError
from paimon_format.storage.fileio import FileIO
from tests.support.table_states import batch, build_sample_table, open_table


class GatedFileIO(FileIO):
    """A memory FileIO whose `write_bytes` waits for `gate`; `fail` names paths whose write fails."""

    def __init__(self, parallelism: int = 4) -> None:
        super().__init__("memory", io_parallelism=parallelism)
        self.gate = threading.Event()
        self.gate.set()
        self.fail: set[str] = set()
        self.started: list[str] = []
        self._lock = threading.Lock()

    def write_bytes(self, path: str, data: bytes) -> None:
        with self._lock:
            self.started.append(path)
        assert self.gate.wait(30), "the gate was never opened"
        if path.rsplit("/", 1)[-1] in self.fail or path in self.fail:
            raise StorageError(f"write {path}: refused")
        super().write_bytes(path, data)


def root() -> str:
    return f"memory://uploads-{uuid.uuid4().hex[:8]}"


def test_puts_wait_for_room_and_wait_returns_once_every_file_is_stored():
    file_io = GatedFileIO(parallelism=3)
    base = root()
    paths = [f"{base}/f-{i}" for i in range(6)]
    with Uploads(file_io, max_bytes=250) as uploads:
        file_io.gate.clear()
        uploads.put(paths[0], b"a" * 100)
        uploads.put(paths[1], b"b" * 100)
        assert uploads.pending_files == 2  # a third 100 bytes would pass 250: the next put waits
        file_io.gate.set()
        for path in paths[2:]:
            uploads.put(path, b"c" * 100)
            assert uploads.pending_files <= 2
        uploads.wait()
        assert uploads.pending_files == 0
        assert all(file_io.exists(path) for path in paths)


def test_the_count_bounds_the_files_pending():
    file_io = GatedFileIO(parallelism=2)
    base = root()
    with Uploads(file_io) as uploads:
        for i in range(5):
            uploads.put(f"{base}/f-{i}", b"x")
            assert uploads.pending_files <= 2
        uploads.wait()


def test_a_failed_upload_is_raised_by_wait_and_by_the_next_put():
    file_io = GatedFileIO()
    base = root()
    file_io.fail.add(f"{base}/bad")
    with Uploads(file_io) as uploads:
        uploads.put(f"{base}/bad", b"x")
        uploads.put(f"{base}/good", b"y")
        with pytest.raises(StorageError, match="bad"):
            uploads.wait()
        with pytest.raises(StorageError, match="bad"):
            uploads.put(f"{base}/later", b"z")
    assert f"{base}/later" not in file_io.started


def test_a_write_returns_once_its_files_are_stored():
    table = build_sample_table(f"{root()}/wh", commits=1)
    file_io = GatedFileIO()
    written = write_bucket_outputs(file_io, table.path, table.schema, batch(100, 30, days=3), 0)
    assert sum(len(out.files) for out in written) == len(file_io.started) == 3  # one file per partition
    assert all(file_io.exists(path) for path in file_io.started)


class FailSecondWrite(FileIO):
    """A memory FileIO whose second `write_bytes` fails; every path it was asked to write is kept."""

    def __init__(self) -> None:
        super().__init__("memory", io_parallelism=4)
        self.paths: list[str] = []
        self._lock = threading.Lock()

    def write_bytes(self, path: str, data: bytes) -> None:
        with self._lock:
            self.paths.append(path)
            second = len(self.paths) == 2
        if second:
            raise StorageError(f"write {path}: refused")
        super().write_bytes(path, data)


def test_a_write_whose_upload_fails_raises_and_leaves_none_of_its_files():
    warehouse = f"{root()}/wh"
    table = build_sample_table(warehouse, commits=1)
    failing = FailSecondWrite()
    with pytest.raises(StorageError, match="refused"):
        write_bucket_outputs(failing, table.path, table.schema, batch(300, 30, days=3), 0)
    assert len(failing.paths) >= 2
    assert not any(failing.exists(path) for path in failing.paths)
    assert open_table(warehouse).snapshot_manager.latest().id == 1
