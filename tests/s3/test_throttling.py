"""503 SlowDown from the store: requests are retried, the process's pools narrow, throttles are counted.

The proxy answers SlowDown the way S3 does when a prefix is over its request rate; nothing in our code
is mocked, so this proves botocore's retries and our retry hook (`s3_client.count_throttles`) together.

The proxy is the session's: a request of an earlier test still on its way (a Spark task of a failed job
running on in its worker until it is killed) once took one of the 503s planned here, and the driver
counted one throttle fewer than the proxy sent. Each test scopes the proxy to its own prefix, and the
first test sends such a stray itself, from a client of its own, while the 503s are planned.
"""

from __future__ import annotations

import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import allowed_in_flight, map_in_flight, throttled_requests


def _recover() -> None:
    while allowed_in_flight(64) < 64:
        list(map_in_flight(lambda x: x, range(256), 64))


def stray_head_status(bucket: str, key: str, endpoint_url: str) -> int:
    """One HEAD, not retried, from a client that is not ours (as another process's would be): its
    status (404 for a missing key, 503 when it was throttled)."""
    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    try:
        client.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        return int(error.response["ResponseMetadata"]["HTTPStatusCode"])
    return 200


def test_slow_down_is_retried_counted_and_narrows_the_pools(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    paths = [f"{prefix}/f-{i}" for i in range(20)]
    for path in paths:
        file_io.write_bytes(path, path.encode())
    _recover()
    before = throttled_requests()
    proxy.reset(throttle_first=4, scope=prefix)
    bucket, stray = prefix.removeprefix("s3://").split("/")[0], f"elsewhere-{uuid.uuid4().hex[:12]}"
    assert stray_head_status(bucket, stray, options["endpoint_url"]) == 404  # none of the four 503s

    read = list(map_in_flight(file_io.read_bytes, paths, file_io.io_parallelism))

    assert read == [path.encode() for path in paths]  # nothing failed for the 503s
    assert proxy.count(status=503) == 4
    assert [r.status for r in proxy.strays if r.path == f"/{bucket}/{stray}"] == [404]  # booked apart
    assert throttled_requests() - before == 4
    assert allowed_in_flight(64) < 64  # the window narrowed and has not fully grown back yet
    _recover()


def test_an_unthrottled_run_counts_nothing(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    file_io.write_bytes(f"{prefix}/a", b"a")
    before = throttled_requests()
    proxy.reset(scope=prefix)
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
    proxy.reset(throttle_first=2, scope=prefix)
    assert file_ios[-1].read_bytes(f"{prefix}/a") == b"a"
    assert throttled_requests() - before == 2
    assert proxy.count(status=503) == 2
    _recover()
