"""Deleting planned files on the executors: batches, a rate limit, retries, then empty directories.

The driver hands over a DataFrame of table-relative paths and sizes and gets back one summary row per
task (counts, bytes, the first errors), never the paths. Each task deletes in batches through
`FileIO.delete_many` (S3 DeleteObjects of up to 1000 keys), paces itself to its share of the
configured rate, and retries a failed batch's remaining files with exponential backoff, because
object stores throttle (503 SlowDown) under exactly this kind of load. On S3 several batches of a task
are in flight at once (`batches_in_flight`): each DeleteObjects waits a round trip, so one after
another a task would be bound by latency. The rate limit paces the start of each batch, so it holds
however many are in flight.

Empty directories are removed afterwards, only bucket directories and the partition directories
above them, one `rmdir` each: a directory that is not empty (a writer just put a file there) stays,
and nothing is ever removed recursively.
"""

from __future__ import annotations

import errno
import os
import posixpath
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.runtime.job_group import run_action
from jobs.runtime.local_frame import functions_for
from paimon_format.errors import StorageError
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.storage.paths import BUCKET_DIR_RE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_SUMMARY_COLUMNS = "deleted long, bytes long, absent long, failed long, errors array<string>"
_SUMMARY_SCHEMA = pa.schema(
    [
        ("deleted", pa.int64()),
        ("bytes", pa.int64()),
        ("absent", pa.int64()),
        ("failed", pa.int64()),
        ("errors", pa.list_(pa.string())),
    ]
)
_DIR_COLUMNS = "removed long"
_ERRORS_KEPT = 5
_FIRST_BACKOFF_S = 0.2


@dataclass
class DeletionOutcome:
    deleted: int = 0
    bytes: int = 0
    absent: int = 0  # already gone (deleted by someone else meanwhile)
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    directories_removed: int = 0


class RateLimiter:
    """At most `per_second` operations per second for one task (None: unlimited)."""

    def __init__(self, per_second: float | None) -> None:
        self._interval = 1.0 / per_second if per_second else 0.0
        self._next = time.monotonic()

    def acquire(self, count: int) -> None:
        if not self._interval:
            return
        now = time.monotonic()
        if self._next > now:
            time.sleep(self._next - now)
        self._next = max(self._next, now) + count * self._interval


def delete_with_retries(
    file_io: FileIO, paths: list[str], retries: int, backoff_s: float = _FIRST_BACKOFF_S
) -> tuple[set[str], list[str]]:
    """Delete `paths`; retry the ones a failed call left behind. Returns (deleted, final errors)."""
    remaining = list(paths)
    deleted: set[str] = set()
    for attempt in range(retries + 1):
        try:
            deleted.update(file_io.delete_many(remaining))
            return deleted, []
        except StorageError as error:
            done = set(getattr(error, "deleted_paths", []) or [])
            deleted.update(done)
            remaining = [path for path in remaining if path not in done]
            if attempt == retries:
                return deleted, [str(error)]
            time.sleep(backoff_s * (2**attempt))
    return deleted, []


def batches_in_flight(file_io: FileIO) -> int:
    """How many of a task's delete batches run at once: on S3 a batch is one DeleteObjects request,
    so several in flight (within `io_parallelism`, at most 8: S3 throttles writes per prefix);
    elsewhere `FileIO.delete_many` already keeps a batch's single deletes in flight, so one batch."""
    return min(file_io.io_parallelism, 8) if file_io.protocol == "s3" else 1


def _deleter(file_io: FileIO, root: str, batch_size: int, per_task_rate: float | None, retries: int):
    def delete_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        limiter = RateLimiter(per_task_rate)
        summary = {"deleted": 0, "bytes": 0, "absent": 0, "failed": 0, "errors": []}

        def planned() -> Iterator[list[tuple[str, int]]]:
            """The task's files in batches of `batch_size`, each paced by the rate limit before it
            is handed out: `map_in_flight` takes a batch only when it is about to send it."""
            pending: list[tuple[str, int]] = []
            for batch in batches:
                for relative, size in zip(
                    batch.column("path").to_pylist(), batch.column("size").to_pylist(), strict=True
                ):
                    pending.append((relative, size))
                    if len(pending) >= batch_size:
                        limiter.acquire(len(pending))
                        yield pending
                        pending = []
            if pending:
                limiter.acquire(len(pending))
                yield pending

        def delete(
            pending: list[tuple[str, int]],
        ) -> tuple[list[tuple[str, int]], list[str], set[str], list[str]]:
            full = [file_io.join(root, relative) for relative, _ in pending]
            deleted, errors = delete_with_retries(file_io, full, retries)
            return pending, full, deleted, errors

        for pending, full, deleted, errors in map_in_flight(delete, planned(), batches_in_flight(file_io)):
            for (_, size), path in zip(pending, full, strict=True):
                if path in deleted:
                    summary["deleted"] += 1
                    summary["bytes"] += size
                elif not errors:
                    summary["absent"] += 1
            if errors:
                summary["failed"] += len(pending) - len(deleted)
                summary["errors"] = (summary["errors"] + errors)[:_ERRORS_KEPT]
        yield pa.RecordBatch.from_pylist([summary], schema=_SUMMARY_SCHEMA)

    return delete_partition


