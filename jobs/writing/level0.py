"""The write job on primary-key tables whose batch reads skip level 0 (deletion vectors, first-row).

Paimon's batch scans leave level-0 files out on such tables (`batchScanSkipLevel0`), so rows a
writer leaves at level 0 are invisible until a compaction. Paimon's own writer therefore compacts
level 0 up when it commits (an APPEND snapshot, then a COMPACT one); the write job does the same
with the compact job's rewrite, for the buckets it wrote. With `changelog-producer` lookup or
full-compaction that compaction also produces the changelog of the rows written, as Paimon's does.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobs.compaction.run import CompactRequest, compact_table
from jobs.runtime.errors import BadInputError
from jobs.runtime.report import RunRecord
from paimon_format.compaction.changelog import changelog_rule
from paimon_format.errors import PaimonFormatError
from paimon_format.merge.table_engine import check_merge_supported
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def compacts_level0(schema: TableSchema, table: str) -> bool:
    """Whether the rows this job writes must be compacted out of level 0 to become visible.

    Batch reads of primary-key tables with deletion vectors or the first-row engine skip level 0
    (Paimon's `batchScanSkipLevel0`), so Paimon's writer compacts level 0 up when it commits (an
    APPEND snapshot, then a COMPACT one); this job does the same with the compact job's rewrite,
    which with `changelog-producer` lookup or full-compaction also writes the changelog.
    A table that compaction cannot merge is refused (exit 2) before anything is written.
    """
    if not schema.primary_keys:
        return False
    try:
        options = CoreOptions(schema.options)
        skips = options.deletion_vectors_enabled or options.merge_engine == "first-row"
        options.changelog_producer  # noqa: B018 - a bad value is refused here, before writing
    except ValueError as error:
        raise BadInputError(f"table {table}: {error}") from None
    if not skips:
        return False
    reason = "deletion-vectors.enabled" if options.deletion_vectors_enabled else "merge-engine first-row"
    try:
        changelog_rule(schema, options, 0)
    except ValueError as error:
        raise BadInputError(f"table {table}: {error}") from None

    try:
        check_merge_supported(schema, options)
    except PaimonFormatError as error:
        raise BadInputError(
            f"table {table}: with {reason}, written rows become visible only after a compaction, "
            f"which this job cannot do here: {error}"
        ) from None
    return True


def compact_written_buckets(
    spark: SparkSession,
    target: Table,
    touched: set[tuple[bytes, int]],
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> None:
    """Compact the buckets just written (deletion vectors / first-row: level 0 is invisible to reads).

    Crash ordering: the APPEND snapshot has landed; the compact job writes new files and commits a
    COMPACT snapshot (create-if-absent) that replaces the buckets' files. A crash in between leaves
    the rows committed but at level 0, where batch reads do not see them until a compaction (a
    rerun of the compact job on the table, or Paimon's own) moves them; the files the interrupted
    compaction wrote are unreferenced (remove-orphan-files). A rival commit that removed one of
    the inputs makes the compaction give up with exit 3, the APPEND snapshot staying committed.
    """
    log.info(
        "batch reads of this table skip level 0: compacting the %d bucket(s) written, as Paimon's "
        "writer does at commit",
        len(touched),
    )
    compaction = RunRecord(operation="compact", table=record.table, dry_run=False)
    compact_table(spark, target, CompactRequest(buckets=touched), record=compaction, log=log)
    committed = compaction.snapshot_ids.get("committed")
    if committed is not None:
        record.committed(committed)
    record.details["compaction"] = {
        "snapshot": committed,
        "buckets": compaction.counts.get("buckets", 0),
        "files_rewritten": compaction.counts.get("files_rewritten", 0),
        "files_written": compaction.counts.get("files_written", 0),
    }
