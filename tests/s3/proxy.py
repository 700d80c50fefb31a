"""A tiny loopback HTTP proxy in front of moto that can answer 503 SlowDown and records every request.

Why: moto never throttles and never tells how many requests a job sent. Behind this proxy a test can
make S3 throttle (the first N requests, or every k-th) or deny chosen requests (403 AccessDenied,
which no client retries), and count what went over the wire: DeleteObjects batches, listing pages,
conditional puts and their 412s, the access key that signed.
"""

from __future__ import annotations

import http.client
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>proxy</RequestId></Error>"
)
ACCESS_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message><RequestId>proxy</RequestId></Error>"
)
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
_KEY_ID = re.compile(r"Credential=([^/]+)/")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    status: int
    key_id: str | None
    conditional: bool  # If-None-Match on a PUT: a create-if-absent


# Decides from (method, path, unquoted query) whether the proxy answers 403 AccessDenied.
DenyRule = Callable[[str, str, str], bool]


class ThrottlingProxy:
    """Forward to `upstream`; `throttle_first` / `throttle_every` decide which requests get 503,
    `deny` which get 403."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.requests: list[Request] = []
        self.throttle_first = 0
        self.throttle_every = 0
        self.deny: DenyRule | None = None
        self._seen = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
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

    def reset(self, throttle_first: int = 0, throttle_every: int = 0, deny: DenyRule | None = None) -> None:
        with self._lock:
            self.requests.clear()
            self._seen = 0
            self.throttle_first, self.throttle_every = throttle_first, throttle_every
            self.deny = deny

    def count(self, method: str | None = None, query: str = "", status: int | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if (method is None or r.method == method)
            and query in r.query
            and (status is None or r.status == status)
        )

    def _throttle(self) -> bool:
        with self._lock:
            self._seen += 1
            seen = self._seen
        if seen <= self.throttle_first:
            return True
        return bool(self.throttle_every) and seen % self.throttle_every == 0

    def _denied(self, handler: BaseHTTPRequestHandler) -> bool:
        parts = urlsplit(handler.path)
        deny = self.deny
        return deny is not None and deny(handler.command, unquote(parts.path), unquote(parts.query))

    def _record(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        parts = urlsplit(handler.path)
        match = _KEY_ID.search(handler.headers.get("Authorization", ""))
        conditional = handler.command == "PUT" and "If-None-Match" in handler.headers
        with self._lock:
            self.requests.append(
                Request(
                    handler.command, parts.path, parts.query, status, match and match.group(1), conditional
                )
            )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

            def _error(self, status: int, body: bytes) -> None:
                proxy._record(self, status)
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if proxy._throttle():
                    self._error(503, SLOW_DOWN)
                    return
                if proxy._denied(self):
                    self._error(403, ACCESS_DENIED)
                    return
                upstream = http.client.HTTPConnection(
                    proxy.upstream.hostname, proxy.upstream.port, timeout=60
                )
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                finally:
                    upstream.close()
                proxy._record(self, response.status)
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() in _HOP_HEADERS or (
                        key.lower() == "content-length" and self.command != "HEAD"
                    ):
                        continue  # HEAD keeps the object's Content-Length; a body gets its own
                    self.send_header(key, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler
