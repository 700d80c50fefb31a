"""remove-orphan-files: delete files in a table directory that nothing references (seed 004, issue #5).

The order is what makes it safe against a writer committing meanwhile:

1. List every file under the table directory (or read an `inventory`) on the executors, wave by
   wave (on S3 by disjoint key ranges, each key in one range), and checkpoint the listing: it is
   taken once, first.
2. Then read the referenced set on the executors: everything every snapshot, tag, branch and
   long-lived changelog needs. A commit that lands after step 1 wrote its files after the listing,
   so they are not candidates; one that lands before step 2 is in the referenced set. The read is
   lenient and judged before anything else (below: a live table whose writers expire).
3. Candidates = listed files whose names Paimon writes there (`paimon_format.maintenance.orphan_rules`),
   modified before (job start - `older_than`), LEFT ANTI JOIN referenced, by table-relative path.
4. Circuit breakers: refuse (exit 3) when nothing is referenced or when the candidates exceed
   `max_orphan_ratio` of the listed files, unless `force`.
5. Delete on the executors in batches (rate limit, retries); optionally remove empty bucket and
   partition directories, one rmdir each.

The driver holds counts and samples only. A dry run does steps 1-4 and reports what it would delete.

On a live table Paimon's Java writers expire their own snapshots and tags after each commit and
delete what only those needed, manifests included, possibly while step 2 reads a root it listed
(the soak refused 7 of 136 runs for that when step 2 was strict). Step 2 therefore notes a missing
manifest list, manifest or index manifest instead of failing (`referenced_paths(lenient=...)`), and
before any candidate is counted (so in a dry run too) the notes are judged
(`jobs.deletion.retained_read.judge_retained_read`, the rule expire-tags follows):

- a missing file is skipped only when no snapshot, tag or long-lived changelog of any branch
  present now names it (`vanished_manifests`, waiting out an expiry in progress). Consumers name
  snapshot ids, not files: the snapshots they hold are roots themselves;
- when anything was skipped (or a root was gone when read), each branch's latest snapshot at the
  root listing must have been read and still be there, before and after the verdicts;
- otherwise the run fails as the strict read did: MissingFileError (exit 3 when a writer committed
  during the run, else exit 2) or SafetyRefusal (exit 3), nothing deleted.

Why the files a skipped manifest named may then be orphans (an orphan job's danger is a file made an
"orphan" that a root still needs, and here every file not referenced is a candidate, not only a
dropped root's): a file a root present at delete time needs is named by a manifest that root names.
A root listed in step 2 and still present had all its manifests read, or the missing one is named
by it, so the run fails. A root made since is a snapshot committed during the run, whose files are
new (too young, or written after the listing) or carried from the branch's latest snapshot at
planning, which the second rule requires read whole; or a tag or branch made from a snapshot or tag
present when it was made, which names the missing manifest if the source did (then the verdict,
made after the read, fails the run). So a skipped manifest's files are needed by no present root,
exactly the files Java's expiry deletes itself (it deletes data files before manifests). A time
margin would add nothing: a manifest names files older than itself, so keeping candidates newer
than the vanished root keeps none of them, and keeping older ones keeps the whole table.

Spark-submit entry: `spark-submit jobs/remove_orphan_files.py --config conf/remove-orphan-files.yaml`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from jobs.deletion.deleter import delete_files, remove_empty_directories
from jobs.deletion.listing import Listing, list_table_files, read_inventory
from jobs.deletion.prefix_listing import estimated_objects, lists_by_key_ranges
from jobs.deletion.referenced import Referenced, referenced_paths
from jobs.deletion.retained_read import RetainedRead, judge_retained_read
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, JobError, SafetyRefusal
from jobs.runtime.local_exec import LocalRunOptions, run_where_it_fits
from jobs.runtime.local_frame import functions_for
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.maintenance.orphan_rules import (
    DELETABLE,
    FOREIGN,
    OLDER_THAN_FLOOR_MS,
    PROTECTED,
    FileNaming,
    cutoff_ms,
    exceeds_ratio,
)
from paimon_format.model.options import parse_duration_ms
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPERATION = "remove-orphan-files"
# What an unreferenced deletable file is: deleted now, or kept by the age filter.
ORPHAN, TOO_YOUNG = "orphan", "too-young"


class RemoveOrphanFilesConfig(TableJobConfig, LocalRunOptions):
    older_than: str = Field(
        default="1d", description="only files modified longer ago than this (e.g. 1d, 12h); floor 1h"
    )
    force: bool = Field(default=False, description="allow older_than below 1h and skip the circuit breakers")
    max_orphan_ratio: float = Field(
        default=0.5, gt=0, le=1, description="refuse when candidates exceed this share of the listed files"
    )
    inventory: str | None = Field(
        default=None, description="Parquet/CSV file list (path, size, modification time) instead of listing"
    )
    inventory_format: Literal["auto", "parquet", "csv"] = Field(
        default="auto", description="auto: csv for *.csv / *.csv.gz, else parquet"
    )
    delete_empty_dirs: bool = Field(default=False, description="rmdir bucket/partition dirs left empty")
    candidates_output: str | None = Field(
        default=None, description="write every candidate (path, size, modification_time_ms) here as CSV"
    )
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall delete rate")
    delete_retries: int = Field(default=3, ge=0, le=10, description="retries of a failed delete batch")

    @field_validator("older_than")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration_ms(value)  # ValueError names the unit problem; pydantic adds the key
        return value

    @model_validator(mode="after")
    def _floor(self) -> RemoveOrphanFilesConfig:
        if parse_duration_ms(self.older_than) < OLDER_THAN_FLOOR_MS and not self.force:
            raise ValueError(
                f"older_than: {self.older_than} is below the 1h floor; a running writer's uncommitted files "
                "could be deleted (set force: true only when no writer runs)"
            )
        return self


CONFIG_MODEL = RemoveOrphanFilesConfig


@dataclass(frozen=True)
class OrphanSettings:
    """What one run does, independent of YAML (the tests and the benchmark call the job with these)."""

    older_than_ms: int = 86_400_000
    force: bool = False
    max_orphan_ratio: float = 0.5
    inventory: str | None = None
    inventory_format: str = "auto"
    delete_empty_dirs: bool = False
    candidates_output: str | None = None
    delete_batch_size: int = 1000
    max_deletes_per_second: float | None = None
    delete_retries: int = 3

    @staticmethod
    def of(config: RemoveOrphanFilesConfig) -> OrphanSettings:
        return OrphanSettings(
            older_than_ms=parse_duration_ms(config.older_than),
            force=config.force,
            max_orphan_ratio=config.max_orphan_ratio,
            inventory=config.inventory,
            inventory_format=config.inventory_format,
            delete_empty_dirs=config.delete_empty_dirs,
            candidates_output=config.candidates_output,
            delete_batch_size=config.delete_batch_size,
            max_deletes_per_second=config.max_deletes_per_second,
            delete_retries=config.delete_retries,
        )


class DeletionFailed(JobError):
    """Some orphan files could not be deleted even after retries (the rest were)."""


def run(context: JobContext, config: RemoveOrphanFilesConfig) -> None:
    table = open_existing_table(config)
    settings = OrphanSettings.of(config)

    def job(spark: SparkSession) -> None:
        remove_orphan_files(
            spark, table, settings, dry_run=context.dry_run, record=context.record, log=context.log
        )

    # an inventory is read and the candidates written by Spark's own readers and writers
    in_driver = not (config.inventory or config.candidates_output)
    run_where_it_fits(context, table, config, job, allowed=in_driver, lists_files=True)


def remove_orphan_files(
    spark: SparkSession,
    table: Table,
    settings: OrphanSettings = OrphanSettings(),
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    after_listing: Callable[[], None] | None = None,
) -> RunRecord:
    """Find and (unless `dry_run`) delete the table's orphan files; `after_listing` is a test hook."""
    log = log or logging.getLogger("jobs.remove_orphan_files")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    started_ms = int(time.time() * 1000)
    try:
        cutoff = cutoff_ms(started_ms, settings.older_than_ms, settings.force)
    except ValueError as error:
        raise BadInputError(str(error)) from None
    naming = FileNaming.of(table.schema.options)
    record.details["older_than_ms"] = settings.older_than_ms
    record.details["cutoff_ms"] = cutoff
    record.details["source"] = "inventory" if settings.inventory else "listing"

    listed = _list(spark, table, settings, naming, record, log)
    crash_point(f"{OPERATION}:listed")
    if after_listing is not None:
        after_listing()

    read = RetainedRead()
    referenced = referenced_paths(spark, table, log, lenient=read)
    judge_retained_read(table, record, log, read, "")  # before any candidate, in a dry run too
    referenced_count = _record_referenced(record, referenced)
    crash_point(f"{OPERATION}:referenced")

    unreferenced = _unreferenced(spark, listed, referenced, cutoff)
    candidates = unreferenced.filter(functions_for(spark).col("status") == ORPHAN)
    try:
        found = _count_orphans(spark, listed, unreferenced, record)
        if found.orphans:
            record.sample("orphan_files", [row["path"] for row in candidates.limit(SAMPLE_LIMIT).collect()])
        log.info(
            "%s files listed, %s referenced, %s orphans (%s bytes) older than the cutoff",
            f"{found.listed:,}",
            f"{referenced_count:,}",
            f"{found.orphans:,}",
            f"{found.orphan_bytes:,}",
        )
        if settings.candidates_output:
            _write_candidates(candidates, settings.candidates_output)
            record.details["candidates_output"] = settings.candidates_output

        content_references = referenced_count - referenced.metadata_files
        _circuit_breakers(content_references, found.orphans, found.listed, settings)
        crash_point(f"{OPERATION}:planned")
        if dry_run:
            log.info(
                "dry run: %s files (%s bytes) would be deleted",
                f"{found.orphans:,}",
                f"{found.orphan_bytes:,}",
            )
            return record
        _delete_orphans(spark, table, candidates, found.orphans, settings, record, log)
        return record
    finally:
        unreferenced.unpersist()


