"""The write's one commit, and what a failed commit leaves behind removed.

Crash ordering: data files (and HASH index files) are written before the commit and are named by
nothing until the snapshot (create-if-absent) lands. A commit that definitely failed removes them
(unless a snapshot of this run landed after all); a table this run created is removed after its
files, its schema last, so a crash in between leaves an empty table.
"""

from __future__ import annotations

import logging
import os
import pickle
from typing import Any

from fsspec import AbstractFileSystem

from jobs.partitions.records import RECORD_PARTITION_LIMIT
from jobs.runtime.errors import BadInputError
from jobs.runtime.report import RunRecord
from jobs.writing.columns import WrittenRows
from jobs.writing.dynamic_bucket import index_relpath
from jobs.writing.settings import PartitionTest, WritePlan, WriteSettings
from paimon_format.commit import CommitMessage, IndexUpdate, SnapshotCommit
from paimon_format.manifest.entries import DELETE
from paimon_format.model.partition_spec import partition_bytes
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import read_entries, read_list
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

Log = logging.Logger | logging.LoggerAdapter


def commit_written(
    written: WrittenRows,
    plan: WritePlan,
    settings: WriteSettings,
    record: RunRecord,
    log: Log,
    index: IndexUpdate | None = None,
    commit_user: str | None = None,
) -> RunRecord:
    """One commit of everything the executors wrote; their files are removed if it definitely fails.

    `index`: the HASH index files a dynamic-bucket write made, committed in the same snapshot.
    `commit_user`: the snapshot's commit user (a fresh one by default); a caller that must later
    tell whether this commit landed (`landed_snapshot`) passes its own."""
    messages = _commit_messages(written, plan.num_buckets, record)
    if not written:
        log.info("the input is empty: nothing to commit, no snapshot created")
        return record
    target, mode = plan.target, settings.mode
    committer = SnapshotCommit(target, commit_user)
    try:
        if mode == "append":
            snapshot = committer.append(list(messages.values()), index=index)
        else:
            touched = {key[0] for key in messages}
            scoped = settings.overwrite_scope != "touched"
            partition_filter = plan.overwrite_filter if scoped else (lambda p: p in touched)
            snapshot = committer.overwrite(
                list(messages.values()), partition_filter=partition_filter, index=index
            )
    except BaseException:
        index_paths = [index_relpath(target, entry) for entry in index.add] if index else []
        _remove_unless_landed(
            target, committer, plan.previous, [row["path"] for row in written] + index_paths, log
        )
        raise
    record.snapshot_ids["committed"] = None
    if snapshot is not None:
        record.committed(snapshot.id)
        if mode == "overwrite":
            _record_replaced(target, snapshot, settings.overwrite_scope, record)
    log.info(
        "committed snapshot %s: %d files, %d rows",
        record.snapshot_ids["committed"],
        len(written),
        record.counts.get("rows_written", 0),
    )
    if mode == "overwrite" and snapshot is not None:
        log.info(
            "the overwrite replaced %d files (%d rows) in %d partitions",
            record.counts["files_replaced"],
            record.counts["rows_replaced"],
            record.details["replaced"]["partition_count"],
        )
    return record


def _commit_messages(
    written: WrittenRows, num_buckets: int, record: RunRecord
) -> dict[tuple[bytes, int], CommitMessage]:
    """The commit message of each (partition, bucket) written, and the record's counts of the files."""
    messages: dict[tuple[bytes, int], CommitMessage] = {}
    changelog_files = 0
    for row in written:
        key = (bytes(row["partition"]), row["bucket"])
        message = messages.setdefault(
            key, CommitMessage(key[0], key[1], num_buckets if num_buckets > 0 else -1)
        )
        if row["changelog"]:
            message.changelog_files.append(pickle.loads(row["meta"]))
            changelog_files += 1
            record.count("changelog_rows_written", row["rows"])
            record.add_bytes("changelog_written", row["size"])
            continue
        message.new_files.append(pickle.loads(row["meta"]))
        record.count("rows_written", row["rows"])
        record.add_bytes("written", row["size"])
    record.count("files_written", len(written) - changelog_files)
    if changelog_files:
        record.count("changelog_files_written", changelog_files)
    record.count("partitions_written", len({key[0] for key in messages}))
    record.sample("files_written", [row["path"] for row in written if not row["changelog"]])
    return messages


