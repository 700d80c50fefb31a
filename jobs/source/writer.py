"""`df.write.format("paimon")`: Spark's tasks write data files, the driver commits them once.

The data source (jobs/source/datasource.py) calls
`make_writer(options: dict[str, str], schema: StructType, overwrite: bool) -> DataSourceArrowWriter`.

Spark runs the three steps in three places, with no SparkSession in any of them:
1. `make_writer`, in a Python worker on the driver: the write job's planning (`plan_write`): the
   table created from `primary-key` / `partition` / other options when it is missing, else the
   DataFrame's columns checked against it (missing, extra, wrongly typed: refused before any task
   runs), and where the new files' sequence numbers begin (the latest snapshot's manifests).
2. `write`, in each task: its Arrow batches become level-0 data files per (partition, bucket),
   flushed at `target-file-size` of buffered rows; the task answers the files' metadata only. Spark
   hands a data source rows in the DataFrame's own partitioning and a Python source cannot ask for
   another, so unlike the write job (one task per bucket after a shuffle) several tasks may write
   the same bucket. That is valid Paimon: level-0 files of a primary-key table may overlap, and the
   merge orders a key's rows by sequence number. Each task therefore numbers its rows in a range of
   its own (`SEQUENCE_STRIDE` apart by task), in input order: within a task the last write of a key
   wins; between tasks Spark defines no order, as with Paimon's own Spark writer.
3. `commit` (or `abort`), in a Python worker on the driver: one commit through `SnapshotCommit`
   (`jobs.writing.commit.commit_written`, as the write job), or removal of what the tasks wrote.

Crash ordering: data files are written before the commit and nothing names them until the snapshot
(create-if-absent) lands. A task that fails removes the files it wrote; `abort` removes those of
the tasks that finished; a failed commit removes them all (unless a snapshot of ours landed); a
table this write created is removed after its files. Every file name carries the write's id and
the task attempt (`jobs.source.write_leftovers`), so after the snapshot landed (and in `abort`)
the driver lists the directories the tasks wrote and removes this write's files no message names:
those of attempts Spark killed or dropped (speculative duplicates). A process killed in between
leaves only unreferenced files (remove-orphan-files finds them) and no snapshot.

Dynamic-bucket primary-key tables: the tasks agree on a new key's bucket without a shuffle
(`jobs.source.write_dynamic`). Not written here (refused before any task runs, naming the table):
tables whose batch reads skip level 0 (deletion vectors, first-row), which the write job compacts
after its commit with Spark (`python -m jobs write`).
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.runtime.errors import BadInputError
from jobs.runtime.report import RunRecord
from jobs.source.location import SourceOptionError, table_location
from jobs.source.write_dynamic import DynamicBuckets, delete_index_files, merged_index
from jobs.source.write_leftovers import DRIVER_ATTEMPT, FileUuids, new_write_id, remove_leftovers
from jobs.source.write_options import write_settings
from jobs.writing.columns import BUCKET_COLUMN, written_file_rows
from jobs.writing.commit import commit_written, landed_snapshot, remove_created_table
from jobs.writing.data_files import next_sequence_number_on_driver
from jobs.writing.dynamic_bucket import index_relpath, is_dynamic_bucket
from jobs.writing.run import plan_write
from jobs.writing.settings import WritePlan, WriteSettings
from paimon_format.commit import IndexUpdate, SnapshotCommit
from paimon_format.data.conform import conform, fit_string_lengths
from paimon_format.data.writer import write_bucket_outputs
from paimon_format.manifest.entries import IndexManifestEntry
from paimon_format.model.options import CoreOptions

if TYPE_CHECKING:
    from pyspark.sql.types import StructType  # a type only

# Sequence numbers of task `p` begin at first + p * SEQUENCE_STRIDE: tasks never share a number (a
# task writes far fewer than 2^32 rows), and 2^63 leaves room for millions of such writes.
SEQUENCE_STRIDE = 1 << 32

log = logging.getLogger("jobs.source.write")


@dataclass
class WrittenFiles(WriterCommitMessage):
    """What one task wrote: the write job's result rows (`jobs.writing.columns`), one per file."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    index: list[IndexManifestEntry] = field(default_factory=list)  # dynamic buckets: delta HASH files


def make_writer(options: dict[str, str], schema: StructType, overwrite: bool) -> PaimonWriter:
    """Plan the write `options` ask for (creating the table if missing and asked to); the writer
    Spark ships to its tasks. Bad options or a DataFrame that does not fit the table: an error
    naming what is wrong, before anything is written."""
    location = table_location(options)
    if location.system_table:
        raise SourceOptionError(f"${location.system_table} is a system table: it cannot be written")
    name = str(options.get("path") or options.get("table") or location.root)
    settings = write_settings(options, location.root, name, overwrite)
    target = location.open()
    record = RunRecord(operation="spark-write", table=name)
    plan = plan_write(
        target,
        _arrow_schema(schema),
        False,
        settings,
        False,
        record,
        log,
        next_sequence_number_on_driver,
    )
    try:
        _check_writable(plan, name)
    except BaseException:
        if plan.created:
            remove_created_table(target, log)
        raise
    dynamic = None
    if is_dynamic_bucket(plan.schema):
        replaces = None if settings.mode == "append" else (plan.overwrite_filter or _every_partition)
        dynamic = DynamicBuckets.plan(target, plan.schema, plan.previous, replaces)
    return PaimonWriter(plan, settings, dynamic, new_write_id())


