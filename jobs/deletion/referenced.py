"""Every file a table still needs, as a DataFrame of table-relative paths, read on the executors.

The same set as `paimon_format.maintenance.references.referenced_files` (which reads it in one
process), built in three distributed steps so that neither the driver nor one task holds a table's
worth of entries:

1. The driver lists each branch's metadata directories: schema ids, snapshot ids, tag names and
   long-lived changelog ids (a small plan). Those files are referenced themselves.
2. Executors read each root (snapshot, tag, changelog JSON) and its manifest lists: manifest lists,
   index manifest, statistics and the manifest names. Up to DRIVER_ROOTS roots are read on the
   driver instead, since one Spark job costs more than reading a few snapshots.
3. Manifest names and index manifest names are de-duplicated (tags and snapshots share most of them)
   and read once each, on executors: data files with extra files, changelog files, index files.

Each task (and the driver) keeps `FileIO.io_parallelism` reads in flight (`roots.rows_in_flight`):
on an object store a read waits tens of milliseconds before its first byte, so reading roots and
manifests one after another would be bound by latency; decoding one manifest overlaps fetching the
next. Rows come out in the same order as from a plain loop.

Read strictly (the default), any read error fails the job: a missing or corrupt manifest would make
its files look unreferenced. Only a root deleted between listing and reading (expired concurrently)
is skipped, as it then needs nothing.

Read leniently (`lenient`, remove-orphan-files on a live table): a manifest list, manifest or index
manifest found missing is noted in the `RetainedRead` instead (`jobs.deletion.retained_read`, as
expire-tags reads its retained roots), and so are the roots gone when read, the snapshots as read
and each branch's latest snapshot among the roots listed. What a missing file named is NOT in the
referenced set, so the caller MUST judge every note (`judge_retained_read`) before it uses the set
to choose anything to delete. The notes and the paths come from one read: a missing manifest's row
(`MISSING_MARK` + its path) travels in the checkpointed paths and is taken out of them here.
Corrupt files and every other error still fail the job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.deletion.retained_read import (
    MISSING_LIMIT,
    MISSING_MARK,
    NOTES,
    RetainedRead,
    add_note,
    collect_notes,
    read_retained_root,
)
from jobs.deletion.roots import ArrowMapper, each_branch, rows_in_flight
from jobs.runtime.local_frame import functions_for
from jobs.runtime.spark import driver_list_frame, parallelize_small
from paimon_format.errors import MissingFileError
from paimon_format.maintenance.references import (
    RELPATH_LISTINGS,
    branch_prefix,
    index_manifest_references,
    manifest_references,
    metadata_file_relpaths,
    root_references,
)
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REFERENCED_COLUMNS = "path string"
_PATH_SCHEMA = pa.schema([("path", pa.string())])
_ROOT_OUT_COLUMNS = "what string, value string"
_ROOT_OUT_SCHEMA = pa.schema([("what", pa.string()), ("value", pa.string())])
_FILE, _MANIFEST, _INDEX_MANIFEST, _VANISHED = "file", "manifest", "index-manifest", "vanished"
_BATCH_ROWS = 20_000
# Roots per table: snapshots retained plus tags and changelogs; far below this in any sane table.
ROOT_LIMIT = 1_000_000
# Up to this many roots are read on the driver (a Spark job costs more than reading a few snapshots).
DRIVER_ROOTS = 64


@dataclass
class Referenced:
    """The referenced paths (a checkpointed DataFrame of REFERENCED_COLUMNS) and the driver's counts."""

    paths: DataFrame
    branches: int
    metadata_files: int  # schema, snapshot, tag, changelog files themselves (not what they reference)
    roots: int
    vanished_roots: int
    manifests: int
    index_manifests: int


