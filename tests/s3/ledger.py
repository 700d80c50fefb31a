"""The proxy's bill, apart from its server: what one request was (`Request`), its kind (`classify`),
whether it is a test's own (`in_scope`: a key under the test's prefix) and how long a set of requests
kept the store busy (`busy_seconds`). Pure functions of what the proxy saw, so they are tested alone
(tests/s3/test_proxy.py) and read the same in the proxy and in a benchmark's summary."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs
from xml.sax.saxutils import unescape

KINDS = ("GET", "HEAD", "LIST", "PUT", "DELETE", "DeleteObjects", "OTHER")
# Query keys of a bucket-level GET that make it a listing (ListObjects / ListObjectsV2 and their pages).
_LIST_KEYS = {"list-type", "prefix", "delimiter", "marker", "continuation-token", "start-after", "max-keys"}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    status: int
    key_id: str | None
    conditional: bool  # If-None-Match on a PUT: a create-if-absent
    kind: str = "OTHER"  # one of KINDS
    bytes_in: int = 0  # request body
    bytes_out: int = 0  # response body
    seconds: float = 0.0  # arrival to answer, the added latency included
    upstream_seconds: float = 0.0  # moto's own time for it (0 when the proxy answered itself)
    upstream_start: float = 0.0  # when it went to moto (time.perf_counter of the proxy's process)
    deleted_keys: int = 0  # keys named by a DeleteObjects body
    fault: str = ""  # "stall", "drop" or "conflict" when a `Stall` picked it; status 0: it got no answer


def classify(method: str, path: str, query: str) -> str:
    """The request's kind on S3's path-style API (`/bucket` or `/bucket/key`, query unparsed).

    A GET on the bucket itself is a LIST when it carries a listing parameter (or none at all);
    `POST /bucket?delete` is a DeleteObjects batch; object GET/PUT/DELETE with a sub-resource
    (?tagging, ?acl, multipart parts and uploads) and everything else count as OTHER.
    """
    keys = set(parse_qs(query, keep_blank_values=True))
    on_bucket = "/" not in path.strip("/")
    if method == "HEAD":
        return "HEAD"
    if method == "POST":
        return "DeleteObjects" if "delete" in keys else "OTHER"
    if on_bucket:
        return "LIST" if method == "GET" and (not keys or keys & _LIST_KEYS) else "OTHER"
    if keys - {"x-id", "versionId"}:
        return "OTHER"
    return {"GET": "GET", "PUT": "PUT", "DELETE": "DELETE"}.get(method, "OTHER")


def scope_path(scope: str) -> str:
    """`s3://bucket/prefix`, `bucket/prefix` or `/bucket/prefix` as the proxy sees paths: `/bucket/prefix`
    ("" for no scope at all)."""
    for scheme in ("s3://", "s3a://"):
        scope = scope.removeprefix(scheme)
    scope = scope.strip("/")
    return f"/{scope}" if scope else ""


_KEY_ELEMENT = re.compile(rb"<Key>(.*?)</Key>", re.DOTALL)


def in_scope(scope: str, method: str, path: str, query: str, body: bytes = b"") -> bool:
    """Whether a request (path-style, `path` unquoted, `query` raw) is for a key under `scope`
    (a `scope_path`; "" takes everything): an object request by its key, a listing by its `prefix`,
    a DeleteObjects batch by the keys its body names (any of them). A bucket-level request without
    keys (a listing of the whole bucket, a HEAD of the bucket) is outside any prefix."""
    if not scope:
        return True
    bucket, _, under = scope.strip("/").partition("/")
    name, _, key = path.strip("/").partition("/")
    if name != bucket:
        return False
    if not under:
        return True
    if key:
        keys = [key]
    elif method == "POST":
        keys = [unescape(found.decode()) for found in _KEY_ELEMENT.findall(body)]
    else:
        keys = parse_qs(query, keep_blank_values=True).get("prefix", [])
    return any(found == under or found.startswith(f"{under}/") for found in keys)


def busy_seconds(spans: list[tuple[float, float]]) -> float:
    """The length of the union of (start, duration) spans: how long something was busy at all."""
    busy, end = 0.0, float("-inf")
    for start, duration in sorted(spans):
        if duration <= 0:
            continue
        finish = start + duration
        if finish > end:
            busy += finish - max(start, end)
            end = finish
    return busy
