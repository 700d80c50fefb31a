"""S3 fixtures: the throttling proxy in front of the session's moto server, a fresh prefix per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.s3.proxy import ThrottlingProxy


@pytest.fixture(scope="session")
def s3_proxy(moto_s3) -> Iterator[ThrottlingProxy]:
    endpoint_url, _, _ = moto_s3
    with ThrottlingProxy(endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def s3(moto_s3, s3_proxy) -> tuple[str, dict[str, Any], ThrottlingProxy]:
    """(a fresh s3:// prefix, storage options without credentials, the proxy they go through).

    Credentials come from the AWS environment (tests/conftest.py), as in production.
    """
    _, bucket, _ = moto_s3
    s3_proxy.reset()
    options = {"endpoint_url": s3_proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    return f"s3://{bucket}/t-{uuid.uuid4().hex[:12]}", options, s3_proxy
