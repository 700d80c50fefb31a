"""Test-run settings that must exist before the shared SparkSession starts, and the shared S3 server.

The AWS variables are set here, before Spark starts, because Spark's Python workers inherit the
environment of the JVM: jobs on `s3://` then find credentials the usual way (the AWS environment),
never in the YAML. They are fake on purpose: tests only ever talk to moto on loopback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.java import soak_background

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("TZ", "UTC")
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_EC2_METADATA_DISABLED="true",
)
for _name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(_name, None)

MOTO_BUCKET = "paimon-test"
MOTO_REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(endpoint_url, bucket, storage_options) of a real moto S3 server on 127.0.0.1 with one bucket.

    One server for the whole session, so S3 code paths (s3fs, botocore, conditional puts,
    DeleteObjects) run over HTTP rather than through mocks. Tests share the bucket and must write
    under their own unique prefix.
    """
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


@pytest.fixture(scope="session")
def java_paimon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Paimon's own Java implementation as an oracle: one JVM for the whole session.

    A `tests.java.oracle.JavaPaimon` (its docstring lists the requests: create tables, commit rows,
    compact, tag, branch, expire snapshots / changelogs, clean orphans, read at any snapshot, tag or
    branch). Tests that use it are marked ``java`` (``pytestmark = pytest.mark.java``).
    """
    from tests.java.oracle import JavaPaimon

    oracle = JavaPaimon(tmp_path_factory.mktemp("java-oracle") / "jvm.log")
    try:
        yield oracle
    finally:
        oracle.close()


@pytest.fixture(scope="session")
def java_templates(java_paimon: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """(template warehouse, Java-written fixture tables by name: tests/java/tables.py), built once per
    session for tests/java and tests/source alike; never modify the template, copy it."""
    from tests.java import tables

    warehouse = str(tmp_path_factory.mktemp("java-templates") / "wh")
    return warehouse, tables.build_all(java_paimon, warehouse)


@pytest.fixture
def java_warehouse(java_templates: tuple[str, dict[str, Any]], tmp_path: Any) -> str:
    """A private copy of the template warehouse (every fixture table)."""
    from tests.java import tables

    return tables.copy_warehouse(java_templates[0], str(tmp_path / "wh"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    soak_background.order_last(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    soak_background.start(session)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    soak_background.stop(session, exitstatus)
