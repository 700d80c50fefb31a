"""The object store of the benchmark: moto's S3 server and the latency proxy in a process of their own
(`python -m tests.s3.proxy`), so the jobs' processes share no GIL with them, steered over HTTP.

Tables go up once, straight into moto (not through the proxy: uploading is not what is measured; put
by the store's own process from this machine's disk, which moto's HTTP PUT would take minutes for), one
bucket per table: moto lists a bucket by scanning all its keys, so a listing's cost must not grow with
the other tables' objects. A destructive job gets a fresh copy of its table's bucket, made inside moto
(`copy`, no request billed) and dropped after the run.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
# The jobs find credentials where production does, in the AWS environment; moto takes any.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
}


class Store:
    """The running moto + proxy process (started by `start`, ended by `stop`: only the one we started)."""

    def __init__(self, process: subprocess.Popen, endpoint_url: str, moto_url: str) -> None:
        self.process = process
        self.endpoint_url = endpoint_url
        self.moto_url = moto_url

    @staticmethod
    def start(workdir: Path) -> Store:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.s3.proxy", "--port-file", str(workdir / "s3.json")],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **AWS_ENV},
        )
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once moto and the proxy listen
        if not line:
            raise RuntimeError(f"the S3 process ended before it listened (exit {process.wait()})")
        urls = json.loads(line)
        return Store(process, urls["endpoint_url"], urls["moto_url"])

    def stop(self) -> None:
        """Stop the store's process; one holding a million keys may not exit in time: then kill it."""
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=60)

    def storage_options(self) -> dict[str, Any]:
        """What a job's YAML carries to reach the store through the proxy (credentials: AWS_ENV)."""
        # moto serves one request at a time, a LIST page of a million-key bucket in 0.1-0.5 s: the
        # ~100 pages a listing keeps in flight queue there for longer than botocore's 60 s read
        # timeout, and a timed-out request stays in moto's queue. S3 serves them at once.
        return {
            "endpoint_url": self.endpoint_url,
            "client_kwargs": {"region_name": REGION},
            "config_kwargs": {"read_timeout": 600},
        }

    def control(self, name: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        parts = urlsplit(self.endpoint_url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
        try:
            connection.request(
                "GET" if body is None else "POST", f"/__proxy__/{name}", body=json.dumps(body or {}).encode()
            )
            response = connection.getresponse()
            answer = json.loads(response.read())
        finally:
            connection.close()
        if response.status != 200:
            raise RuntimeError(f"proxy control {name}: {response.status} {answer}")
        return answer

    def reset(self, latency_ms: float, throttle_ratio: float, seed: int = 0) -> None:
        self.control("reset", {"latency_ms": latency_ms, "throttle_ratio": throttle_ratio, "seed": seed})

    def ledger(self) -> dict[str, Any]:
        return self.control("ledger")

    def copy(self, source_bucket: str, target_bucket: str) -> int:
        return int(
            self.control("copy", {"source_bucket": source_bucket, "target_bucket": target_bucket})["copied"]
        )

    def drop(self, bucket: str) -> None:
        self.control("drop", {"bucket": bucket})

    def upload(self, local_dir: Path, bucket: str, prefix: str) -> int:
        """Every file under `local_dir` to s3://bucket/prefix/..., put by the store's process itself
        (the `load` control; moto's HTTP PUT would take minutes at 100,000 objects); the count."""
        return int(
            self.control("load", {"bucket": bucket, "prefix": prefix, "directory": str(local_dir)})["loaded"]
        )
