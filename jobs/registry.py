"""Which operations exist, where their code lives, and how they plug into the frame.

An operation module exposes `CONFIG_MODEL` (a `TableJobConfig` subclass) and
`run(context: JobContext, config) -> None`, filling `context.record`. Modules are imported lazily
so `--help` and config errors never start Spark.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from jobs.report import RunRecord


@dataclass(frozen=True)
class Operation:
    name: str
    module: str
    description: str


OPERATIONS: dict[str, Operation] = {}


def register(name: str, module: str, description: str) -> None:
    OPERATIONS[name] = Operation(name, module, description)


register(
    "write", "jobs.write", "write a DataFrame source (files or a query) into a table, creating it if needed"
)
register(
    "expire-snapshots", "jobs.expire_snapshots", "expire old snapshots and delete the files only they used"
)
register(
    "remove-orphan-files", "jobs.remove_orphan_files", "delete files no snapshot, tag or branch references"
)
register("compact-manifests", "jobs.compact_manifests", "rewrite manifests into fewer, partition-sorted ones")
register(
    "drop-partition", "jobs.drop_partition", "drop partitions by spec or predicate (an OVERWRITE commit)"
)
register(
    "expire-partitions", "jobs.expire_partitions", "drop partitions older than partition.expiration-time"
)


def load(name: str) -> ModuleType:
    operation = OPERATIONS[name]
    return importlib.import_module(operation.module)


@dataclass
class JobContext:
    """What an operation gets from the frame: its Spark session, the dry-run flag, a logger, a record."""

    operation: str
    config: Any
    dry_run: bool
    record: RunRecord
    log: logging.LoggerAdapter
    _spark: Any = field(default=None, repr=False)

    @property
    def spark(self):  # -> SparkSession, created on first use
        if self._spark is None:
            from jobs.spark import get_or_create_spark

            self._spark = get_or_create_spark(
                f"paimon-jobs {self.operation}", getattr(self.config, "spark", None)
            )
        return self._spark
