"""The SparkSession every job runs in: spark-submit's when there is one, a local default otherwise."""

from __future__ import annotations

import os
import sys
from typing import Any

LOCAL_DEFAULTS = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
}


def get_or_create_spark(app_name: str, conf: dict[str, Any] | None = None):  # -> SparkSession
    """Reuse the active session (tests, notebooks); else build one.

    Under spark-submit the master and resources come from spark-submit; only when no master is
    configured do the local defaults apply (plain `python -m jobs ...`).
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    submitted = SparkConf()
    if not submitted.contains("spark.master"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        for key, value in LOCAL_DEFAULTS.items():
            builder = builder.config(key, value)
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate()
