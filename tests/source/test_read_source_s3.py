"""`spark.read.format("paimon")` on S3 (moto behind the project's proxy): storage options reach the
planning worker and the executors, and a pushed partition filter leaves the other partitions' data
files unread, counted as requests through the proxy."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.source import register
from jobs.source.scan import open_read, plan_read, read_options, sort_terms
from paimon_format.storage.fileio import FileIO
from tests.java.helpers import _spelled
from tests.java.oracle import sort_key
from tests.s3.proxy import ThrottlingProxy

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def proxy(moto_s3: Any) -> Iterator[ThrottlingProxy]:
    with ThrottlingProxy(moto_s3[0]) as running:
        yield running


def test_a_partition_filter_reads_fewer_objects_and_the_same_rows(
    spark_session, moto_s3, proxy, java_templates
):
    register(spark_session)
    warehouse, fixtures = java_templates
    table = fixtures["pk_changelog"]
    options = {"endpoint_url": proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    root = f"s3://{moto_s3[1]}/source-{uuid.uuid4().hex[:12]}/db.db/{table.name}"
    FileIO.for_path(root, options).fs.put(table.path(warehouse) + "/", root + "/", recursive=True)
    latest = max(int(n) for kind, n in table.reads if kind == "snapshot")
    local = open_read(read_options({"path": table.path(warehouse)}))
    all_files = plan_read(local, sort_terms(local, []), 2).record["files"]
    proxy.reset()

    frame = spark_session.read.format("paimon").option("storage_options", json.dumps(options)).load(root)
    frame = frame.where("dt = DATE '2024-01-03' AND region = 'eu/west'")
    rows = sorted((_spelled(row) for row in frame.toArrow().to_pylist()), key=sort_key)

    expected = [
        r
        for r in table.reads[("snapshot", str(latest))]
        if str(r["dt"]) == "2024-01-03" and r["region"] == "eu/west"
    ]
    assert rows == expected and expected
    data_gets = sum(1 for r in proxy.requests if r.kind == "GET" and "/bucket-" in r.path)
    assert 0 < data_gets < all_files  # only the selected partition's files, each fetched once
