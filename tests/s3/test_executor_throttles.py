"""The run record of a Spark run counts the 503 SlowDown answers its executors got, not only the
driver's (`jobs.runtime.executor_throttles`): what the record says equals what the proxy answered;
likewise the requests that got no answer (a data file's GET stalled past the read timeout).

The proxy throttles a seeded share of all requests, the driver's and the executors' alike; compact
reads and writes its data files in Spark tasks (separate Python processes), so a record counting the
driver alone falls short of the proxy's count.
"""

from __future__ import annotations

from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.in_flight import allowed_in_flight, map_in_flight
from tests.s3.proxy import Stall
from tests.support.cli_runs import run_job
from tests.support.table_states import IDENTIFIER, build_sample_table, open_table


def _recover_pools() -> None:
    """Grow this process's in-flight window back after throttles, so later tests run at full width."""
    while allowed_in_flight(64) < 64:
        list(map_in_flight(lambda x: x, range(256), 64))


def test_a_spark_compaction_reports_every_throttle_the_store_answered(spark_session, s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=6, storage_options=options)
    impatient = {**options, "config_kwargs": {"read_timeout": 1}}
    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": impatient}
    data_get = lambda method, path, query: method == "GET" and "/data-" in path  # noqa: E731
    proxy.reset(throttle_ratio=0.2, seed=7, stall=Stall(data_get, times=1), scope=prefix)
    code, record = run_job(tmp_path, "compact", config, capsys)
    assert proxy.wait_idle()
    throttled = proxy.count(status=503)
    unanswered = proxy.summary()["unanswered"]
    executor_gets = sum(1 for r in proxy.requests if r.method == "GET" and "/data-" in r.path)
    proxy.reset()
    _recover_pools()
    assert code == 0, record["error"]
    assert executor_gets >= 18  # the data files, read by the tasks (and retried when throttled)
    assert throttled > 0
    assert record["details"]["storage"]["throttled_requests"] == throttled
    assert unanswered == 1 and record["details"]["storage"]["timed_out_requests"] == 1  # an executor's
    table = open_table(warehouse, options)
    assert len(list(live_entries(table, table.snapshot_manager.latest()))) == 3  # and the run did its work
