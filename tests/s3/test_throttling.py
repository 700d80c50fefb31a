"""503 SlowDown from the store: requests are retried, the process's pools narrow, throttles are counted.

The proxy answers SlowDown the way S3 does when a prefix is over its request rate; nothing in our code
is mocked, so this proves botocore's retries and our retry hook (`s3_client.count_throttles`) together.
"""

from __future__ import annotations

from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import allowed_in_flight, map_in_flight, throttled_requests


def _recover() -> None:
    while allowed_in_flight(64) < 64:
        list(map_in_flight(lambda x: x, range(256), 64))


def test_slow_down_is_retried_counted_and_narrows_the_pools(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    paths = [f"{prefix}/f-{i}" for i in range(20)]
    for path in paths:
        file_io.write_bytes(path, path.encode())
    _recover()
    before = throttled_requests()
    proxy.reset(throttle_first=4)

    read = list(map_in_flight(file_io.read_bytes, paths, file_io.io_parallelism))

    assert read == [path.encode() for path in paths]  # nothing failed for the 503s
    assert proxy.count(status=503) == 4
    assert throttled_requests() - before == 4
    assert allowed_in_flight(64) < 64  # the window narrowed and has not fully grown back yet
    _recover()


def test_an_unthrottled_run_counts_nothing(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    file_io.write_bytes(f"{prefix}/a", b"a")
    before = throttled_requests()
    proxy.reset()
    assert file_io.read_bytes(f"{prefix}/a") == b"a"
    assert throttled_requests() == before
    assert proxy.count(status=503) == 0


def test_each_throttle_counts_once_however_many_file_ios_share_the_client(s3):
    prefix, options, proxy = s3
    file_ios = [FileIO.for_path(prefix, options) for _ in range(5)]
    for file_io in file_ios:
        assert file_io.fs is file_ios[0].fs  # fsspec's cached filesystem: one botocore client
    file_ios[0].write_bytes(f"{prefix}/a", b"a")
    before = throttled_requests()
    proxy.reset(throttle_first=2)
    assert file_ios[-1].read_bytes(f"{prefix}/a") == b"a"
    assert throttled_requests() - before == 2
    _recover()