def _record_replaced(target: Table, snapshot: Snapshot, scope: str, record: RunRecord) -> None:
    """What the overwrite replaced, from its snapshot's delta (the DELETE entries it committed).

    The delta is streamed; the driver keeps counts and the distinct partitions (which a table has
    far fewer of than files), of which the record names the first RECORD_PARTITION_LIMIT.
    """
    partitions: set[bytes] = set()
    files = rows = size = 0
    for entry in read_entries(target, read_list(target, snapshot.delta_manifest_list)):
        if entry.kind == DELETE:
            files += 1
            rows += entry.file.row_count
            size += entry.file.file_size
            partitions.add(bytes(entry.partition))
    record.count("files_replaced", files)
    record.count("rows_replaced", rows)
    record.add_bytes("replaced", size)
    names = sorted(target.partition_dir(p) or "(the whole table)" for p in partitions)
    record.details["replaced"] = {
        "scope": scope,
        "partition_count": len(partitions),
        "partitions": names[:RECORD_PARTITION_LIMIT],
    }


def remove_created_table(target: Table, log: Log) -> None:
    """Remove the table this run created (its schema-0) after its first commit failed.

    Crash ordering: the data files went first (`_remove_unless_landed`), the schema goes last, so a
    crash in between leaves an empty table, as before this cleanup existed. Only a table with no
    snapshot at all and no schema but schema-0 is removed: a table another writer committed to
    meanwhile is theirs too and stays.
    """
    try:
        if target.snapshot_manager.latest_id() is not None or target.schema_manager.list_ids() != [0]:
            log.warning("not removing table %s: it has snapshots or newer schemas now", target.path)
            return
        target.file_io.delete(target.schema_manager.schema_path(0))
        if target.file_io.protocol == "file":
            _remove_empty_dirs(target.file_io.fs, target.path)
        log.info("removed table %s created by this run (its first commit failed)", target.path)
    except Exception:  # the commit's own error is what the user must see
        log.warning("could not remove the table %s this run created", target.path, exc_info=True)


def _remove_empty_dirs(fs: AbstractFileSystem, root: str) -> None:
    """Remove the empty directories under a local `root`, and `root` if it ends empty; never a file."""
    local_root = root[len("file://") :] if root.startswith("file://") else root
    for directory, _, _ in sorted(os.walk(local_root), key=lambda item: -len(item[0])):
        try:
            os.rmdir(directory)
        except OSError:
            pass  # not empty


def overwrite_filter(
    mode: str, scope: str, partitions: list[dict[str, Any]], schema: TableSchema, table: str
) -> PartitionTest | None:
    """The partitions an overwrite replaces (None = the whole table)."""
    if mode != "overwrite" or scope == "table":
        return None
    if scope == "partitions":
        if not partitions:
            raise BadInputError("overwrite_scope: partitions needs a non-empty `partitions` list")
        if not schema.partition_keys:
            raise BadInputError(f"table {table} is not partitioned: use overwrite_scope: table")
        try:
            chosen = {partition_bytes(spec, schema) for spec in partitions}
        except ValueError as error:
            raise BadInputError(f"partitions: {error}") from None
        return lambda p: p in chosen
    return None  # "touched": decided after the write, from the partitions written


def _remove_unless_landed(
    target: Table, committer: SnapshotCommit, previous: int | None, paths: list[str], log: Log
) -> None:
    """After a failed commit, delete our data files, unless a snapshot of ours landed after all."""
    landed = landed_snapshot(target, committer.commit_user, previous)
    if landed is not None:
        log.warning("commit raised but snapshot %d of this run exists: keeping its files", landed)
        return
    target.file_io.delete_many([target.full_path(p) for p in paths])
    log.info("commit failed: removed the %d data files this run wrote", len(paths))


def landed_snapshot(target: Table, commit_user: str, previous: int | None) -> int | None:
    """The id of a snapshot after `previous` committed by `commit_user`, or None: whether a commit
    that raised (or whose caller was told it failed) landed after all."""
    manager = target.snapshot_manager
    latest = manager.latest_id() or 0
    for snapshot_id in range((previous or 0) + 1, latest + 1):
        if manager.snapshot_exists(snapshot_id) and manager.snapshot(snapshot_id).commit_user == commit_user:
            return snapshot_id
    return None
