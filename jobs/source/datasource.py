"""`PaimonDataSource`: the `paimon` format of Spark 4's Python Data Source API.

Spark instantiates it (in a Python worker) with the call's options, asks `schema()` once when the
query is analysed, then `reader(schema)` or `writer(schema, overwrite)`. The schema is the read's:
the columns of the snapshot the options travel to (time travel reads as the table was), in the Spark
types `read_table` gives them (`spark_schema_of`: TIMESTAMP is TIMESTAMP_NTZ); for `db.t$files` the
system table's. A table the options do not name, or do not find, fails here with the option named.
"""

from __future__ import annotations

import os
from typing import ClassVar

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StringType, StructField, StructType

from jobs.read import spark_schema_of
from jobs.source.location import SourceOptionError, table_location
from jobs.source.reader import PaimonReader, SystemTableReader, check_schema
from jobs.source.scan import open_read, read_options
from jobs.source.stream import PaimonStreamReader, stream_options
from jobs.source.stream_pk import ROW_KIND_COLUMN, changelog_columns, read_changelog
from jobs.source.writer import make_writer
from paimon_format import system_tables
from paimon_format.data.reader import output_arrow_schema
from paimon_format.errors import PaimonFormatError

# options that say where a stream starts, not which snapshot's schema it reads
_STREAM_START = ("scan.mode", "scan.snapshot-id", "snapshot-id")


class PaimonDataSource(DataSource):
    """`spark.read.format("paimon")` and `df.write.format("paimon")` (see docs/spark-source.md)."""

    # the session's default parallelism, set on the class `register(spark)` registers
    default_parallelism: ClassVar[int | None] = None

    @classmethod
    def name(cls) -> str:
        return "paimon"

    def schema(self) -> StructType:
        location = table_location(self.options)
        if location.system_table:
            try:
                arrow = system_tables.system_table_schema(location.open(), location.system_table)
                return spark_schema_of(arrow)
            except PaimonFormatError as error:
                raise SourceOptionError(f"option 'path': {error}") from None
        opened = open_read(read_options(self.options))
        schema = spark_schema_of(output_arrow_schema(opened.schema))
        if read_changelog(self.options):  # a stream's rows with their kinds (stream_pk.py)
            changelog_columns(opened.table.path, schema.fieldNames())
            return StructType([StructField(ROW_KIND_COLUMN, StringType(), False), *schema.fields])
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        if read_changelog(self.options):
            raise SourceOptionError("option 'read.changelog' is for streams (spark.readStream), not batches")
        options = read_options(self.options)
        ours = self.schema()
        check_schema(schema, ours)
        if options.location.system_table:
            return SystemTableReader(options, options.location.system_table, ours)
        parallelism = options.parallelism or self.default_parallelism or os.cpu_count() or 1
        return PaimonReader(options, open_read(options), ours, parallelism)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        """`spark.readStream.format("paimon")`: the table's commits as micro-batches (stream.py)."""
        options = stream_options(self.options)
        ours = self.schema()
        check_schema(schema, ours)
        latest = {k: v for k, v in self.options.items() if k.lower() not in _STREAM_START}
        opened = open_read(read_options(latest))  # the table and its latest schema
        return PaimonStreamReader(options, opened.table, opened.schema, ours)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return make_writer(dict(self.options), schema, overwrite)
