"""The Spark side of `spark.read.format("paimon")`: Spark's `DataSourceReader` over `scan.py`'s plan.

Spark 4 calls, each in a Python worker of its own with this object pickled in between: `pushFilters`
(the query's simple AND terms; the ones applied exactly are not handed back), `partitions()` once on
the driver (the plan: one `ReadTask` per task of splits, as `read_table` cuts them), then `read()` per
task on the executors, which yields Arrow batches in exactly the Arrow types Spark expects for the
schema (`to_arrow_schema(schema, timezone="UTC")`: Spark checks the first batch's schema).

A system table (`db.t$files`) is one task whose batches come from `paimon_format.system_tables`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from jobs.read import read_splits_as
from jobs.source.filters import term_of
from jobs.source.location import SourceOptionError
from jobs.source.scan import OpenedRead, PushedTerms, ReadOptions, plan_read, sort_terms, write_record
from paimon_format import system_tables
from paimon_format.scan.splits import Split


class ReadTask(InputPartition):
    """One Spark task of a read: its splits (file metadata only, small and picklable)."""

    def __init__(self, index: int, splits: list[Split]) -> None:
        super().__init__(index)
        self.splits = splits


def check_schema(given: StructType, ours: StructType) -> None:
    """The columns Spark analysed the query with must be the read's: the source converts no columns.
    They differ after a user schema (`.schema(...)`) or a schema change committed in between."""
    if [f.name for f in given.fields] != [f.name for f in ours.fields]:
        raise SourceOptionError(
            f"the query's columns ({given.simpleString()}) are not the table's ({ours.simpleString()}): "
            "leave out .schema(...) and select or cast columns after the load; if the table's schema "
            "changed since the query was analysed, run it again"
        )


class PaimonReader(DataSourceReader):
    """Batch read of one snapshot of a table (see the module docstring for when Spark calls what)."""

    def __init__(
        self, options: ReadOptions, opened: OpenedRead, schema: StructType, parallelism: int
    ) -> None:
        self._options = options
        self._opened = opened
        self._schema = schema
        self._parallelism = parallelism
        self._pushed = PushedTerms()

    def pushFilters(self, filters: list[Any]) -> list[Any]:  # noqa: N802 - Spark's name
        """Use what the terms allow; hand back every filter not applied exactly (Spark re-applies
        those: file skipping only removes files that hold no matching row)."""
        self._pushed = sort_terms(self._opened, [term_of(f) for f in filters])
        return [f for position, f in enumerate(filters) if position not in self._pushed.exact]

    def partitions(self) -> Sequence[InputPartition]:
        plan = plan_read(self._opened, self._pushed, self._parallelism)
        if self._options.record_path:
            write_record(self._options.record_path, plan.record)
        return [ReadTask(index, splits) for index, splits in enumerate(plan.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ReadTask):  # Spark's stand-in partition of an empty plan
            return
        target = to_arrow_schema(self._schema, timezone="UTC")
        opened = self._opened
        yield from read_splits_as(opened.table, opened.schema, None, partition.splits, target)


class SystemTableReader(DataSourceReader):
    """A system table (`$snapshots`, `$files`, ...) read in one task from the table's metadata."""

    def __init__(self, options: ReadOptions, name: str, schema: StructType) -> None:
        self._options = options
        self._name = name
        self._schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(self._name)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        options = self._options
        target = to_arrow_schema(self._schema, timezone="UTC")
        table = options.location.open()
        for batch in system_tables.system_table_batches(table, self._name, options.snapshot_id, options.tag):
            yield pa.RecordBatch.from_arrays(
                [batch.column(field.name).cast(field.type) for field in target], schema=target
            )
