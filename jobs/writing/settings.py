"""What one write is asked to do (`WriteSettings`), and what its planning decided (`WritePlan`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paimon_format.model.schema import TableSchema
from paimon_format.table import Table

PartitionTest = Callable[[bytes], bool]


@dataclass(frozen=True)
class WriteSettings:
    """One write: where to, how, and the table to create when it is missing (built from the write
    job's validated config by `of`, or by a Python caller of `write_dataframe`).

    `partition_keys`, `primary_keys` and `options` describe the table to create; for an existing
    table, given keys or a `bucket` that differ from the table's are a warning (`strict_create`:
    exit 2).
    """

    warehouse: str
    table: str  # db.name
    mode: str = "append"  # append | overwrite
    partition_keys: list[str] | None = None
    primary_keys: list[str] | None = None
    options: dict[str, Any] | None = None
    overwrite_scope: str = "touched"  # touched | table | partitions
    overwrite_partitions: list[dict[str, Any]] | None = None  # for overwrite_scope: partitions
    storage_options: dict[str, Any] | None = None
    allow_unsafe_overwrite_commit: bool = False
    strict_create: bool = False
    io_parallelism: int | None = None  # requests in flight on the table's storage (None: its default)


@dataclass(frozen=True)
class WritePlan:
    """What the driver decided before any data file is written."""

    target: Table
    schema: TableSchema
    num_buckets: int  # the table's `bucket` option: -1 dynamic (or unaware), -2 postpone, else fixed
    overwrite_filter: PartitionTest | None  # the partitions an overwrite replaces (None: see scope)
    previous: int | None  # the latest snapshot when the write began (None: a new table)
    first_sequence: int  # where the sequence numbers of the new files begin
    direct: bool  # executors read the Parquet source themselves (`jobs.writing.source`)
    compacts_level0: bool  # the written buckets are compacted after the commit (`jobs.writing.level0`)
    created: bool  # this run created the table (removed again when its first commit fails)
