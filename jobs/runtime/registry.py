"""Which operations exist, where their code lives, and how they plug into the frame.

An operation is a module with two names:

    CONFIG_MODEL: type[TableJobConfig]        # its YAML keys (a subclass, extra keys forbidden)
    def run(context: JobContext, config) -> None:
        ...                                    # plan, distribute, commit; fill context.record;
                                               # raise BadInputError / SafetyRefusal / CommitRaceLost

and, to be runnable by spark-submit, ends with
`if __name__ == "__main__": from jobs.entry import run_entry; run_entry("<operation>")`.

Modules are imported lazily, so `--help` and configuration errors never import Spark or start it.
`register()` adds an operation at runtime (a plug-in package, or a test's fake operation).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from jobs.runtime.errors import BadInputError
from jobs.runtime.report import ProgressLogger, RunRecord
from jobs.runtime.spark import get_or_create_spark, spark_is_running, stop_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Operation:
    name: str  # with dashes, as typed on the command line: expire-snapshots
    module: str  # importable module path: jobs.expire_snapshots
    description: str  # one line for `python -m jobs --help`
    # whether the frame runs it under the table's lock (jobs.runtime.run_lock): every operation that
    # changes a table but `write` (a writer races maintenance through its commit) and `maintain`
    # (which locks each table it works on itself)
    takes_lock: bool = True
    # whether rows pass through the JVM in bulk (the write job's query or non-Parquet source goes
    # through Spark's reader): a local session then keeps the JVM's C2 compiler
    # (`jobs.runtime.jvm_archive.LOCAL_DATA_JVM_OPTIONS`). Not compact: its tasks read and write the
    # files in Python, and C2's compile work made the 10M-row append compaction 0.5-1.4 s slower.
    moves_rows: bool = False


class OperationNotImplemented(BadInputError):
    """The operation is registered but its module does not exist yet."""


OPERATIONS: dict[str, Operation] = {}


def register(
    name: str, module: str, description: str, takes_lock: bool = True, moves_rows: bool = False
) -> Operation:
    operation = OPERATIONS[name] = Operation(name, module, description, takes_lock, moves_rows)
    return operation


register(
    "write",
    "jobs.write",
    "write files or a query into a table, creating it if needed",
    takes_lock=False,
    moves_rows=True,
)
register(
    "expire-snapshots", "jobs.expire_snapshots", "expire old snapshots and delete the files only they used"
)
register(
    "remove-orphan-files", "jobs.remove_orphan_files", "delete files no snapshot, tag or branch references"
)
register("compact", "jobs.compact", "rewrite small files and sorted runs into fewer, larger files")
register("compact-manifests", "jobs.compact_manifests", "rewrite manifests into fewer, partition-sorted ones")
register(
    "drop-partition", "jobs.drop_partition", "drop partitions by spec or predicate (an OVERWRITE commit)"
)
register("expire-partitions", "jobs.expire_partitions", "drop partitions older than an expiration time")
register(
    "create-tag", "jobs.create_tag", "tag a snapshot (by id, time or the latest), as Paimon's create_tag"
)
register("delete-tag", "jobs.delete_tag", "delete tags by name or glob and the files only they used")
register("rename-tag", "jobs.rename_tag", "rename a tag (the new tag file first, then the old one goes)")
register("replace-tag", "jobs.replace_tag", "point a tag at another snapshot; files only the old tag used go")
register("expire-tags", "jobs.expire_tags", "delete tags past their retention or beyond tag.num-retained-max")
register(
    "rollback",
    "jobs.rollback",
    "roll the table back to a snapshot or tag; newer snapshots, tags and their files go",
)
register("create-branch", "jobs.create_branch", "create a branch from the latest snapshot, a snapshot, a tag")
register("delete-branch", "jobs.delete_branch", "delete branches by name or glob, and their own files")
register("rename-branch", "jobs.rename_branch", "rename a branch (its metadata moves, data files are shared)")
register("fast-forward", "jobs.fast_forward", "make main the state of a branch, as Paimon's fast_forward")
register(
    "merge-branch",
    "jobs.merge_branch",
    "add a branch's new data files to main or another branch (append tables), as Paimon's merge_branch",
)
register(
    "remove-unexisting-files",
    "jobs.remove_unexisting_files",
    "repair: remove the latest snapshot's entries of lost data files (one commit)",
)
register(
    "mark-partition-done",
    "jobs.mark_partition_done",
    "mark partitions done (Paimon's _SUCCESS file), by spec or partition.idle-time-to-done",
)
register("reset-consumer", "jobs.reset_consumer", "set a streaming consumer's next snapshot, or delete it")
register("clear-consumers", "jobs.clear_consumers", "delete streaming consumers by include/exclude regex")
register(
    "expire-changelogs",
    "jobs.expire_changelogs",
    "expire long-lived (decoupled) changelogs and the files only they used",
)
register(
    "purge-files",
    "jobs.purge_files",
    "delete every data and metadata file of a table except its schema (confirm: true)",
)
register(
    "remove-unexisting-manifests",
    "jobs.remove_unexisting_manifests",
    "repair: commit the latest state without the manifests its lists name but storage lost",
)
register(
    "maintain",
    "jobs.maintain",
    "maintain many tables in one run (expire, compact, remove orphans)",
    takes_lock=False,  # it takes each table's lock itself
)


def load(name: str) -> ModuleType:
    """The module of a registered operation; OperationNotImplemented (exit 2) if it does not exist."""
    operation = OPERATIONS[name]
    try:
        module = importlib.import_module(operation.module)
    except ModuleNotFoundError as error:
        if error.name != operation.module:
            raise  # the module exists but one of its imports is missing: a broken install
        raise OperationNotImplemented(
            f"operation {name} is not implemented yet (no module {operation.module})"
        ) from None
    for attribute in ("CONFIG_MODEL", "run"):
        if not hasattr(module, attribute):
            raise TypeError(f"{operation.module} does not define {attribute}, so it is no operation module")
    return module


def _moves_rows(operation: str) -> bool:
    known = OPERATIONS.get(operation)
    return known is not None and known.moves_rows


@dataclass
class JobContext:
    """What an operation gets from the frame: its Spark session, the dry-run flag, a logger, a record.

    The session is created on first use of `spark`, so an operation that fails its own checks
    before touching data never pays for a JVM.
    """

    operation: str
    config: Any
    dry_run: bool
    record: RunRecord
    log: logging.Logger | logging.LoggerAdapter
    spark_log_level: str | None = "WARN"  # Spark's own log level for a session this run creates
    console_progress: bool = False  # Spark's stage progress bar on the terminal
    # Where `spark` comes from when given: a session shared by many contexts (maintain's steps),
    # asked for only when a step needs Spark, so a run whose tables all run in the driver starts none.
    spark_provider: Callable[[], SparkSession] | None = field(default=None, repr=False)
    _spark: SparkSession | None = field(default=None, repr=False)
    _owns_spark: bool = field(default=False, repr=False)

    @property
    def spark(self) -> SparkSession:
        if self._spark is None and self.spark_provider is not None:
            self._spark = self.spark_provider()
        if self._spark is None:
            self._owns_spark = not spark_is_running()
            self._spark = get_or_create_spark(
                f"paimon-jobs {self.operation}",
                getattr(self.config, "spark", None),
                self.spark_log_level,
                self.console_progress,
                moves_rows=_moves_rows(self.operation),
            )
        return self._spark

    def job_keywords(self) -> dict[str, Any]:
        """`dry_run`, `record` and `log`, as each operation's function takes them:
        `delete_tag(spark, table, request, **context.job_keywords())`."""
        return {"dry_run": self.dry_run, "record": self.record, "log": self.log}

    def progress(self, what: str, interval_s: float = 10.0) -> ProgressLogger:
        """A ProgressLogger on this job's log, e.g. `context.progress("files deleted")`."""
        return ProgressLogger(self.log, what, interval_s)

    def close(self) -> None:
        """Stop the session if this run created it; a session from a test or notebook stays."""
        if self._spark is not None and self._owns_spark:
            stop_session(self._spark)
        self._spark = None
