"""`read_table` as a job process of its own, for the S3 benchmark: one YAML in (warehouse, table,
storage_options), one run-record-like JSON line out (duration_s of the read and count alone, after
the Spark session started; details.executed_in; counts.rows; details.storage.throttled_requests and
timed_out_requests, the driver's and the executors' as a job's run record counts them, so the
benchmark's 503 column compares the proxy's count with the reader's for read_table too).

    python -m scripts.s3bench.read_job --config read.yaml
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from jobs.read import read_table  # noqa: E402
from jobs.runtime.executor_throttles import executor_throttles, throttles_since  # noqa: E402
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402
from paimon_format.storage.in_flight import throttled_requests, timed_out_requests  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = yaml.safe_load(Path(args.config).read_text())
    spark = get_or_create_spark("bench-s3-read", log_level="ERROR", moves_rows=True)
    start = time.perf_counter()
    throttled, timed_out, executors = throttled_requests(), timed_out_requests(), executor_throttles()
    rows = read_table(
        spark, config["warehouse"], config["table"], storage_options=config.get("storage_options")
    ).count()
    executor_throttled, executor_timed_out = throttles_since(executors)
    storage = {
        "throttled_requests": throttled_requests() - throttled + executor_throttled,
        "timed_out_requests": timed_out_requests() - timed_out + executor_timed_out,
    }
    record = {
        "status": "succeeded",
        "duration_s": time.perf_counter() - start,
        "details": {"executed_in": "Spark", "storage": storage},
        "counts": {"rows": rows},
    }
    stop_session(spark)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