def _root_rows(table: Table, branch: str, kind: str, name: str, lenient: bool) -> list[tuple[str, str]]:
    """(what, value) rows of what one root names: files by path, manifests and index manifests by
    name; `lenient`: also the notes of `read_retained_root` (a missing list noted, not raised)."""
    if lenient:
        found, notes = read_retained_root(table, branch, kind, name)
        rows = list(notes)
    else:
        found = root_references(table.for_branch(branch), kind, name)
        rows = [] if found is not None else [(_VANISHED, f"{branch_prefix(branch)}{kind}/{name}")]
    if found is None:
        return rows
    rows += [(_FILE, path) for path in found.files] + [(_MANIFEST, m) for m in found.manifests]
    if found.index_manifest:
        rows.append((_INDEX_MANIFEST, found.index_manifest))
    return rows


def _root_reader(table: Table, lenient: bool) -> ArrowMapper:
    def read_one(branch: str, kind: str, name: str) -> list[tuple[str, str]]:
        return _root_rows(table, branch, kind, name, lenient)

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            read = rows_in_flight(table, [batch], ("branch", "kind", "name"), read_one)
            rows = [row for _root, found in read for row in found]
            yield pa.RecordBatch.from_pydict(
                {"what": [what for what, _ in rows], "value": [value for _, value in rows]},
                schema=_ROOT_OUT_SCHEMA,
            )

    return read_roots


def _read_roots_in_driver(
    table: Table, roots: list[tuple[str, str, str]], lenient: bool
) -> dict[str, dict[str, None]]:
    """What a few roots name, read on the driver with `io_parallelism` reads in flight (each root is
    a handful of small reads that wait on storage): distinct values by kind of row, in first-seen
    order (the notes of a lenient read among them)."""
    found: dict[str, dict[str, None]] = {what: {} for what in (_FILE, _MANIFEST, _INDEX_MANIFEST, *NOTES)}
    parallelism = table.file_io.io_parallelism
    for rows in map_in_flight(lambda root: _root_rows(table, *root, lenient), roots, parallelism):
        for what, value in rows:
            found[what][value] = None
    return found


