"""Deleting what dropped roots alone needed: the retained side of every deletion job, and its stages.

A maintenance job that drops metadata roots (expired snapshots or changelogs, deleted or expired tags,
snapshots a rollback discards) deletes their files in one shape:

- candidates: a DataFrame (path, size, stage) of what the dropped roots named;
- minus (LEFT ANTI JOIN) `retained_needs`: what every root that stays needs (every snapshot, tag and
  long-lived changelog of every branch, unless the job's `keep_root` says it is dropped), read
  strictly on the executors: a failed read fails the job, never protects less;
- deleted in stages: data, changelog and index files, then manifests, index manifests and statistics,
  then manifest lists (`delete_stages`), so that a crash between stages leaves every retained root
  readable and a rerun finds the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from jobs.deletion.deleter import delete_files
from jobs.runtime.local_frame import functions_for
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.spark import parallelize_small
from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import MissingFileError, SnapshotNotFoundError, StorageError
from paimon_format.maintenance.references import (
    CHANGELOG_ROOT,
    PENDING_TAG_ROOT,
    SNAPSHOT_ROOT,
    TAG_ROOT,
    RootReferences,
    chained_root_references,
    changelog_needs_entry,
    index_manifest_references,
    metadata_file_relpaths,
    root_references,
    snapshot_metadata_files,
)
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import ADD
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

# Deletion stages, in order.
FILES, MANIFESTS, LISTS = 0, 1, 2
ALREADY_DELETED = 9  # not a deletion stage: metadata of expiring snapshots found missing (counted only)
STAGE_NAMES = {FILES: "files", MANIFESTS: "manifests", LISTS: "manifest_lists"}


def report_candidates(candidates: Any, record: RunRecord, prefix: str) -> dict[int, tuple[int, int]]:
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
        logging.getLogger("jobs.expire_snapshots").warning(
            "%d manifests or lists of expiring %s were already deleted (an earlier run was interrupted "
            "after deleting data files); skipped",
            missing,
            "changelogs" if prefix else "snapshots",
        )
    return totals


def delete_stages(
    spark: Any,
    table: Table,
    candidates: Any,
    totals: dict[int, tuple[int, int]],
    prefix: str,
    steps: tuple[str, str, str],
    record: RunRecord,
    log: Any,
    batch_size: int,
    max_per_second: float | None,
) -> None:
    """Files, then manifests, then manifest lists; a failed delete stops before the next stage."""
    for stage, step in zip((FILES, MANIFESTS, LISTS), steps, strict=True):
        total = totals.get(stage, (0, 0))[0]
        outcome = delete_files(
            spark,
            candidates.filter(f"stage = {stage}"),
            table.file_io,
            table.path,
            total,
            batch_size=batch_size,
            max_per_second=max_per_second,
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
        log.info("deleted %d %s (%d already absent)", outcome.deleted, name, outcome.absent)
        crash_point(step)


_NEEDS_COLUMNS = "root string, what string, value string"
_NEEDS_SCHEMA = pa.schema([("root", pa.string()), ("what", pa.string()), ("value", pa.string())])
_LIVE_COLUMNS = "manifest string, path string, delta int, appended int"
_LIVE_SCHEMA = pa.schema(
    [("manifest", pa.string()), ("path", pa.string()), ("delta", pa.int32()), ("appended", pa.int32())]
)
ROOT_LIMIT = 1_000_000


def retained_needs(
    spark: Any,
    table: Table,
    file_candidates: Any,
    keep_root: Callable[[str, str, str], bool],
    extra_roots: list[tuple[str, str, str]],
    log: Any,
    chain_end: int | None = None,
    stats: dict[str, int] | None = None,
) -> Any:
    """Paths the retained roots need among the candidates: a DataFrame of one `path` column.

    Roots: every snapshot kept, every tag and long-lived changelog of every branch, plus
    `extra_roots` (changelogs this run writes). Their metadata files (lists, manifests, index
    manifest, statistics) and index files count as needed as named.
    A data or changelog file is needed when it is *live* in some root: added more often than
    deleted within that root's manifests (a level upgrade deletes and re-adds the same file name).
    Of a changelog's delta manifests (no changelog producer) every append-origin entry counts, ADD
    or DELETE (`scan.changelog_needs_entry`): compaction output is not changelog.
    A DELETE entry alone does not protect a file, or nothing deleted before the last manifest
    compaction could ever expire. Every read here is strict: a failure fails the job.

    `chain_end` (expire-snapshots only, whose file candidates are the files whose last entry in the
    expiring deltas up to snapshot `chain_end` of `table.branch` is not an ADD): the retained
    snapshots of that branch, and its tags on them, are read by `orphans.chained_root_references`,
    i.e. their base manifests are kept by name and not read (Paimon's delta-chain proof); every other
    root is read in full. Without file candidates no manifest is read at all: names protect the
    metadata candidates, and only file candidates need liveness. `stats` receives how many roots
    and manifests were read.
    """
    F = functions_for(spark)

    parallelism = max(1, spark.sparkContext.defaultParallelism)
    roots: list[tuple[str, str, str]] = []
    for branch in [MAIN_BRANCH, *table.branch_manager.branch_names()]:
        _files, branch_roots = metadata_file_relpaths(table, branch)
        roots.extend((branch, kind, name) for kind, name in branch_roots if keep_root(branch, kind, name))
    roots.extend(extra_roots)
    log.info("reading what %d retained snapshots, tags and changelogs need", len(roots))
    root_frame = spark.createDataFrame(
        parallelize_small(spark, roots, limit=ROOT_LIMIT, what="retained roots"),
        "branch string, kind string, name string",
    )

    chain_branch = table.branch

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {"root": [], "what": [], "value": []}
            for branch, kind, name in zip(
                *(batch.column(c).to_pylist() for c in ("branch", "kind", "name")), strict=True
            ):
                if chain_end is not None and branch == chain_branch and kind in (SNAPSHOT_ROOT, TAG_ROOT):
                    found = chained_root_references(table.for_branch(branch), kind, name, chain_end)
                else:
                    found = root_references(table.for_branch(branch), kind, name)
                if found is None:
                    continue  # expired concurrently: needs nothing
                key = f"{branch}/{kind}/{name}"
                values = [("file", path) for path in found.files] + [
                    (_manifest_mode(found, m), m) for m in found.manifests
                ]
                if found.index_manifest:
                    values.append(("index", found.index_manifest))
                for what, value in values:
                    out["root"].append(key)
                    out["what"].append(what)
                    out["value"].append(value)
            yield pa.RecordBatch.from_pydict(out, schema=_NEEDS_SCHEMA)

    needs = root_frame.mapInArrow(read_roots, _NEEDS_COLUMNS).localCheckpoint(eager=True)
    named = needs.filter(F.col("what") == "file").select(F.col("value").alias("path"))
    if stats is not None:
        stats["retained_roots"] = len(roots)
    if file_candidates.limit(1).count() == 0:
        log.info("no data, changelog or index file to delete: retained manifests are kept by name, not read")
        if stats is not None:
            stats["retained_manifests_read"] = 0
        return named.distinct()
    index_names = needs.filter(F.col("what") == "index").select("value").distinct()

    def read_index(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths = [
                p
                for name in batch.column("value").to_pylist()
                for p in index_manifest_references(table, name)
            ]
            yield pa.RecordBatch.from_pydict({"path": paths}, schema=pa.schema([("path", pa.string())]))

    index_files = index_names.mapInArrow(read_index, "path string")
    root_manifests = (
        needs.filter(F.col("what").isin(_BALANCE, _APPENDED, _ADDED))
        .select("root", F.col("value").alias("manifest"), F.col("what").alias("mode"))
        .dropDuplicates()
    )
    manifests = root_manifests.select("manifest").distinct()
    if stats is not None:
        stats["retained_manifests_read"] = manifests.count()

    def read_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name in batch.column("manifest").to_pylist():
                out: dict[str, list] = {"manifest": [], "path": [], "delta": [], "appended": []}
                for entry in read_manifest(table.file_io, table.manifest_path(name)):
                    appended = 1 if changelog_needs_entry(entry, appended_only=True) else 0
                    for path in table.entry_relpaths(entry):
                        out["manifest"].append(name)
                        out["path"].append(path)
                        out["delta"].append(1 if entry.kind == ADD else -1)
                        out["appended"].append(appended)
                yield pa.RecordBatch.from_pydict(out, schema=_LIVE_SCHEMA)

    entries = manifests.repartition(parallelism * 2).mapInArrow(read_entries, _LIVE_COLUMNS)
    live = (
        entries.join(file_candidates.select("path"), "path", "left_semi")
        .join(root_manifests, "manifest")
        .groupBy("root", "mode", "path")
        .agg(
            F.sum(
                F.when(F.col("mode") == _APPENDED, F.col("appended")).otherwise(
                    F.when(
                        F.col("mode") == _ADDED, F.when(F.col("delta") > 0, F.lit(1)).otherwise(F.lit(0))
                    ).otherwise(F.col("delta"))
                )
            ).alias("balance")
        )
        .filter(F.col("balance") > 0)
        .select("path")
    )
    return named.unionByName(index_files).unionByName(live).distinct()


# how a retained root's manifest counts: entries' balance (live files), append-origin entries of a
# changelog's delta (`scan.changelog_needs_entry`), or every ADD entry (a delta after a chain's end)
_BALANCE, _APPENDED, _ADDED = "manifest", "appended", "added"


def _manifest_mode(found: RootReferences, manifest: str) -> str:
    if manifest in found.added_only:
        return _ADDED
    return _APPENDED if manifest in found.appended_only else _BALANCE


_DROPPED_COLUMNS = "root string, what string, value string, size long"
_DROPPED_SCHEMA = pa.schema(
    [("root", pa.string()), ("what", pa.string()), ("value", pa.string()), ("size", pa.int64())]
)
_ENTRY_COLUMNS = "manifest string, path string, delta int, size long"
_ENTRY_SCHEMA = pa.schema(
    [("manifest", pa.string()), ("path", pa.string()), ("delta", pa.int32()), ("size", pa.int64())]
)
_MISSING_DELTA = -1000  # a manifest of a dropped root found missing (counted, stage ALREADY_DELETED)
_CANDIDATE_SCHEMA = pa.schema([("path", pa.string()), ("size", pa.int64()), ("stage", pa.int32())])


def _metadata_stage(relative_path: str) -> int:
    """Manifest lists go last (they name the manifests); manifests, index manifests, statistics before."""
    return LISTS if relative_path.rsplit("/", 1)[-1].startswith("manifest-list-") else MANIFESTS


def dropped_root_candidates(
    spark: Any,
    table: Table,
    dropped: list[tuple[str, str, str]],
    keep_root: Callable[[str, str, str], bool],
    extra_roots: list[tuple[str, str, str]],
    log: Any,
) -> Any:
    """What the `dropped` roots (branch, kind, name) alone need: a checkpointed DataFrame (path,
    size, stage) for `delete_stages`.

    Each dropped root is read on the executors: its manifest lists, manifests, index manifest and
    statistics (stages MANIFESTS/LISTS), its index files, and every data or changelog file *live* in it (added
    more often than deleted within its manifests; stage FILES). Minus (anti join) `retained_needs`:
    everything every root that `keep_root` keeps needs, plus `extra_roots`. `keep_root` must say
    False for every dropped root, else nothing of it is ever a candidate.

    The dropped side is read leniently, as expire-snapshots reads its expiring snapshots: a manifest
    list or manifest an interrupted run already deleted (after everything it names, by the stage
    order) is counted as stage ALREADY_DELETED; any other read error fails. Missing metadata only
    ever means deleting less. The retained side is always strict.
    """
    F = functions_for(spark)

    parallelism = max(1, spark.sparkContext.defaultParallelism)
    root_frame = spark.createDataFrame(
        parallelize_small(spark, dropped, limit=ROOT_LIMIT, what="dropped roots"),
        "branch string, kind string, name string",
    )

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {"root": [], "what": [], "value": [], "size": []}
            for branch, kind, name in zip(
                *(batch.column(c).to_pylist() for c in ("branch", "kind", "name")), strict=True
            ):
                branch_table = table.for_branch(branch)
                try:
                    found = root_references(branch_table, kind, name)
                except MissingFileError:
                    found = _half_deleted_root(branch_table, kind, name)
                    out["root"].append(f"{branch}/{kind}/{name}")
                    out["what"].append("missing")
                    out["value"].append(f"{branch}/{kind}/{name}")
                    out["size"].append(0)
                if found is None:
                    continue  # gone already: a rerun after its files went, or dropped concurrently
                key = f"{branch}/{kind}/{name}"
                values = [("file", path) for path in found.files]
                values += [("manifest", manifest) for manifest in found.manifests]
                if found.index_manifest:
                    values.append(("index", found.index_manifest))
                for what, value in values:
                    out["root"].append(key)
                    out["what"].append(what)
                    out["value"].append(value)
                    out["size"].append(0)
            yield pa.RecordBatch.from_pydict(out, schema=_DROPPED_SCHEMA)

    named = root_frame.mapInArrow(read_roots, _DROPPED_COLUMNS).localCheckpoint(eager=True)
    stage_of = F.udf(_metadata_stage, "int")
    metadata = (
        named.filter(F.col("what") == "file")
        .select(F.col("value").alias("path"))
        .distinct()
        .select("path", F.lit(0).cast("long").alias("size"), stage_of("path").alias("stage"))
    )

    def read_index(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths: list[str] = []
            for name in batch.column("value").to_pylist():
                try:
                    paths.extend(index_manifest_references(table, name))
                except MissingFileError:  # deleted by an interrupted run, after its index files
                    continue
            yield pa.RecordBatch.from_pydict(
                {"path": paths, "size": [0] * len(paths), "stage": [FILES] * len(paths)},
                schema=_CANDIDATE_SCHEMA,
            )

    index_files = (
        named.filter(F.col("what") == "index")
        .select("value")
        .distinct()
        .mapInArrow(read_index, "path string, size long, stage int")
    )
    root_manifests = (
        named.filter(F.col("what") == "manifest")
        .select("root", F.col("value").alias("manifest"))
        .dropDuplicates()
    )

    def read_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name in batch.column("manifest").to_pylist():
                out: dict[str, list] = {"manifest": [], "path": [], "delta": [], "size": []}
                try:
                    entries = read_manifest(table.file_io, table.manifest_path(name))
                except MissingFileError:  # deleted by an interrupted run, after its files
                    entries = []
                    out["manifest"].append(name)
                    out["path"].append(f"manifest/{name}")
                    out["delta"].append(_MISSING_DELTA)
                    out["size"].append(0)
                for entry in entries:
                    for number, path in enumerate(table.entry_relpaths(entry)):
                        out["manifest"].append(name)
                        out["path"].append(path)
                        out["delta"].append(1 if entry.kind == ADD else -1)
                        out["size"].append(entry.file.file_size if number == 0 else 0)
                yield pa.RecordBatch.from_pydict(out, schema=_ENTRY_SCHEMA)

    entries = (
        root_manifests.select("manifest")
        .distinct()
        .repartition(parallelism * 2)
        .mapInArrow(read_entries, _ENTRY_COLUMNS)
    )
    entries = entries.localCheckpoint(eager=True)
    missing = (
        entries.filter(F.col("delta") == _MISSING_DELTA)
        .select("path")
        .unionByName(named.filter(F.col("what") == "missing").select(F.col("value").alias("path")))
        .distinct()
        .select("path", F.lit(0).cast("long").alias("size"), F.lit(ALREADY_DELETED).alias("stage"))
    )
    live = (
        entries.filter(F.col("delta") != _MISSING_DELTA)
        .join(root_manifests, "manifest")
        .groupBy("root", "path")
        .agg(F.sum("delta").alias("balance"), F.max("size").alias("size"))
        .filter(F.col("balance") > 0)
        .groupBy("path")
        .agg(F.max("size").alias("size"))
        .select("path", "size", F.lit(FILES).alias("stage"))
    )
    everything = (
        live.unionByName(index_files)
        .unionByName(metadata)
        .unionByName(missing)
        .groupBy("path")
        .agg(F.max("size").alias("size"), F.min("stage").alias("stage"))
        .localCheckpoint(eager=True)
    )
    protected = retained_needs(
        spark, table, everything.filter(F.col("stage") == FILES), keep_root, extra_roots, log
    )
    candidates = everything.join(protected, "path", "left_anti").localCheckpoint(eager=True)
    named.unpersist()
    entries.unpersist()
    everything.unpersist()
    return candidates


def _half_deleted_root(table: Table, kind: str, name: str) -> RootReferences | None:
    """A dropped root one of whose manifest lists an interrupted run already deleted: by the stage
    order its files and manifests went before, so only its own metadata files are left to delete."""
    manager = table.tag_manager
    try:
        if kind == TAG_ROOT:
            snapshot = manager.tag(name)
        elif kind == PENDING_TAG_ROOT:
            snapshot = manager.pending_deletion(name)
        elif kind == CHANGELOG_ROOT:
            snapshot = table.snapshot_manager.changelog(int(name))
        else:
            snapshot = table.snapshot_manager.snapshot(int(name))
    except SnapshotNotFoundError:
        return None
    return RootReferences(snapshot_metadata_files(snapshot), [], None)
