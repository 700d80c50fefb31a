"""`read_table` as a job process of its own, for the S3 benchmark: one YAML in (warehouse, table,
storage_options), one run-record-like JSON line out (duration_s of the read and count alone, after
the Spark session started; details.executed_in; counts.rows).

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
from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = yaml.safe_load(Path(args.config).read_text())
    spark = get_or_create_spark("bench-s3-read", log_level="ERROR", moves_rows=True)
    start = time.perf_counter()
    rows = read_table(
        spark, config["warehouse"], config["table"], storage_options=config.get("storage_options")
    ).count()
    record = {
        "status": "succeeded",
        "duration_s": time.perf_counter() - start,
        "details": {"executed_in": "Spark"},
        "counts": {"rows": rows},
    }
    stop_session(spark)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
