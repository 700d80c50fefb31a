"""The proxy's own behaviour: the latency it adds, how it classifies and bills requests, its seeded
503 share, its in-flight peak, and the standalone process a benchmark steers over HTTP.

Benchmarks and S3 tests read their figures off this ledger, so a wrong kind or a missed request
would misreport every job's bill.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from tests.s3.ledger import in_scope, scope_path
from tests.s3.proxy import Stall, ThrottlingProxy, busy_seconds, classify

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def proxy(moto_s3) -> Iterator[ThrottlingProxy]:
    """A proxy of this test's own (the session's is shared with the S3 job tests)."""
    endpoint_url, _, _ = moto_s3
    with ThrottlingProxy(endpoint_url) as own:
        yield own


def client(endpoint_url: str, attempts: int = 1) -> Any:
    """A boto3 S3 client through `endpoint_url` that does not retry (every attempt is one request)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
    )


def head_status(s3: Any, bucket: str, key: str) -> int:
    """The status of one HEAD through `s3` (a client that does not retry): 200, or the error's."""
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        return int(error.response["ResponseMetadata"]["HTTPStatusCode"])
    return 200


def test_every_request_waits_the_latency_before_it_is_answered(moto_s3, proxy: ThrottlingProxy) -> None:
    _, bucket, _ = moto_s3
    proxy.reset(latency_s=0.05)
    s3 = client(proxy.endpoint_url)
    key = f"lat-{uuid.uuid4().hex}"
    s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.head_object(Bucket=bucket, Key=key)
    assert len(proxy.requests) == 3
    for request in proxy.requests:
        assert request.seconds >= 0.05, request
        assert request.upstream_seconds < request.seconds  # moto's own share is booked apart
    proxy.reset()
    assert proxy.summary()["latency_s"] == 0  # a reset turns the latency off


def test_requests_are_classified_and_billed_by_kind(moto_s3, proxy: ThrottlingProxy) -> None:
    _, bucket, _ = moto_s3
    s3 = client(proxy.endpoint_url)
    prefix = f"kinds-{uuid.uuid4().hex}"
    proxy.reset()
    s3.put_object(Bucket=bucket, Key=f"{prefix}/a", Body=b"12345")
    s3.put_object(Bucket=bucket, Key=f"{prefix}/b", Body=b"67", IfNoneMatch="*")  # a create-if-absent
    s3.put_object(Bucket=bucket, Key=f"{prefix}/c", Body=b"")
    s3.head_object(Bucket=bucket, Key=f"{prefix}/a")
    assert s3.get_object(Bucket=bucket, Key=f"{prefix}/a")["Body"].read() == b"12345"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")
    assert listed["KeyCount"] == 3
    s3.delete_object(Bucket=bucket, Key=f"{prefix}/c")
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"{prefix}/a"}, {"Key": f"{prefix}/b"}]})

    summary = proxy.summary()
    assert summary["by_kind"] == {
        "GET": 1,
        "HEAD": 1,
        "LIST": 1,
        "PUT": 3,
        "DELETE": 1,
        "DeleteObjects": 1,
        "OTHER": 0,
    }
    assert summary["requests"] == 8
    assert summary["conditional_puts"] == 1
    assert summary["deleted_keys"] == 2
    assert summary["throttled"] == summary["denied"] == 0
    assert summary["bytes_out"] >= 5 + len(b"<ListBucketResult")  # the object's bytes and the listing
    puts = [r for r in proxy.requests if r.kind == "PUT"]
    assert [r.bytes_in for r in puts] == [5, 2, 0]
    head = next(r for r in proxy.requests if r.kind == "HEAD")
    assert head.bytes_out == 0  # a HEAD has no body, whatever its Content-Length says


@pytest.mark.parametrize(
    ("method", "path", "query", "kind"),
    [
        ("GET", "/b", "list-type=2&prefix=t%2F", "LIST"),
        ("GET", "/b/", "", "LIST"),
        ("GET", "/b", "location", "OTHER"),
        ("GET", "/b/t/k", "", "GET"),
        ("GET", "/b/t/k", "x-id=GetObject", "GET"),
        ("GET", "/b/t/k", "tagging", "OTHER"),
        ("PUT", "/b/t/k", "partNumber=1&uploadId=u", "OTHER"),
        ("POST", "/b", "delete", "DeleteObjects"),
        ("POST", "/b/t/k", "uploads", "OTHER"),
        ("HEAD", "/b/t/k", "", "HEAD"),
        ("DELETE", "/b/t/k", "", "DELETE"),
    ],
)
def test_classify(method: str, path: str, query: str, kind: str) -> None:
    assert classify(method, path, query) == kind


