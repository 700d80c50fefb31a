"""Deleting a run's candidates in stages, and what the run record says about them.

Candidates are a DataFrame (path, size, stage). They go in stages: data, changelog and index files,
then manifests, index manifests and statistics, then manifest lists (`delete_stages`), so that a
crash between stages leaves every retained root readable and a rerun finds the rest: a manifest
list names the manifests, a manifest names the files, and nothing is deleted before what names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.deletion.context import DeletionContext
from jobs.deletion.deleter import delete_files
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from paimon_format.errors import StorageError
from paimon_format.maintenance.read_memo import forget_reads
from paimon_format.storage.crash_points import crash_point

if TYPE_CHECKING:
    import logging

    from pyspark.sql import DataFrame

# Deletion stages, in order.
FILES, MANIFESTS, LISTS = 0, 1, 2
ALREADY_DELETED = 9  # not a deletion stage: metadata of expiring snapshots found missing (counted only)
STAGE_NAMES = {FILES: "files", MANIFESTS: "manifests", LISTS: "manifest_lists"}

# {stage: (files, bytes)}
StageTotals = dict[int, tuple[int, int]]


def report_candidates(
    candidates: DataFrame, record: RunRecord, prefix: str, log: logging.Logger | logging.LoggerAdapter
) -> StageTotals:
    """Counts, bytes and samples per stage into the record; returns {stage: (files, bytes)}."""
    totals = {
        row["stage"]: (row["files"], row["bytes"] or 0)
        for row in candidates.groupBy("stage")
        .agg({"path": "count", "size": "sum"})
        .withColumnRenamed("count(path)", "files")
        .withColumnRenamed("sum(size)", "bytes")
        .collect()
    }
    sample = candidates.filter(f"stage < {ALREADY_DELETED}").limit(3 * SAMPLE_LIMIT).collect()
    for stage, name in STAGE_NAMES.items():
        files, nbytes = totals.get(stage, (0, 0))
        record.count(f"{prefix}{name}_to_delete", files)
        record.add_bytes(f"{prefix}{name}_to_delete", nbytes)
        record.sample(f"{prefix}{name}_to_delete", [row["path"] for row in sample if row["stage"] == stage])
    missing = totals.get(ALREADY_DELETED, (0, 0))[0]
    record.count(f"{prefix}already_deleted_metadata", missing)
    if missing:
        log.warning(
            "%d manifests or lists of expiring %s were already deleted (an earlier run was interrupted "
            "after deleting data files); skipped",
            missing,
            "changelogs" if prefix else "snapshots",
        )
    return totals


def report_candidates_if_any(
    candidates: DataFrame | None, record: RunRecord, log: logging.Logger | logging.LoggerAdapter
) -> StageTotals:
    """`report_candidates` (no prefix) for a plan that may have nothing to clean up: `candidates`
    None (nothing dropped needs a file cleanup) still records zero counts, and returns no totals."""
    if candidates is not None:
        return report_candidates(candidates, record, "", log)
    for name in STAGE_NAMES.values():
        record.count(f"{name}_to_delete", 0)
        record.add_bytes(f"{name}_to_delete", 0)
    return {}


def delete_stages(
    deletion: DeletionContext,
    candidates: DataFrame,
    totals: StageTotals,
    prefix: str,
    steps: tuple[str, str, str],
) -> None:
    """Files, then manifests, then manifest lists; a failed delete stops before the next stage.
    `steps` are the caller's crash points, passed after each stage. The run's read memo is dropped
    afterwards: the deletes may have run on executors, which the driver's memo does not see."""
    try:
        _delete_each_stage(deletion, candidates, totals, prefix, steps)
    finally:
        forget_reads(deletion.table.file_io)


def _delete_each_stage(
    deletion: DeletionContext,
    candidates: DataFrame,
    totals: StageTotals,
    prefix: str,
    steps: tuple[str, str, str],
) -> None:
    table, record = deletion.table, deletion.record
    for stage, step in zip((FILES, MANIFESTS, LISTS), steps, strict=True):
        total = totals.get(stage, (0, 0))[0]
        outcome = delete_files(
            deletion.spark,
            candidates.filter(f"stage = {stage}"),
            table.file_io,
            table.path,
            total,
            batch_size=deletion.pace.batch_size,
            max_per_second=deletion.pace.max_per_second,
        )
        name = f"{prefix}{STAGE_NAMES[stage]}"
        record.count(f"{name}_deleted", outcome.deleted)
        record.add_bytes(f"{name}_deleted", outcome.bytes)
        record.count(f"{name}_already_absent", outcome.absent)
        if outcome.failed:
            raise StorageError(
                f"{table.path}: {outcome.failed} of {total} {name} could not be deleted "
                f"({'; '.join(outcome.errors)}); stopped before the next step, a rerun continues"
            )
        deletion.log.info("deleted %d %s (%d already absent)", outcome.deleted, name, outcome.absent)
        crash_point(step)