def delete_files(
    spark: SparkSession,
    files: DataFrame,
    file_io: FileIO,
    root: str,
    total: int,
    batch_size: int = 1000,
    max_per_second: float | None = None,
    retries: int = 3,
) -> DeletionOutcome:
    """Delete every row (path relative to `root`, size) of `files` on the executors."""
    if total == 0:
        return DeletionOutcome()
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    tasks = max(1, min(parallelism * 4, -(-total // batch_size)))
    # Tasks run `parallelism` at a time, so each gets that share of the overall rate.
    per_task_rate = max_per_second / min(tasks, parallelism) if max_per_second else None
    deleting = (
        files.select("path", "size")
        .repartition(tasks)
        .mapInArrow(_deleter(file_io, root, batch_size, per_task_rate, retries), _SUMMARY_COLUMNS)
    )
    rows = run_action(spark, "delete files", deleting.collect)  # a failure: no task deletes after it
    outcome = DeletionOutcome()
    for row in rows:
        outcome.deleted += row["deleted"]
        outcome.bytes += row["bytes"]
        outcome.absent += row["absent"]
        outcome.failed += row["failed"]
        outcome.errors.extend(row["errors"] or [])
    outcome.errors = outcome.errors[:_ERRORS_KEPT]
    return outcome


# -- empty directories ---------------------------------------------------------------------------------


def removable_parents(relative_file: str) -> list[str]:
    """The bucket directory of a data file and the partition directories above it, innermost first.

    [] for files elsewhere (metadata directories): only data layout directories are ever removed.
    """
    parts = relative_file.strip("/").split("/")[:-1]
    if not parts or not BUCKET_DIR_RE.fullmatch(parts[-1]):
        return []
    chain = [posixpath.join(*parts)]
    parts = parts[:-1]
    while parts and "=" in parts[-1]:
        chain.append(posixpath.join(*parts))
        parts = parts[:-1]
    return chain


def remove_empty_dir(file_io: FileIO, path: str) -> bool:
    """rmdir, never recursive: True when removed; False when not empty, gone, or no directories exist."""
    if file_io.protocol == "file":
        local = path[len("file://") :] if path.startswith("file://") else path
        try:
            os.rmdir(local)
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                return False
            raise StorageError(f"rmdir {path}: {error.strerror}") from error
        return True
    if file_io.protocol in ("s3", "gcs"):
        return False  # object stores have no directories: an empty prefix is already gone
    try:
        if file_io.fs.ls(path.split("://", 1)[-1]):
            return False
        file_io.fs.rmdir(path.split("://", 1)[-1])
    except (FileNotFoundError, OSError):
        return False
    return True


def remove_empty_directories(
    spark: SparkSession, deleted_files: DataFrame, file_io: FileIO, root: str
) -> int:
    """Try to remove the bucket and partition directories the deleted files lived in."""
    F = functions_for(spark)
    parents = F.udf(lambda path: removable_parents(path), "array<string>")
    chains = deleted_files.select(parents("path").alias("chain")).filter(F.size("chain") > 0)
    innermost = chains.select(F.col("chain")[0].alias("dir"), "chain").dropDuplicates(["dir"])

    def remove(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        removed = 0
        for batch in batches:
            for chain in batch.column("chain").to_pylist():
                for directory in chain:
                    if not remove_empty_dir(file_io, file_io.join(root, directory)):
                        break
                    removed += 1
        yield pa.RecordBatch.from_pydict({"removed": [removed]})

    removing = innermost.select("chain").mapInArrow(remove, _DIR_COLUMNS)
    rows = run_action(spark, "remove directories", removing.collect)
    return sum(row["removed"] for row in rows)