def test_busy_seconds_is_the_union_of_overlapping_spans() -> None:
    """moto's cost per request is its busy time over the requests: overlapping waits count once."""
    assert busy_seconds([]) == 0
    assert busy_seconds([(0.0, 1.0), (0.5, 1.0), (3.0, 0.5), (3.1, 0.1), (5.0, 0.0)]) == 2.0


_DELETE_BODY = b"<Delete><Object><Key>t-2/a</Key></Object><Object><Key>t-1/a&amp;b</Key></Object></Delete>"


@pytest.mark.parametrize(
    ("method", "path", "query", "body", "inside"),
    [
        ("GET", "/b/t-1/wh/data-0.parquet", "", b"", True),
        ("HEAD", "/b/t-1", "", b"", True),
        ("PUT", "/b/t-1/a", "partNumber=1&uploadId=u", b"", True),
        ("GET", "/b/t-10/x", "", b"", False),  # a longer name beside the prefix, not under it
        ("GET", "/b/t-2/x", "", b"", False),
        ("GET", "/other/t-1/x", "", b"", False),
        ("GET", "/b", "list-type=2&prefix=t-1%2Fwh%2F&delimiter=%2F", b"", True),
        ("GET", "/b", "list-type=2&prefix=t-1", b"", True),
        ("GET", "/b", "list-type=2&prefix=t-2%2F", b"", False),
        ("GET", "/b", "list-type=2", b"", False),  # the whole bucket
        ("POST", "/b", "delete", _DELETE_BODY, True),  # one key of the batch is under it
        ("POST", "/b", "delete", _DELETE_BODY.replace(b"t-1/", b"t-3/"), False),
    ],
)
def test_a_scope_takes_the_requests_for_keys_under_its_prefix(
    method: str, path: str, query: str, body: bytes, inside: bool
) -> None:
    assert in_scope(scope_path("s3://b/t-1"), method, path, query, body) is inside
    assert in_scope(scope_path(""), method, path, query, body)  # no scope: every request
    assert scope_path("b/t-1/") == scope_path("/b/t-1") == "/b/t-1"


def status_of(call: Callable[[], Any]) -> int:
    """The HTTP status of one S3 call (its error's when it raised one)."""
    try:
        response = call()
    except ClientError as error:
        return int(error.response["ResponseMetadata"]["HTTPStatusCode"])
    return int(response["ResponseMetadata"]["HTTPStatusCode"])


def test_a_scope_leaves_other_requests_untouched_and_off_the_bill(moto_s3, proxy: ThrottlingProxy) -> None:
    """The session's tests share one proxy, and a request of an earlier test may still be on its way
    (a failed Spark job's sibling task): once it took one of the first N 503s a test had planned for
    its own reads. Outside the scope a request takes no 503, no denial, no stall, and is billed apart."""
    _, bucket, _ = moto_s3
    mine, other = f"mine-{uuid.uuid4().hex[:12]}", f"other-{uuid.uuid4().hex[:12]}"
    s3 = client(proxy.endpoint_url)
    for prefix in (mine, other):
        s3.put_object(Bucket=bucket, Key=f"{prefix}/k", Body=b"x")
    proxy.reset(
        throttle_first=2,
        deny=lambda method, path, query: method == "GET",
        stall=Stall(lambda method, path, query: method == "DELETE", conflict=True),
        scope=f"s3://{bucket}/{mine}",
    )

    def calls(prefix: str) -> list[Callable[[], Any]]:
        key = f"{prefix}/k"
        return [
            lambda: s3.head_object(Bucket=bucket, Key=key),
            lambda: s3.head_object(Bucket=bucket, Key=key),
            lambda: s3.head_object(Bucket=bucket, Key=key),
            lambda: s3.get_object(Bucket=bucket, Key=key),
            lambda: s3.delete_object(Bucket=bucket, Key=key),
        ]

    strays = [status_of(call) for call in calls(other)]  # first: the first N are the scope's own
    own = [status_of(call) for call in calls(mine)]

    assert strays == [200, 200, 200, 200, 204]
    assert own == [503, 503, 200, 403, 409]
    assert [r.status for r in proxy.requests] == own
    assert [r.status for r in proxy.strays] == strays
    assert (proxy.summary()["throttled"], proxy.summary()["strays"]) == (2, 5)
    proxy.reset()  # no scope: every request is the test's again
    assert status_of(lambda: s3.head_object(Bucket=bucket, Key=f"{mine}/k")) == 200
    assert (len(proxy.requests), len(proxy.strays)) == (1, 0)


def test_throttle_ratio_answers_a_seeded_share_with_slow_down(moto_s3, proxy: ThrottlingProxy) -> None:
    _, bucket, _ = moto_s3
    key = f"thr-{uuid.uuid4().hex}"
    s3 = client(proxy.endpoint_url)
    s3.put_object(Bucket=bucket, Key=key, Body=b"x")

    def statuses(seed: int) -> list[int]:
        proxy.reset(throttle_ratio=0.2, seed=seed)
        return [head_status(s3, bucket, key) for _ in range(200)]

    first = statuses(7)
    throttled = first.count(503)
    assert set(first) == {200, 503}
    assert 20 <= throttled <= 60  # 20% of 200, give or take 3.5 standard deviations
    assert proxy.summary()["throttled"] == throttled
    assert statuses(7) == first  # the same seed throttles the same requests
    assert statuses(8) != first


