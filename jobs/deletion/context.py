"""What the steps of one deletion run share: the table, the Spark session (started only when a step
needs it), the dry-run flag, the calling job's record and log, and how fast files are deleted.

expire-snapshots, delete-tag, expire-tags and rollback each build one `DeletionContext` and hand it
to their steps (`jobs.deletion.roots`, `.changelogs`, `.tags`), instead of the same eight arguments
to every step.
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

    from jobs.runtime.registry import JobContext


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
    def for_job(
        context: JobContext,
        table: Table,
        pace: DeletePace,
        spark: SparkSession | None = None,
        record: RunRecord | None = None,
    ) -> DeletionContext:
        """A job run's deletion on `table` with the job's record (or `record`), log and dry-run flag.
        Spark: `spark` when given (a session, or a LocalSession), else the job's own session, started
        on first use only."""
        source: SparkSession | Callable[[], SparkSession] = (
            spark if spark is not None else lambda: context.spark
        )
        return DeletionContext(table, record or context.record, context.log, context.dry_run, pace, source)