def _manifest_reader(table: Table, index: bool, lenient: bool) -> ArrowMapper:
    """Per manifest (or index manifest) name: the paths it names, strictly; `lenient`: a missing one
    gives the one path `MISSING_MARK` + its path instead."""

    def read_one(name: str) -> list[str]:
        try:
            return index_manifest_references(table, name) if index else manifest_references(table, name)
        except MissingFileError as error:
            if not lenient:
                raise
            return [MISSING_MARK + error.path]

    def read_manifests(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _name, paths in rows_in_flight(table, batches, ("value",), read_one):
            for start in range(0, len(paths), _BATCH_ROWS):
                yield pa.RecordBatch.from_pydict(
                    {"path": paths[start : start + _BATCH_ROWS]}, schema=_PATH_SCHEMA
                )

    return read_manifests


def _names_frame(spark: SparkSession, column: str, names: list[str], what: str) -> DataFrame:
    """A DataFrame of one string column from a list the driver holds (names of metadata files),
    handed to the JVM as Arrow and spread over the cores (`driver_list_frame`)."""
    if not names:
        return spark.createDataFrame([], f"{column} string")
    return driver_list_frame(spark, {column: pa.array(names, pa.string())}, what, limit=3 * ROOT_LIMIT)


def referenced_paths(
    spark: SparkSession,
    table: Table,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    keep_root: Callable[[str, str, str], bool] | None = None,
    lenient: RetainedRead | None = None,
) -> Referenced:
    """Build the referenced set on the executors (see the module docstring).

    `keep_root(branch, kind, name)` leaves roots out (expire-snapshots: the snapshots it expires),
    so the set is what the remaining roots need; their own metadata files stay listed.
    `lenient`: read leniently; it receives the notes, which the caller must judge before deleting.
    """
    F = functions_for(spark)
    log = log or logging.getLogger(__name__)
    listed = each_branch(table, lambda branch: metadata_file_relpaths(table, branch), RELPATH_LISTINGS)
    branches = [branch for branch, _found in listed]
    metadata_files: list[str] = []
    roots: list[tuple[str, str, str]] = []
    for branch, (files, branch_roots) in listed:
        metadata_files.extend(files)
        roots.extend(
            (branch, kind, name)
            for kind, name in branch_roots
            if keep_root is None or keep_root(branch, kind, name)
        )
    log.info("referenced set: %d branches, %d snapshots/tags/changelogs to read", len(branches), len(roots))
    if lenient is not None:
        lenient.note_latest(roots)
    read = _read_roots(spark, table, roots, metadata_files, lenient)
    log.info(
        "referenced set: reading %d manifests and %d index manifests", read.manifest_count, read.index_count
    )
    data_files = read.manifests.mapInArrow(
        _manifest_reader(table, False, lenient is not None), REFERENCED_COLUMNS
    )
    index_files = read.index_manifests.mapInArrow(
        _manifest_reader(table, True, lenient is not None), REFERENCED_COLUMNS
    )
    paths = read.named.unionByName(data_files).unionByName(index_files).localCheckpoint(eager=True)
    if lenient is not None:
        # at most one marked row per missing manifest; more than MISSING_LIMIT fails the judgment
        marked = paths.filter(F.col("path") < "\x01").limit(MISSING_LIMIT + 1).collect()
        lenient.missing.extend(row["path"][len(MISSING_MARK) :] for row in marked)
        paths = paths.filter(F.col("path") >= "\x01")
    return Referenced(
        paths=paths,
        branches=len(branches),
        metadata_files=len(metadata_files),
        roots=len(roots),
        vanished_roots=read.vanished,
        manifests=read.manifest_count,
        index_manifests=read.index_count,
    )


@dataclass
class _RootsRead:
    """What reading the roots gave: the paths they name (with the metadata files), the manifests and
    index manifests to read (one `value` column each, distinct), and counts."""

    named: DataFrame
    manifests: DataFrame
    index_manifests: DataFrame
    vanished: int
    manifest_count: int
    index_count: int


def _read_roots(
    spark: SparkSession,
    table: Table,
    roots: list[tuple[str, str, str]],
    metadata_files: list[str],
    lenient: RetainedRead | None,
) -> _RootsRead:
    """Read the roots: up to DRIVER_ROOTS on the driver, else on the executors (checkpointed, so the
    notes added to `lenient` and the names come from one read)."""
    F = functions_for(spark)
    if len(roots) <= DRIVER_ROOTS:
        # A few roots: read on the driver, no Spark job; the names they give are a small plan.
        found = _read_roots_in_driver(table, roots, lenient is not None)
        if lenient is not None:
            for what in NOTES:
                for value in found[what]:
                    add_note(lenient, what, value)
        return _RootsRead(
            _names_frame(spark, "path", [*metadata_files, *found[_FILE]], "metadata files"),
            _names_frame(spark, "value", list(found[_MANIFEST]), "manifests"),
            _names_frame(spark, "value", list(found[_INDEX_MANIFEST]), "index manifests"),
            len(found[_VANISHED]),
            len(found[_MANIFEST]),
            len(found[_INDEX_MANIFEST]),
        )
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    root_frame = spark.createDataFrame(
        parallelize_small(spark, roots, limit=ROOT_LIMIT, what="snapshots, tags and changelogs"),
        "branch string, kind string, name string",
    )
    read = root_frame.mapInArrow(_root_reader(table, lenient is not None), _ROOT_OUT_COLUMNS).localCheckpoint(
        eager=True
    )
    if lenient is not None:
        collect_notes(F, read, lenient)
    counts = {
        row["what"]: row["n"]
        for row in read.groupBy("what").agg(F.countDistinct("value").alias("n")).collect()
    }
    manifest_count, index_count = counts.get(_MANIFEST, 0), counts.get(_INDEX_MANIFEST, 0)
    from_roots = read.filter(F.col("what") == _FILE).select(F.col("value").alias("path"))
    manifests = read.filter(F.col("what") == _MANIFEST).select("value").distinct()
    index_manifests = read.filter(F.col("what") == _INDEX_MANIFEST).select("value").distinct()
    return _RootsRead(
        _names_frame(spark, "path", metadata_files, "metadata files").unionByName(from_roots),
        manifests.repartition(max(1, min(manifest_count, parallelism * 4))),
        index_manifests.repartition(max(1, min(index_count, parallelism * 4))),
        counts.get(_VANISHED, 0),
        manifest_count,
        index_count,
    )
