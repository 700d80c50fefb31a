"""S3 fixtures: the throttling proxy in front of the session's moto server, a fresh prefix per test."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
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


@pytest.fixture
def age_s3_objects(moto_s3) -> Callable[[list[str], float], None]:
    """`age(paths, seconds)`: move the objects' Last-Modified on the moto server `seconds` back.

    S3 has no utime: an object's modification time is its upload time, so a test that needs old
    files (an orphan past remove-orphan-files' `older_than`) makes the server remember them as old,
    as a real lake's forgotten files are. The job and its safety settings stay untouched.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    _, bucket, _ = moto_s3

    def age(paths: list[str], seconds: float) -> None:
        keys = s3_backends[DEFAULT_ACCOUNT_ID]["global"].buckets[bucket].keys
        for path in paths:
            key = keys[path.removeprefix(f"s3://{bucket}/")]
            key.last_modified = key.last_modified - dt.timedelta(seconds=seconds)

    return age
