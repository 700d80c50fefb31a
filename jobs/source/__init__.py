"""Spark-native access: `spark.read.format("paimon")` (and H4's writer, H5's system tables) through
Spark 4's Python Data Source API. `register(spark)` once per session; docs/spark-source.md.

Importing this package needs no Spark at all (the jobs import on Spark 3.5 and without pyspark);
the source's modules that subclass Spark's classes load only in `register`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.runtime.errors import BadInputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


class SourceUnavailableError(BadInputError):
    """This Spark has no Python data sources (Spark 3.5): read with `read_table` instead."""


def register(spark: SparkSession) -> type:
    """Register the `paimon` format on this session and turn on filter pushdown for Python sources
    (Spark refuses a reader with `pushFilters` while it is off). Returns the registered class.

    The class registered is a subclass carrying the session's default parallelism: a source's
    planning runs in a Python worker that has no session to ask. `SourceUnavailableError` on Spark
    before 4.0, which has no `pyspark.sql.datasource`."""
    version = spark.version
    if int(version.split(".")[0]) < 4:
        raise SourceUnavailableError(
            f"spark.read.format('paimon') needs Spark 4 (Python data sources); this is Spark {version}: "
            "use jobs.read.read_table(spark, warehouse, 'db.table') there"
        )
    # Spark 4 only: the source's classes subclass pyspark.sql.datasource's
    from jobs.source.datasource import PaimonDataSource

    registered = type(
        "PaimonDataSource",
        (PaimonDataSource,),
        {"default_parallelism": spark.sparkContext.defaultParallelism, "__module__": __name__},
    )
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(registered)
    return registered