def _every_partition(_partition: bytes) -> bool:
    return True


def _arrow_schema(schema: StructType) -> pa.Schema:
    """The DataFrame's columns as Arrow types (for the check against the table; time zone: any)."""
    return to_arrow_schema(schema, timezone="UTC")


def _check_writable(plan: WritePlan, name: str) -> None:
    if plan.compacts_level0:
        raise BadInputError(
            f"table {name}: its batch reads skip level 0 (deletion vectors or first-row), so written rows "
            "need a compaction after the commit, which needs Spark on the driver: write it with the "
            "write job (python -m jobs write)"
        )


class PaimonWriter(DataSourceArrowWriter):
    """The write a `make_writer` call planned: `write` in each task, `commit` or `abort` once."""

    def __init__(
        self, plan: WritePlan, settings: WriteSettings, dynamic: DynamicBuckets | None, write_id: str
    ) -> None:
        self.plan = plan
        self.settings = settings
        self.dynamic = dynamic
        self.write_id = write_id  # in every file name (jobs.source.write_leftovers)
        # the commit's user: `abort`, which Spark also calls when `commit` raised (in a worker of its
        # own, with this object unpickled again), finds by it whether the snapshot landed after all
        self.commit_user = str(uuid.uuid4())

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        """This task's rows -> level-0 data files; the files' rows. On failure, the files this task
        wrote are deleted before the error goes on (the commit never names them)."""
        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        # outside Spark (a direct call) no attempt id exists: a random one keeps the names apart
        attempt = context.taskAttemptId() if context is not None else random.randrange(DRIVER_ATTEMPT)
        names = FileUuids(self.write_id, attempt)
        next_sequence = self.plan.first_sequence + task * SEQUENCE_STRIDE
        target, schema = self.plan.target, self.plan.schema
        flush_bytes = CoreOptions(schema.options).target_file_size(bool(schema.primary_keys))
        rows: list[dict[str, Any]] = []
        dynamic = self.dynamic.for_task() if self.dynamic is not None else None
        pending: list[pa.RecordBatch] = []
        pending_bytes = 0
        try:
            for batch in iterator:
                if not batch.num_rows:
                    continue
                pending.append(batch)
                pending_bytes += batch.nbytes
                if pending_bytes >= flush_bytes:
                    next_sequence = self._flush(pending, next_sequence, rows, dynamic, names)
                    pending, pending_bytes = [], 0
            if pending:
                self._flush(pending, next_sequence, rows, dynamic, names)
            deltas = dynamic.write_deltas(names) if dynamic is not None else []
        except BaseException:
            target.file_io.delete_many([target.full_path(row["path"]) for row in rows])
            raise
        return WrittenFiles(rows, deltas)

    def _flush(
        self,
        batches: list[pa.RecordBatch],
        first_sequence: int,
        rows: list[dict[str, Any]],
        dynamic: DynamicBuckets | None,
        names: FileUuids,
    ) -> int:
        """Write buffered batches (sequence numbers from `first_sequence`, in input order); adds the
        files' rows to `rows`, returns the next free sequence number."""
        target, schema = self.plan.target, self.plan.schema
        data = fit_string_lengths(conform(pa.Table.from_batches(batches), schema), schema)
        bucket_column = None
        if dynamic is not None:
            bucket_column = BUCKET_COLUMN
            data = data.append_column(BUCKET_COLUMN, pa.array(dynamic.assign(data), pa.int32()))
        outputs = write_bucket_outputs(
            target.file_io,
            target.path,
            schema,
            data,
            first_sequence,
            bucket_column=bucket_column,
            file_uuids=names,
        )
        rows.extend(written_file_rows(target, outputs))
        return first_sequence + data.num_rows

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task finished: one snapshot of all their files (none for an empty append); then the
        files of this write that no message names (attempts whose result Spark dropped) are removed.

        Crash ordering: the snapshot lands first, the leftovers go after it (a crash in between
        leaves only unreferenced files, which remove-orphan-files takes)."""
        finished = [message for message in messages if isinstance(message, WrittenFiles)]
        written = [row for message in finished for row in message.rows]
        deltas = [entry for message in finished for entry in message.index]
        record = RunRecord(operation="spark-write", table=self.settings.table)
        record.snapshot_ids["base"] = self.plan.previous
        index: IndexUpdate | None = None
        try:
            if not written and self._truncates():
                self._commit_empty_overwrite(record)
            else:
                index = self._prepare(written, deltas, record)
                commit_written(written, self.plan, self.settings, record, log, index, self.commit_user)
        except BaseException:
            self._remove_leftovers(finished, index, record)  # never named by any snapshot: safe
            if self.plan.created and self._landed() is None:
                remove_created_table(self.plan.target, log)
            raise
        finally:
            delete_index_files(self.plan.target, deltas)  # merged into the committed ones, or unneeded
        self._remove_leftovers(finished, index, record)
        log.info("spark write of %s: %s", self.settings.table, record.to_json())

    def _remove_leftovers(
        self, finished: list[WrittenFiles], index: IndexUpdate | None, record: RunRecord
    ) -> None:
        """Remove this write's files in the directories the messages name that neither the messages
        nor the commit's index files name. A failure here is logged, not raised: the commit's
        outcome stands and remove-orphan-files takes what stays."""
        target = self.plan.target
        keep = [row["path"] for message in finished for row in message.rows]
        keep += [index_relpath(target, entry) for entry in (index.add if index else [])]
        deltas = [index_relpath(target, entry) for message in finished for entry in message.index]
        try:
            removed = remove_leftovers(target, self.write_id, keep + deltas, keep + deltas)
        except Exception:
            log.warning(
                "spark write of %s: its leftover files stay for remove-orphan-files",
                target.path,
                exc_info=True,
            )
            return
        record.count("leftover_files_removed", len(removed))

    def _prepare(
        self, written: list[dict[str, Any]], deltas: list[IndexManifestEntry], record: RunRecord
    ) -> IndexUpdate | None:
        """Before the commit: rows outside a static overwrite's partitions refused, and the merged
        HASH files of a dynamic-bucket write. On failure the tasks' data files are deleted (nothing
        names them yet)."""
        target = self.plan.target
        try:
            scope = self.plan.overwrite_filter
            if self.settings.mode == "overwrite" and self.settings.overwrite_scope == "partitions" and scope:
                outside = {bytes(row["partition"]) for row in written if not scope(bytes(row["partition"]))}
                if outside:
                    raise BadInputError(
                        f"table {self.settings.table}: option 'overwrite-partition' names the partitions "
                        "to replace, but the DataFrame has rows in others: "
                        + ", ".join(sorted(target.partition_dir(p) or "" for p in outside)[:5])
                    )
            if self.dynamic is None:
                return None
            partitions = {bytes(row["partition"]) for row in written}
            index = merged_index(self.dynamic, deltas, partitions, FileUuids(self.write_id, DRIVER_ATTEMPT))
            record.count("hash_index_files_written", len(index.add))
            return index
        except BaseException:
            target.file_io.delete_many([target.full_path(row["path"]) for row in written])
            raise

    def _truncates(self) -> bool:
        """An overwrite of the whole table or of named partitions replaces them even with no rows."""
        return self.settings.mode == "overwrite" and self.settings.overwrite_scope != "touched"

    def _commit_empty_overwrite(self, record: RunRecord) -> None:
        committer = SnapshotCommit(self.plan.target, self.commit_user)
        snapshot = committer.overwrite([], partition_filter=self.plan.overwrite_filter)
        if snapshot is not None:
            record.committed(snapshot.id)

    def _landed(self) -> int | None:
        """The snapshot this write's commit landed, if any (looked up by its commit user)."""
        return landed_snapshot(self.plan.target, self.commit_user, self.plan.previous)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """A task failed (after its retries), or `commit` raised (Spark calls abort then too): remove
        the files of the tasks that finished, then a table this write created. When a snapshot of
        this write landed (the commit raised after its snapshot was written, or was told it failed
        when it had not), nothing is removed: the snapshot names those files."""
        target = self.plan.target
        landed = self._landed()
        if landed is not None:
            log.warning(
                "spark write of %s aborted after its snapshot %d landed: its files stay",
                self.settings.table,
                landed,
            )
            return
        finished = [message for message in messages if isinstance(message, WrittenFiles)]
        deltas = [entry for message in finished for entry in message.index]
        delete_index_files(target, deltas)
        paths = [row["path"] for message in finished for row in message.rows]
        target.file_io.delete_many([target.full_path(path) for path in paths])
        named = paths + [index_relpath(target, entry) for entry in deltas]
        try:  # then the files of attempts whose message never came, in the same directories
            paths += remove_leftovers(target, self.write_id, named, ())
        except Exception:
            log.warning(
                "spark write of %s: its leftover files stay for remove-orphan-files",
                target.path,
                exc_info=True,
            )
        log.warning(
            "spark write of %s aborted: removed the %d files its tasks wrote", self.settings.table, len(paths)
        )
        if self.plan.created:
            remove_created_table(target, log)