def _record_referenced(record: RunRecord, referenced: Referenced) -> int:
    """What the referenced set read into the record; returns how many paths it holds."""
    record.snapshot_ids["branches"] = referenced.branches
    record.count("roots_read", referenced.roots)  # roots_vanished: `judge_retained_read`
    record.count("manifests_read", referenced.manifests)
    record.count("index_manifests_read", referenced.index_manifests)
    referenced_count = referenced.paths.count()
    record.count("referenced_files", referenced_count)
    return referenced_count


def _unreferenced(spark: SparkSession, listed: DataFrame, referenced: Referenced, cutoff: int) -> DataFrame:
    """The listed deletable files nothing references, each an ORPHAN (older than `cutoff`) or
    TOO_YOUNG; persisted (the caller unpersists it).

    The name rules were applied while listing; one anti join finds the unreferenced deletable files.
    It joins on a 64-bit hash of the path (a long sorts and shuffles far cheaper than the text, and
    the referenced side becomes a compact hash table): a referenced path always matches its own
    hash, and a collision can only make an orphan look referenced, i.e. kept, never deleted.
    """
    # pyspark's storage level (a LocalSession ignores it); not at the top: `--help` never loads pyspark
    from pyspark import StorageLevel

    F = functions_for(spark)
    return (
        listed.filter(F.col("rule") == DELETABLE)
        .withColumn("key", F.xxhash64("path"))
        .join(
            referenced.paths.select(F.xxhash64("path").alias("key")).hint("shuffle_hash"), "key", "left_anti"
        )
        .withColumn(
            "status",
            F.when(F.col("modification_time_ms") < cutoff, F.lit(ORPHAN)).otherwise(F.lit(TOO_YOUNG)),
        )
        .select("path", "size", "modification_time_ms", "kind", "status")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )


