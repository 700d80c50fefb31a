"""Deletes on S3 with several DeleteObjects batches in flight: counted on the wire through the proxy,
concurrency counted in the FileIO (`tests.support.peak_io`), never timed.

- `FileIO.delete_many` of 2,500 files sends 3 DeleteObjects (1,000 keys each at most), more than one
  at a time under an in-flight limit of 8, one at a time under 1; every file is gone either way.
- Under 503 SlowDown every file is still deleted (botocore retries; the pools narrow).
- The deleter's per-task batches run in flight too, each started only after the rate limit let it.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pyarrow as pa
import pytest

from jobs.deletion import deleter
from paimon_format.errors import MissingFileError
from paimon_format.storage.fileio import FileIO
from tests.support.peak_io import PeakFileIO, full_window, probing


def _files(prefix: str, count: int) -> list[str]:
    """`count` objects under `prefix`/data, put straight into the moto server's store: the test is
    about deleting them, and thousands of uploads through HTTP would take most of its time."""
    from moto.core import DEFAULT_ACCOUNT_ID  # moto: the session's in-process server
    from moto.s3.models import s3_backends

    bucket, _, key_prefix = prefix.removeprefix("s3://").partition("/")
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    paths = [f"{prefix}/data/f-{i:05d}" for i in range(count)]
    for i in range(count):
        backend.put_object(bucket, f"{key_prefix}/data/f-{i:05d}", b"x")
    return paths


@pytest.mark.parametrize("parallelism", [1, 8])
def test_2500_files_are_three_delete_objects_in_flight(s3, parallelism):
    prefix, options, proxy = s3
    paths = _files(prefix, 2500)
    with probing() as probe:
        file_io = FileIO.for_path(prefix, options, io_parallelism=parallelism)
        assert isinstance(file_io, PeakFileIO)
        if parallelism > 1:
            probe.holding("delete_objects")
        proxy.reset()
        deleted = file_io.delete_many(paths)
    assert not probe.gave_up
    assert sorted(deleted) == paths
    assert proxy.count("POST", "delete") == 3
    assert proxy.count() == 3  # nothing else: no HEAD or LIST per file
    if parallelism == 1:
        assert probe.peak["delete_objects"] == 1
    else:
        assert probe.peak["delete_objects"] > 1
    with pytest.raises(MissingFileError):
        file_io.list_dir(f"{prefix}/data")


def test_throttled_deletes_still_delete_every_file(s3):
    prefix, options, proxy = s3
    paths = _files(prefix, 2500)
    file_io = FileIO.for_path(prefix, options, io_parallelism=8)
    proxy.reset(throttle_every=2, scope=prefix)  # every second request of this test answered 503 SlowDown
    try:
        deleted = file_io.delete_many(paths)
        throttled = proxy.count(status=503)
    finally:
        full_window()
    assert sorted(deleted) == paths
    assert throttled >= 1  # SlowDown answers were retried, none failed the delete
    assert proxy.count("POST", "delete", status=200) == 3
    with pytest.raises(MissingFileError):
        file_io.list_dir(f"{prefix}/data")


class _Clock:
    """A clock the rate limiter sleeps on: sleeping moves it on, so pacing is exact and instant."""

    def __init__(self) -> None:
        self._now = 0.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)


def test_deleter_batches_are_in_flight_and_each_starts_within_the_rate(s3, monkeypatch):
    prefix, options, proxy = s3
    paths = _files(prefix, 600)
    clock = _Clock()
    monkeypatch.setattr(deleter, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep))
    started: list[float] = []

    class Recording(PeakFileIO):
        def delete_many(self, batch):
            started.append(clock.monotonic())
            return super().delete_many(batch)

    with probing() as probe:
        file_io = Recording("s3", options, io_parallelism=8)
        file_io.probe = probe.holding("delete_many")
        relative = [path.removeprefix(prefix + "/") for path in paths]
        rows = pa.record_batch(
            [pa.array(relative), pa.array([1] * len(relative), pa.int64())], ["path", "size"]
        )
        task = deleter._deleter(file_io, prefix, batch_size=100, per_task_rate=200.0, retries=3)
        proxy.reset()
        (summary,) = [row for out in task(iter([rows])) for row in out.to_pylist()]
    assert not probe.gave_up
    assert summary == {"deleted": 600, "bytes": 600, "absent": 0, "failed": 0, "errors": []}
    assert proxy.count("POST", "delete") == 6  # one DeleteObjects per batch of 100
    assert probe.peak["delete_many"] > 1
    # 200 files a second: the k-th batch of 100 starts no earlier than k/2 s on the limiter's clock
    for k, moment in enumerate(sorted(started)):
        assert moment >= k * 0.5 - 1e-9
    with pytest.raises(MissingFileError):
        file_io.list_dir(f"{prefix}/data")
