"""A loopback HTTP proxy in front of moto: an object store's latency, its 503 SlowDown, and its request bill.

Why: moto never throttles, answers in microseconds and never tells how many requests a job sent. Behind
this proxy a test or a benchmark can make S3 slow (`latency_s` before every request is forwarded, as a
real store's time to first byte), make it throttle (the first N requests, every k-th, or a seeded
pseudo-random share), deny chosen requests (403 AccessDenied, which no client retries), stall or drop
chosen requests (`Stall`: a store that stops answering mid-request, having applied it or not, so a
client's read timeout fires or its connection is cut), and read the bill: every request classified
by kind (GET, HEAD, LIST, PUT, DELETE, DeleteObjects, OTHER), its bytes in and out, status, time,
and the peak number of requests in flight at once.

A test confines all of that to its own prefix with `scope` (`reset(throttle_first=4, scope=prefix)`):
the test session shares one proxy, and a request of an earlier test still on its way (a Spark task of a
failed job that runs on until it is killed, a read-ahead thread) must neither take one of the 503s
(or stalls, or denials) this test planned for its own requests nor appear on its bill. A request for a
key outside the scope is forwarded untouched and booked apart, in `strays`.

In a test the proxy runs in the test's process (`ThrottlingProxy`, the `s3_proxy` fixture). A
benchmark runs moto and the proxy in a process of their own, so the process running the jobs never
shares its GIL with them:

    python -m tests.s3.proxy --latency-ms 30 --port-file /tmp/s3.json

writes {"endpoint_url": <proxy>, "moto_url": <moto itself>} to the port file (and as one line to
stdout, once both listen) and is steered over HTTP
on a reserved path (no bucket name has underscores, so it never collides with S3's key space):
`POST /__proxy__/reset` (JSON: latency_ms, throttle_ratio, seed, throttle_first, throttle_every, scope),
`GET /__proxy__/ledger` (the summary; `?requests=1` adds every request), and, in that process only,
`POST /__proxy__/copy` (JSON: source_bucket, target_bucket: a bucket's objects copied inside moto,
no request billed), `POST /__proxy__/drop` (JSON: bucket: forgotten with its objects) and
`POST /__proxy__/load` (JSON: bucket, prefix, directory: a local directory's files put inside moto).
There moto lists a page by bisection instead of scanning the bucket (tests/s3/fast_listing.py;
`GET /__proxy__/listing` counts the pages it answered).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import random
import re
import select
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.s3 import fast_listing
from tests.s3.ledger import KINDS, Request, busy_seconds, classify, in_scope, scope_path

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>proxy</RequestId></Error>"
)
CONFLICT = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code>'
    b"<Message>A conditional operation is in progress.</Message><RequestId>proxy</RequestId></Error>"
)
ACCESS_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message><RequestId>proxy</RequestId></Error>"
)
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
_KEY_ID = re.compile(r"Credential=([^/]+)/")
CONTROL_PREFIX = "/__proxy__/"
# Decides from (method, path, unquoted query) whether the proxy answers 403 AccessDenied.
DenyRule = Callable[[str, str, str], bool]


@dataclass
class Stall:
    """Which requests the proxy stalls or drops, and how: the first `times` requests `match` picks
    (0: every one it picks).

    `applied`: the request reaches moto first (the store did it; only the answer is lost, the
    ambiguous case of a non-idempotent write) or never does. Then the proxy either closes the
    connection without an answer (`drop`), or holds the answer until the client gives up and closes
    its connection (its read timeout fired), at most `seconds`, and answers if the client is still
    there (a slow, not a lost, answer). Holding ends when the client leaves, not after a fixed time,
    so a test's client timeout can be short without racing the proxy. `conflict`: answer at once,
    unapplied, 409 ConditionalRequestConflict (S3: a conditional write to the key is in progress).
    """

    match: DenyRule
    times: int = 1
    drop: bool = False
    applied: bool = False
    seconds: float = 30.0
    conflict: bool = False
    picked: int = 0  # requests picked so far (the proxy's count, under its lock)


# Answers a control request under /__proxy__/<name>: (name, parsed JSON body) -> JSON-able answer.
ControlAction = Callable[[dict[str, Any]], Any]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a pool opening 64 connections at once must not wait for SYN retries

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed or reset its kept-alive connection (a job process ending, a timeout)
        is no error of the proxy's; anything else is printed as socketserver does."""
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class ThrottlingProxy:
    """Forward to `upstream` after `latency_s`; `throttle_first` / `throttle_every` / `throttle_ratio`
    decide which requests get 503, `deny` which get 403; `requests` and `summary()` are the ledger.
    With a `scope` all of it concerns only requests for keys under it; the others are `strays`."""

    def __init__(
        self, upstream: str, latency_s: float = 0.0, throttle_ratio: float = 0.0, port: int = 0
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.requests: list[Request] = []
        self.strays: list[Request] = []  # requests outside the scope: forwarded untouched, billed apart
        self.scope = ""  # a `scope_path`: "" for every request
        self.throttle_first = 0
        self.throttle_every = 0
        self.throttle_ratio = throttle_ratio
        self.latency_s = latency_s
        self.deny: DenyRule | None = None
        self.stall: Stall | None = None
        self.on_write: Callable[[str], None] | None = None  # told the bucket after each forwarded write
        self.controls: dict[str, ControlAction] = {
            "reset": self._reset_from_json,
            "ledger": lambda body: self.summary(with_requests=bool(body.get("requests"))),
        }
        self._seen = 0
        self._random = random.Random(0)
        self._in_flight = 0
        self._peak_in_flight = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified as requests leave flight
        # moto checks If-None-Match and then stores, in each request's own thread: two concurrent
        # create-if-absent PUTs of one key could both succeed, which S3 never lets happen
        self._conditional_puts = threading.Lock()
        self._upstreams = threading.local()
        self._server = _Server(("127.0.0.1", port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ThrottlingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(
        self,
        throttle_first: int = 0,
        throttle_every: int = 0,
        deny: DenyRule | None = None,
        latency_s: float = 0.0,
        throttle_ratio: float = 0.0,
        seed: int = 0,
        stall: Stall | None = None,
        scope: str = "",
    ) -> None:
        """A fresh ledger and these settings (everything left out: off).

        `scope` (`s3://bucket/prefix`): the latency, the 503s, the denials, the stalls and the ledger
        concern only requests for keys under it (`in_scope`), so nothing else in the session can take
        a 503 a test planned for its own requests (the first N are the first N of its own); any other
        request is forwarded at once, unharmed, and booked in `strays`."""
        with self._lock:
            self.requests.clear()
            self.strays.clear()
            self.scope = scope_path(scope)
            self._seen = 0
            self._peak_in_flight = self._in_flight
            self.throttle_first, self.throttle_every = throttle_first, throttle_every
            self.latency_s, self.throttle_ratio = latency_s, throttle_ratio
            self._random = random.Random(seed)
            self.deny = deny
            self.stall = stall

    def count(self, method: str | None = None, query: str = "", status: int | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method)
            and query in r.query
            and (status is None or r.status == status)
        )

    def summary(self, with_requests: bool = False) -> dict[str, Any]:
        """The bill since the last reset: requests by kind, bytes each way, throttled (503) and denied
        (403) answers, conditional puts, keys named by DeleteObjects, the peak in flight at once, and
        moto's own time: `upstream_s` sums it over forwarded requests (queueing included when many
        wait on moto at once), `upstream_busy_s` is how long moto had at least one request (its cost
        when it serves them one at a time, as its single GIL mostly does)."""
        with self._lock:
            requests = list(self.requests)
            peak = self._peak_in_flight
        kinds = Counter(r.kind for r in requests)
        summary: dict[str, Any] = {
            "requests": len(requests),
            "by_kind": {kind: kinds.get(kind, 0) for kind in KINDS},
            "bytes_in": sum(r.bytes_in for r in requests),
            "bytes_out": sum(r.bytes_out for r in requests),
            "throttled": sum(1 for r in requests if r.status == 503),
            "denied": sum(1 for r in requests if r.status == 403),
            "conditional_puts": sum(1 for r in requests if r.conditional),
            "stalled": sum(1 for r in requests if r.fault == "stall"),
            "dropped": sum(1 for r in requests if r.fault == "drop"),
            "unanswered": sum(1 for r in requests if r.status == 0),
            "deleted_keys": sum(r.deleted_keys for r in requests),
            "peak_in_flight": peak,
            "upstream_s": sum(r.upstream_seconds for r in requests),
            "upstream_busy_s": busy_seconds([(r.upstream_start, r.upstream_seconds) for r in requests]),
            "latency_s": self.latency_s,
            "throttle_ratio": self.throttle_ratio,
            "scope": self.scope,
            "strays": len(self.strays),
        }
        if with_requests:
            summary["request_list"] = [asdict(r) for r in requests]
        return summary

    def _reset_from_json(self, body: dict[str, Any]) -> dict[str, Any]:
        self.reset(
            throttle_first=int(body.get("throttle_first", 0)),
            throttle_every=int(body.get("throttle_every", 0)),
            latency_s=float(body.get("latency_ms", 0)) / 1000,
            throttle_ratio=float(body.get("throttle_ratio", 0)),
            seed=int(body.get("seed", 0)),
            scope=str(body.get("scope", "")),
        )
        return {"latency_s": self.latency_s, "throttle_ratio": self.throttle_ratio}

    def _arrive(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)

    def _throttle(self) -> bool:
        """Whether this request gets 503: the first N, every k-th, or a seeded draw under the ratio
        (one draw per request in arrival order, so a run's share is reproducible)."""
        with self._lock:
            self._seen += 1
            seen = self._seen
            drawn = self._random.random() < self.throttle_ratio if self.throttle_ratio else False
        if seen <= self.throttle_first:
            return True
        return drawn or (bool(self.throttle_every) and seen % self.throttle_every == 0)

    def _denied(self, handler: BaseHTTPRequestHandler) -> bool:
        parts = urlsplit(handler.path)
        deny = self.deny
        return deny is not None and deny(handler.command, unquote(parts.path), unquote(parts.query))

    def _stall_for(self, handler: BaseHTTPRequestHandler) -> Stall | None:
        """The `Stall` that picks this request (counting it), or None."""
        parts = urlsplit(handler.path)
        with self._lock:
            stall = self.stall
            if stall is None or (stall.times and stall.picked >= stall.times):
                return None
            if not stall.match(handler.command, unquote(parts.path), unquote(parts.query)):
                return None
            stall.picked += 1
            return stall

    def _record(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        sent: int,
        started: float,
        upstream_s: float,
        upstream_start: float = 0.0,
        fault: str = "",
        stray: bool = False,
    ) -> None:
        """Book the request and count it out of flight (before its answer is written, so a client that
        has its answer always finds it in the ledger); a stray, never in flight, in `strays`."""
        parts = urlsplit(handler.path)
        match = _KEY_ID.search(handler.headers.get("Authorization", ""))
        kind = classify(handler.command, unquote(parts.path), parts.query)
        request = Request(
            method=handler.command,
            path=parts.path,
            query=parts.query,
            status=status,
            key_id=match and match.group(1),
            conditional=handler.command == "PUT" and "If-None-Match" in handler.headers,
            kind=kind,
            bytes_in=len(body),
            bytes_out=sent,
            seconds=time.perf_counter() - started,
            upstream_seconds=upstream_s,
            upstream_start=upstream_start,
            deleted_keys=body.count(b"<Key>") if kind == "DeleteObjects" else 0,
            fault=fault,
        )
        with self._lock:
            if stray:
                self.strays.append(request)
                return
            self.requests.append(request)
            self._in_flight -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Wait until no request is in the proxy (True), at most `timeout_s` (False). A client that
        gave up on a stalled request has no answer, so the proxy may book it just after the client
        moved on: a test reads the ledger after this, not after its client returned."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout_s)

    def _send_upstream(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, headers, body) of one request over this thread's kept-alive connection to moto (a
        fresh TCP connection per request costs more than moto does); a connection moto closed
        meanwhile is reopened once."""
        for attempt in (0, 1):
            connection = getattr(self._upstreams, "connection", None)
            fresh = connection is None
            if connection is None:
                connection = http.client.HTTPConnection(
                    self.upstream.hostname, self.upstream.port, timeout=120
                )
                self._upstreams.connection = connection
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (ConnectionError, http.client.BadStatusLine):
                connection.close()
                self._upstreams.connection = None
                if fresh or attempt:
                    raise
                continue
            if (response.getheader("Connection") or "").lower() == "close":
                connection.close()
                self._upstreams.connection = None
            return response.status, response.getheaders(), data
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

            def _answer(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
                try:
                    self.send_response(status)
                    for key, value in headers:
                        self.send_header(key, value)
                    if self.command != "HEAD":
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up waiting (its timeout): it is booked

            def _control(self, body: bytes) -> None:
                name = urlsplit(self.path).path.removeprefix(CONTROL_PREFIX)
                action = proxy.controls.get(name)
                arguments = json.loads(body) if body else {}
                arguments.update({k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()})
                try:
                    status, answer = (200, action(arguments)) if action else (404, {"error": f"no {name}"})
                except Exception as error:  # a control error goes back to the caller, not to stderr
                    status, answer = 500, {"error": f"{type(error).__name__}: {error}"}
                self._answer(status, [("Content-Type", "application/json")], json.dumps(answer).encode())

            def _outwaited(self, stall: Stall, body: bytes, started: float) -> bool:
                """Drop the connection, or hold it until the client leaves (at most `stall.seconds`):
                False, the request booked unanswered (status 0); True when the client waited it out."""
                if not stall.drop:
                    readable, _, _ = select.select([self.connection], [], [], stall.seconds)
                    try:  # readable with nothing to read: the client closed its end
                        left = bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:  # reset by the client: it left as well
                        left = True
                    if not left:
                        return True
                proxy._record(self, 0, body, 0, started, 0.0, fault="drop" if stall.drop else "stall")
                self.close_connection = True  # closed without a word: the client sees the connection end
                return False

            def _upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes, float, float]:
                """(status, headers, body, moto's seconds, when it went) of this request sent to moto:
                a create-if-absent PUT one at a time, and moto gone is a 502 (still booked)."""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                upstream_start = time.perf_counter()
                atomic = (
                    proxy._conditional_puts
                    if self.command == "PUT" and "If-None-Match" in self.headers
                    else None
                )
                try:
                    with atomic or contextlib.nullcontext():
                        status, upstream_headers, data = proxy._send_upstream(
                            self.command, self.path, body, headers
                        )
                except (OSError, http.client.HTTPException) as failure:
                    status, upstream_headers, data = 502, [], f"proxy: {failure}".encode()
                if proxy.on_write is not None and self.command not in ("GET", "HEAD"):
                    proxy.on_write(unquote(urlsplit(self.path).path).strip("/").split("/")[0])
                return status, upstream_headers, data, time.perf_counter() - upstream_start, upstream_start

            def _pass_on(self, status: int, upstream_headers: list[tuple[str, str]], data: bytes) -> None:
                kept = [
                    (key, value)
                    for key, value in upstream_headers
                    if key.lower() not in _HOP_HEADERS
                    # HEAD keeps the object's Content-Length; a body gets its own
                    and not (key.lower() == "content-length" and self.command != "HEAD")
                ]
                self._answer(status, kept, data)

            def _stray(self, body: bytes, started: float) -> None:
                """A request outside the scope: to moto and back untouched, booked in `strays`."""
                status, upstream_headers, data, upstream_s, upstream_start = self._upstream(body)
                sent = 0 if self.command == "HEAD" else len(data)
                proxy._record(self, status, body, sent, started, upstream_s, upstream_start, stray=True)
                self._pass_on(status, upstream_headers, data)

            def _forward(self) -> None:
                started = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.path.startswith(CONTROL_PREFIX):
                    self._control(body)
                    return
                parts = urlsplit(self.path)
                if not in_scope(proxy.scope, self.command, unquote(parts.path), parts.query, body):
                    self._stray(body, started)
                    return
                proxy._arrive()
                if proxy.latency_s:
                    time.sleep(proxy.latency_s)  # the store's time to first byte, not synchronisation
                error = SLOW_DOWN if proxy._throttle() else ACCESS_DENIED if proxy._denied(self) else None
                if error is not None:
                    status = 503 if error is SLOW_DOWN else 403
                    sent = 0 if self.command == "HEAD" else len(error)
                    proxy._record(self, status, body, sent, started, 0.0)
                    self._answer(status, [("Content-Type", "application/xml")], error)
                    return
                stall = proxy._stall_for(self)
                if stall is not None and stall.conflict:
                    proxy._record(self, 409, body, len(CONFLICT), started, 0.0, fault="conflict")
                    self._answer(409, [("Content-Type", "application/xml")], CONFLICT)
                    return
                if stall is not None and not stall.applied and not self._outwaited(stall, body, started):
                    return
                status, upstream_headers, data, upstream_s, upstream_start = self._upstream(body)
                if stall is not None and stall.applied and not self._outwaited(stall, body, started):
                    return
                sent = 0 if self.command == "HEAD" else len(data)
                fault = "" if stall is None else "stall"
                proxy._record(self, status, body, sent, started, upstream_s, upstream_start, fault)
                self._pass_on(status, upstream_headers, data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler


# -- moto and the proxy in a process of their own ---------------------------------------------------


def _moto_controls(proxy: ThrottlingProxy) -> None:
    """The bucket-level shortcuts of the standalone process: copy a bucket's objects and drop a bucket
    inside moto, so a benchmark gets a fresh copy of a table per destructive job without uploading
    it again (and without billing those requests to the job); and a listing that costs a page, not
    the bucket (tests/s3/fast_listing.py)."""
    from moto.core import DEFAULT_ACCOUNT_ID  # moto: only in the standalone process, never on import
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    fast_listing.install(backend)
    proxy.on_write = fast_listing.changed

    def copy(body: dict[str, Any]) -> dict[str, Any]:
        source, target = body["source_bucket"], body["target_bucket"]
        if target not in backend.buckets:
            backend.create_bucket(target, "us-east-1")
        copied = 0
        for name, key in list(backend.buckets[source].keys.items()):
            backend.put_object(target, name, key.value)
            copied += 1
        fast_listing.changed(target)
        return {"copied": copied}

    def drop(body: dict[str, Any]) -> dict[str, Any]:
        bucket = backend.buckets.get(body["bucket"])
        if bucket is None:
            return {"dropped": False}
        bucket.keys.clear()  # moto deletes only empty buckets; its key store is a dict
        backend.delete_bucket(body["bucket"])
        fast_listing.changed(body["bucket"])
        return {"dropped": True}

    def load(body: dict[str, Any]) -> dict[str, Any]:
        """Every file under a local directory of this machine into bucket/prefix/..., put inside moto:
        its HTTP PUT costs milliseconds of its one GIL, so 100,000 uploads would take minutes."""
        bucket, prefix, root = body["bucket"], body["prefix"].strip("/"), body["directory"]
        if bucket not in backend.buckets:
            backend.create_bucket(bucket, "us-east-1")
        loaded = 0
        for directory, _, names in os.walk(root):
            for name in names:
                relative = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
                with open(os.path.join(directory, name), "rb") as source:
                    backend.put_object(bucket, f"{prefix}/{relative}" if prefix else relative, source.read())
                loaded += 1
        fast_listing.changed(bucket)
        return {"loaded": loaded}

    proxy.controls.update(
        copy=copy, drop=drop, load=load, listing=lambda body: {"pages": fast_listing.pages_answered}
    )


def serve(latency_ms: float, throttle_ratio: float, port_file: str, port: int = 0) -> None:
    """Moto's server and the proxy in front of it, until SIGTERM or SIGINT; their URLs go to
    `port_file` (written whole, then renamed, so a reader never sees half of it)."""
    from moto.server import ThreadedMotoServer  # moto: only in the standalone process, never on import

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request would drown the caller's log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, moto_port = moto.get_host_and_port()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with ThrottlingProxy(f"http://{host}:{moto_port}", latency_ms / 1000, throttle_ratio, port) as proxy:
        _moto_controls(proxy)
        urls = {
            "endpoint_url": proxy.endpoint_url,
            "moto_url": f"http://{host}:{moto_port}",
            "pid": os.getpid(),
        }
        with open(f"{port_file}.tmp", "w") as out:
            json.dump(urls, out)
        os.replace(f"{port_file}.tmp", port_file)
        print(json.dumps(urls), flush=True)  # one line: a parent reading stdout knows it is ready
        stop.wait()
    moto.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="moto's S3 server behind the latency/throttling proxy")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added before every request")
    parser.add_argument("--throttle", type=float, default=0.0, help="share of requests answered 503")
    parser.add_argument("--port", type=int, default=0, help="the proxy's port (0: any free one)")
    parser.add_argument("--port-file", required=True, help="where to write the URLs as JSON")
    args = parser.parse_args(argv)
    serve(args.latency_ms, args.throttle, args.port_file, args.port)


if __name__ == "__main__":
    main()