@dataclass(frozen=True)
class _Found:
    listed: int
    orphans: int
    orphan_bytes: int


def _count_orphans(
    spark: SparkSession, listed: DataFrame, unreferenced: DataFrame, record: RunRecord
) -> _Found:
    """Listed files by rule, unreferenced ones by status and kind, into the record (counts, bytes, a
    sample of foreign files)."""
    F = functions_for(spark)
    by_rule = {
        row["rule"]: (row["files"], row["bytes"] or 0)
        for row in listed.groupBy("rule")
        .agg(F.count("*").alias("files"), F.sum("size").alias("bytes"))
        .collect()
    }
    summary = (
        unreferenced.groupBy("status", "kind")
        .agg(F.count("*").alias("files"), F.sum("size").alias("bytes"))
        .collect()
    )
    files_by = {ORPHAN: 0, TOO_YOUNG: 0}
    bytes_by = dict.fromkeys(files_by, 0)
    orphans_by_kind: dict[str, int] = {}
    for row in summary:
        files_by[row["status"]] += row["files"]
        bytes_by[row["status"]] += row["bytes"] or 0
        if row["status"] == ORPHAN:
            orphans_by_kind[row["kind"]] = row["files"]
    listed_count = sum(files for files, _ in by_rule.values())
    record.count("listed_files", listed_count)
    record.add_bytes("listed", sum(size for _, size in by_rule.values()))
    record.count("protected_files", by_rule.get(PROTECTED, (0, 0))[0])
    record.count("foreign_files", by_rule.get(FOREIGN, (0, 0))[0])
    record.count("too_young_files", files_by[TOO_YOUNG])
    record.count("orphan_files", files_by[ORPHAN])
    record.add_bytes("orphans", bytes_by[ORPHAN])
    record.details["orphans_by_kind"] = orphans_by_kind
    if by_rule.get(FOREIGN):
        sample = listed.filter(F.col("rule") == FOREIGN).select("path").limit(SAMPLE_LIMIT)
        record.sample("foreign_files", [row["path"] for row in sample.collect()])
    return _Found(listed_count, files_by[ORPHAN], bytes_by[ORPHAN])


