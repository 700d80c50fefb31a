"""Shared fixtures for unit tests.

`moto_s3` runs one real moto S3 server on loopback for the whole session, so S3 code paths (s3fs,
botocore, conditional puts, DeleteObjects) are exercised over HTTP rather than through mocks.
Tests share the bucket and must write under their own unique prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

MOTO_BUCKET = "paimon-test"
MOTO_REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(endpoint_url, bucket, storage_options) of a moto S3 server on 127.0.0.1 with one bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint_url = f"http://{host}:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=MOTO_REGION,
        )
        client.create_bucket(Bucket=MOTO_BUCKET)
        storage_options = {
            "endpoint_url": endpoint_url,
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"region_name": MOTO_REGION},
        }
        yield endpoint_url, MOTO_BUCKET, storage_options
    finally:
        server.stop()
