"""What the steps of one deletion run share: the table, the Spark session (started only when a step
needs it), the dry-run flag, the calling job's record and log, and how fast files are deleted.

expire-snapshots, delete-tag, expire-tags and rollback each build one `DeletionContext` (`.of_call`,
from their Python function's arguments) and hand it to their steps (`jobs.deletion.roots`,
`.changelogs`, `.tags`), instead of the same eight arguments to every step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from jobs.runtime.report import RunRecord
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class DeleteRateKeys(Protocol):
    """The YAML keys of a deleting job that set its pace."""

    delete_batch_size: int
    max_deletes_per_second: float | None


@dataclass(frozen=True)
class DeletePace:
    """How fast planned files go: files per delete call (S3 takes 1000), and the overall rate."""

    batch_size: int = 1000
    max_per_second: float | None = None

    @staticmethod
    def of(config: DeleteRateKeys) -> DeletePace:
        return DeletePace(config.delete_batch_size, config.max_deletes_per_second)


@dataclass
class DeletionContext:
    """One deletion run as its steps see it.

    `spark_source`: a session, or a function returning one, called on the first use of `spark` only:
    delete-tag, expire-tags and rollback start no Spark when nothing they drop has files to plan.
    """

    table: Table
    record: RunRecord
    log: logging.Logger | logging.LoggerAdapter
    dry_run: bool = False
    pace: DeletePace = DeletePace()
    spark_source: SparkSession | Callable[[], SparkSession] | None = field(default=None, repr=False)
    _session: SparkSession | None = field(default=None, repr=False)

    @property
    def spark(self) -> SparkSession:
        if self._session is None:
            source = self.spark_source
            self._session = source() if callable(source) else source
        if self._session is None:
            raise RuntimeError("this deletion run was given no Spark session")
        return self._session

    @staticmethod
    def of_call(
        operation: str,
        table: Table,
        spark: SparkSession | Callable[[], SparkSession] | None,
        pace: DeletePace,
        dry_run: bool = False,
        record: RunRecord | None = None,
        log: logging.Logger | logging.LoggerAdapter | None = None,
    ) -> DeletionContext:
        """One call of a deleting operation's Python function on `table`: a fresh record and the
        operation's own logger unless the caller (a job run, `maintain`) hands its own."""
        return DeletionContext(
            table,
            record or RunRecord(operation=operation, table=table.path, dry_run=dry_run),
            log or logging.getLogger(f"jobs.{operation.replace('-', '_')}"),
            dry_run,
            pace,
            spark,
        )