def _write_candidates(candidates: DataFrame, url: str) -> None:
    """Every candidate (path, size, modification time) as CSV with a header, by Spark's writer."""
    candidates.select("path", "size", "modification_time_ms").write.mode("errorifexists").option(
        "header", "true"
    ).csv(_spark_path(url))


def _delete_orphans(
    spark: SparkSession,
    table: Table,
    candidates: DataFrame,
    orphan_count: int,
    settings: OrphanSettings,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> None:
    """Delete the candidates on the executors, then (if asked) the directories left empty; files that
    could not be deleted after the retries fail the run (exit 1) once the rest are gone."""
    outcome = delete_files(
        spark,
        candidates,
        table.file_io,
        table.path,
        orphan_count,
        batch_size=settings.delete_batch_size,
        max_per_second=settings.max_deletes_per_second,
        retries=settings.delete_retries,
    )
    record.count("files_deleted", outcome.deleted)
    record.add_bytes("deleted", outcome.bytes)
    record.count("files_already_absent", outcome.absent)
    record.count("files_failed", outcome.failed)
    crash_point(f"{OPERATION}:deleted")
    if settings.delete_empty_dirs:
        removed = remove_empty_directories(spark, candidates.select("path"), table.file_io, table.path)
        record.count("directories_removed", removed)
    log.info("deleted %s files (%s bytes)", f"{outcome.deleted:,}", f"{outcome.bytes:,}")
    if outcome.failed:
        raise DeletionFailed(
            f"{outcome.failed:,} of {orphan_count:,} orphan files could not be deleted after "
            f"{settings.delete_retries} retries (a rerun retries them): {'; '.join(outcome.errors)}"
        )


def _list(
    spark: SparkSession,
    table: Table,
    settings: OrphanSettings,
    naming: FileNaming,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> DataFrame:
    if settings.inventory:
        log.info("reading the inventory %s instead of listing", settings.inventory)
        return read_inventory(spark, settings.inventory, table.path, naming, settings.inventory_format)
    expected = estimated_objects(table) if lists_by_key_ranges(table.file_io) else None
    listing: Listing = list_table_files(spark, table.file_io, table.path, naming, log, expected)
    record.count("directories_listed", listing.directories)
    record.count("directories_vanished", listing.vanished_directories)
    record.count("listing_waves", listing.waves)
    if listing.ranges:  # listed by key ranges (object stores): LIST requests are pages, not directories
        record.count("listing_key_ranges", listing.ranges)
        record.count("listing_pages", listing.pages)
    return listing.files


def _circuit_breakers(content_references: int, orphans: int, listed: int, settings: OrphanSettings) -> None:
    """Refuse before deleting anything when the result looks like a wrong table or a broken read."""
    if settings.force:
        return
    if content_references <= 0:
        raise SafetyRefusal(
            "the referenced set is empty (no snapshot, tag or changelog references any file): refusing to "
            "treat every file as an orphan (set force: true if the table really has no snapshot)"
        )
    if exceeds_ratio(orphans, listed, settings.max_orphan_ratio):
        raise SafetyRefusal(
            f"{orphans:,} of {listed:,} listed files ({orphans / listed:.0%}) would be deleted, more than "
            f"max_orphan_ratio {settings.max_orphan_ratio:.0%}; check the table and older_than, then raise "
            "max_orphan_ratio or set force: true"
        )


def _spark_path(url: str) -> str:
    """Spark's Hadoop filesystems name S3 s3a://; every other fsspec URL is the same for both."""
    return "s3a://" + url[len("s3://") :] if url.startswith("s3://") else url


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
