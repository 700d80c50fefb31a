"""Driver or Spark on an object store, and throttled requests in the run record (moto behind the proxy).

The proxy adds a latency to every request, as a real store's time to first byte: the run record must
show the latency the sizing reads measured (at least what the proxy added) and why the run went where
it went. A table past the driver's limits goes to Spark whatever the estimate; `local: always` and
`local: never` still decide alone. 503 SlowDown answers are retried and counted in the record.
"""

from __future__ import annotations

import pytest

from paimon_format.storage.in_flight import allowed_in_flight, map_in_flight
from tests.support.cli_runs import run_job
from tests.support.table_states import IDENTIFIER, build_sample_table

LATENCY_S = 0.04


@pytest.fixture
def s3_table(s3) -> tuple[dict, object]:
    """(a job config for a small partitioned table on S3, the proxy)."""
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=3, storage_options=options)
    proxy.reset()
    return {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options}, proxy


def _recover_pools() -> None:
    """Grow the process-wide in-flight window back after throttles, so later tests run at full width."""
    while allowed_in_flight(64) < 64:
        list(map_in_flight(lambda x: x, range(256), 64))


def test_the_record_shows_the_latency_measured_and_why_the_run_stayed_in_the_driver(
    s3_table, tmp_path, capsys
):
    config, proxy = s3_table
    proxy.reset(latency_s=LATENCY_S)
    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys, "--dry-run")
    proxy.reset()
    assert code == 0, record["error"]
    placement = record["details"]["placement"]
    assert record["details"]["executed_in"] == placement["engine"] == "driver"
    assert placement["latency_ms"] >= LATENCY_S * 1000  # every request waited at least that long
    assert placement["fits_by"] == "size" and placement["io_parallelism"] == 64
    # 3 snapshots and a tag (each a file and two lists), the manifests, one listing page
    size = record["details"]["table_size"]
    assert placement["requests"] == 3 * size["roots"] + size["manifests"] + 1
    assert placement["driver_s"] < placement["spark_s"]
    assert placement["reason"].startswith("faster in the driver")


def test_a_table_past_the_driver_limits_goes_to_spark_whatever_the_estimate(
    spark_session, s3_table, tmp_path, capsys
):
    config, proxy = s3_table
    code, record = run_job(
        tmp_path, "remove-orphan-files", {**config, "local_max_files": 1}, capsys, "--dry-run"
    )
    assert code == 0, record["error"]
    placement = record["details"]["placement"]
    assert record["details"]["executed_in"] == placement["engine"] == "spark"
    assert placement["fits_by"] is None and placement["reason"].startswith("larger than the driver's limits")
    assert placement["driver_s"] < placement["spark_s"]  # the estimate alone would have kept it


def test_local_always_and_never_decide_alone(spark_session, s3_table, tmp_path, capsys):
    config, _ = s3_table
    always = {**config, "local": "always", "local_max_files": 1}
    code, record = run_job(tmp_path, "remove-orphan-files", always, capsys, "--dry-run")
    assert code == 0, record["error"]
    assert record["details"]["executed_in"] == "driver"
    assert record["details"]["placement"] == {"engine": "driver", "reason": "local: always"}
    code, record = run_job(tmp_path, "remove-orphan-files", {**config, "local": "never"}, capsys, "--dry-run")
    assert code == 0, record["error"]
    assert record["details"]["executed_in"] == "spark"
    assert record["details"]["placement"] == {"engine": "spark", "reason": "local: never"}


def test_throttled_requests_are_retried_and_counted_in_the_record(s3_table, tmp_path, capsys):
    config, proxy = s3_table
    proxy.reset(throttle_first=3, scope=config["warehouse"])  # the 3 are the job's own
    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys, "--dry-run")
    throttled = proxy.count(status=503)
    proxy.reset()
    _recover_pools()
    assert code == 0, record["error"]
    assert record["details"]["executed_in"] == "driver"
    assert throttled == 3
    assert record["details"]["storage"]["throttled_requests"] >= 3
    unthrottled_code, unthrottled = run_job(tmp_path, "remove-orphan-files", config, capsys, "--dry-run")
    assert unthrottled_code == 0 and unthrottled["details"]["storage"]["throttled_requests"] == 0
    assert unthrottled["counts"] == record["counts"]