def test_peak_in_flight_counts_concurrent_requests(moto_s3, proxy: ThrottlingProxy) -> None:
    """Four clients whose requests are held in the proxy until all four have arrived: the peak is
    four exactly (the deny rule runs inside the proxy, after a request counts as in flight)."""
    _, bucket, _ = moto_s3
    key = f"peak-{uuid.uuid4().hex}"
    s3 = client(proxy.endpoint_url)
    s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    all_arrived = threading.Barrier(4, timeout=30)

    def hold_until_all_arrived(method: str, path: str, query: str) -> bool:
        all_arrived.wait()
        return False

    proxy.reset(deny=hold_until_all_arrived)
    results: list[int] = []
    clients = [client(proxy.endpoint_url) for _ in range(4)]
    threads = [
        threading.Thread(target=lambda own=own: results.append(head_status(own, bucket, key)))
        for own in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 4
    assert proxy.summary()["peak_in_flight"] == 4
    proxy.reset()
    head_status(s3, bucket, key)
    assert proxy.summary()["peak_in_flight"] == 1  # a reset starts the peak afresh


@pytest.mark.parametrize(
    ("drop", "applied"), [(False, False), (False, True), (True, True)], ids=["stall", "stall-applied", "drop"]
)
def test_a_stalled_or_dropped_request_gets_no_answer_and_reaches_moto_only_when_applied(
    moto_s3, proxy: ThrottlingProxy, drop: bool, applied: bool
) -> None:
    _, bucket, _ = moto_s3
    key = f"stall-{uuid.uuid4().hex}"
    impatient = boto3.client(
        "s3",
        endpoint_url=proxy.endpoint_url,
        region_name="us-east-1",
        config=Config(read_timeout=0.5, retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    proxy.reset(stall=Stall(lambda method, path, query: method == "PUT", drop=drop, applied=applied))
    with pytest.raises(ConnectionClosedError if drop else ReadTimeoutError):
        impatient.put_object(Bucket=bucket, Key=key, Body=b"x")
    assert proxy.wait_idle()
    assert head_status(client(proxy.endpoint_url), bucket, key) == (200 if applied else 404)
    summary = proxy.summary()
    assert summary["requests"] == 2 and summary["unanswered"] == 1  # the PUT; the HEAD was answered
    assert (summary["dropped"], summary["stalled"]) == ((1, 0) if drop else (0, 1))
    assert [r.fault for r in proxy.requests] == ["drop" if drop else "stall", ""]


def test_a_client_that_waits_out_a_stall_gets_its_answer(moto_s3, proxy: ThrottlingProxy) -> None:
    """A stall ends when the client leaves or after its `seconds`; a client still there is answered
    (a slow store, not a lost answer), and only the first `times` requests it picks are held."""
    _, bucket, _ = moto_s3
    key = f"slow-{uuid.uuid4().hex}"
    s3 = client(proxy.endpoint_url)
    s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    proxy.reset(stall=Stall(lambda method, path, query: method == "HEAD", times=1, seconds=0.2))
    assert [head_status(s3, bucket, key) for _ in range(2)] == [200, 200]
    assert [(r.status, r.fault) for r in proxy.requests] == [(200, "stall"), (200, "")]
    assert proxy.requests[0].seconds >= 0.2  # held its full stall: the client stayed
    assert proxy.summary()["unanswered"] == 0


def control(endpoint_url: str, name: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    parts = urlsplit(endpoint_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        method = "GET" if body is None else "POST"
        connection.request(method, f"/__proxy__/{name}", body=json.dumps(body or {}).encode())
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, answer
        return answer
    finally:
        connection.close()


def start_standalone(tmp_path: Path, *options: str) -> tuple[subprocess.Popen, dict[str, Any]]:
    """`python -m tests.s3.proxy` started, and the URLs it printed once both servers listen."""
    port_file = tmp_path / "s3.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.s3.proxy", *options, "--port-file", str(port_file)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    urls = json.loads(process.stdout.readline())
    assert json.loads(port_file.read_text()) == urls
    return process, urls


def test_the_standalone_process_serves_moto_and_is_steered_over_http(tmp_path: Path) -> None:
    process, urls = start_standalone(tmp_path, "--latency-ms", "20")
    try:
        boto3.client("s3", endpoint_url=urls["moto_url"], region_name="us-east-1").create_bucket(Bucket="src")
        s3 = client(urls["endpoint_url"])
        s3.put_object(Bucket="src", Key="t/a", Body=b"abc")
        s3.list_objects_v2(Bucket="src", Prefix="t/")
        ledger = control(urls["endpoint_url"], "ledger")
        assert ledger["requests"] == 2 and ledger["by_kind"]["PUT"] == ledger["by_kind"]["LIST"] == 1
        assert ledger["latency_s"] == 0.02 and ledger["peak_in_flight"] == 1

        assert control(urls["endpoint_url"], "copy", {"source_bucket": "src", "target_bucket": "dst"}) == {
            "copied": 1
        }
        control(urls["endpoint_url"], "reset", {"latency_ms": 0, "throttle_ratio": 0, "scope": "s3://dst/t"})
        assert s3.get_object(Bucket="dst", Key="t/a")["Body"].read() == b"abc"
        assert head_status(s3, "src", "t/a") == 200  # outside the scope: billed apart
        ledger = control(urls["endpoint_url"], "ledger?requests=1")
        assert ledger["requests"] == 1 and ledger["latency_s"] == 0  # the copy itself billed nothing
        assert (ledger["scope"], ledger["strays"]) == ("/dst/t", 1)
        assert ledger["request_list"][0]["path"] == "/dst/t/a"
        assert control(urls["endpoint_url"], "drop", {"bucket": "dst"}) == {"dropped": True}
        (tmp_path / "local" / "d").mkdir(parents=True)
        (tmp_path / "local" / "d" / "f").write_bytes(b"local")
        loaded = control(
            urls["endpoint_url"],
            "load",
            {"bucket": "upl", "prefix": "p", "directory": str(tmp_path / "local")},
        )
        assert loaded == {"loaded": 1}
        assert s3.get_object(Bucket="upl", Key="p/d/f")["Body"].read() == b"local"
        assert head_status(s3, "dst", "t/a") == 404
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def listed(s3: Any, bucket: str, **kwargs: Any) -> tuple[list[str], list[str]]:
    """(keys, common prefixes) of a paginated ListObjectsV2, pages of 3 (several tokens per listing)."""
    keys: list[str] = []
    folders: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 3}, **kwargs
    ):
        keys += [item["Key"] for item in page.get("Contents", [])]
        folders += [item["Prefix"] for item in page.get("CommonPrefixes", [])]
    return keys, folders


def test_the_standalone_listing_answers_as_moto_does(tmp_path: Path, moto_s3) -> None:
    """The standalone process lists by bisection (tests/s3/fast_listing.py); the session's moto lists
    as shipped: both answer every listing the same, before and after keys come and go."""
    names = ["a", "t/b/1", "t/b/2", "t/c", "t/d/1", "t/d/x/2", "t/e", "u/1", "t/b0"]
    queries: list[dict[str, Any]] = [
        {},
        {"Prefix": "t/"},
        {"Prefix": "t/", "Delimiter": "/"},
        {"Delimiter": "/"},
        {"Prefix": "t/", "StartAfter": "t/b/1"},
        {"Prefix": "t/", "Delimiter": "/", "StartAfter": "t/b/"},
        {"Prefix": "t/", "StartAfter": "t/c"},
        {"Prefix": "v/"},
    ]
    process, urls = start_standalone(tmp_path)
    try:
        boto3.client("s3", endpoint_url=urls["moto_url"], region_name="us-east-1").create_bucket(Bucket="lst")
        fast = client(urls["endpoint_url"])
        for name in names:
            fast.put_object(Bucket="lst", Key=name, Body=b"")
        expected_all = sorted(names)
        assert listed(fast, "lst")[0] == expected_all
        assert control(urls["endpoint_url"], "listing") == {"pages": 3}  # 9 keys, pages of 3, by bisection
        answers = [listed(fast, "lst", **query) for query in queries]
        assert answers[2] == (["t/b0", "t/c", "t/e"], ["t/b/", "t/d/"])
        assert answers[4][0] == ["t/b/2", "t/b0", "t/c", "t/d/1", "t/d/x/2", "t/e"]
        assert answers[5] == (["t/b0", "t/c", "t/e"], ["t/d/"])
        assert answers[7] == ([], [])
        shipped_url, _, _ = moto_s3
        shipped = client(shipped_url)
        bucket = f"lst-{uuid.uuid4().hex[:12]}"
        shipped.create_bucket(Bucket=bucket)
        for name in names:
            shipped.put_object(Bucket=bucket, Key=name, Body=b"")
        assert [listed(shipped, bucket, **query) for query in queries] == answers
        fast.delete_object(Bucket="lst", Key="t/c")
        fast.put_object(Bucket="lst", Key="t/ca", Body=b"")
        assert listed(fast, "lst", Prefix="t/", Delimiter="/")[0] == ["t/b0", "t/ca", "t/e"]
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
