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

Any read error fails the job: a missing or corrupt manifest would make its files look unreferenced.
Only a root deleted between listing and reading (expired concurrently) is skipped, as it then
needs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.deletion.roots import rows_in_flight
from jobs.runtime.local_frame import functions_for
from jobs.runtime.spark import driver_list_frame, parallelize_small
from paimon_format.branches import MAIN_BRANCH
from paimon_format.maintenance.references import (
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


def _root_rows(table: Table, branch: str, kind: str, name: str) -> list[tuple[str, str]]:
    """(what, value) rows of what one root names: files by path, manifests and index manifests by name."""
    found = root_references(table.for_branch(branch), kind, name)
    if found is None:
        return [(_VANISHED, f"{branch_prefix(branch)}{kind}/{name}")]
    rows = [(_FILE, path) for path in found.files] + [(_MANIFEST, m) for m in found.manifests]
    if found.index_manifest:
        rows.append((_INDEX_MANIFEST, found.index_manifest))
    return rows


def _root_reader(table: Table):
    def read_one(branch: str, kind: str, name: str) -> list[tuple[str, str]]:
        return _root_rows(table, branch, kind, name)

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            read = rows_in_flight(table, [batch], ("branch", "kind", "name"), read_one)
            rows = [row for _root, found in read for row in found]
            yield pa.RecordBatch.from_pydict(
                {"what": [what for what, _ in rows], "value": [value for _, value in rows]},
                schema=_ROOT_OUT_SCHEMA,
            )

    return read_roots


def _read_roots_in_driver(table: Table, roots: list[tuple[str, str, str]]) -> dict[str, dict[str, None]]:
    """What a few roots name, read on the driver with `io_parallelism` reads in flight (each root is
    a handful of small reads that wait on storage): distinct values by kind of row, in first-seen
    order."""
    found: dict[str, dict[str, None]] = {_FILE: {}, _MANIFEST: {}, _INDEX_MANIFEST: {}, _VANISHED: {}}
    parallelism = table.file_io.io_parallelism
    for rows in map_in_flight(lambda root: _root_rows(table, *root), roots, parallelism):
        for what, value in rows:
            found[what][value] = None
    return found


def _manifest_reader(table: Table, index: bool):
    def read_one(name: str) -> list[str]:
        return index_manifest_references(table, name) if index else manifest_references(table, name)

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
) -> Referenced:
    """Build the referenced set on the executors (see the module docstring).

    `keep_root(branch, kind, name)` leaves roots out (expire-snapshots: the snapshots it expires),
    so the set is what the remaining roots need; their own metadata files stay listed.
    """
    F = functions_for(spark)

    log = log or logging.getLogger(__name__)
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    branches = [MAIN_BRANCH] + table.branch_manager.branch_names()
    metadata_files: list[str] = []
    roots: list[tuple[str, str, str]] = []
    for branch in branches:
        files, branch_roots = metadata_file_relpaths(table, branch)
        metadata_files.extend(files)
        roots.extend(
            (branch, kind, name)
            for kind, name in branch_roots
            if keep_root is None or keep_root(branch, kind, name)
        )
    log.info("referenced set: %d branches, %d snapshots/tags/changelogs to read", len(branches), len(roots))

    if len(roots) <= DRIVER_ROOTS:
        # A few roots: read on the driver, no Spark job; the names they give are a small plan.
        found = _read_roots_in_driver(table, roots)
        vanished, manifest_count = len(found[_VANISHED]), len(found[_MANIFEST])
        index_count = len(found[_INDEX_MANIFEST])
        named = _names_frame(spark, "path", [*metadata_files, *found[_FILE]], "metadata files")
        manifests = _names_frame(spark, "value", list(found[_MANIFEST]), "manifests")
        index_manifests = _names_frame(spark, "value", list(found[_INDEX_MANIFEST]), "index manifests")
    else:
        root_frame = spark.createDataFrame(
            parallelize_small(spark, roots, limit=ROOT_LIMIT, what="snapshots, tags and changelogs"),
            "branch string, kind string, name string",
        )
        read = root_frame.mapInArrow(_root_reader(table), _ROOT_OUT_COLUMNS).localCheckpoint(eager=True)
        counts = {
            row["what"]: row["n"]
            for row in read.groupBy("what").agg(F.countDistinct("value").alias("n")).collect()
        }
        vanished = counts.get(_VANISHED, 0)
        manifest_count, index_count = counts.get(_MANIFEST, 0), counts.get(_INDEX_MANIFEST, 0)
        from_roots = read.filter(F.col("what") == _FILE).select(F.col("value").alias("path"))
        named = _names_frame(spark, "path", metadata_files, "metadata files").unionByName(from_roots)
        manifests = read.filter(F.col("what") == _MANIFEST).select("value").distinct()
        manifests = manifests.repartition(max(1, min(manifest_count, parallelism * 4)))
        index_manifests = read.filter(F.col("what") == _INDEX_MANIFEST).select("value").distinct()
        index_manifests = index_manifests.repartition(max(1, min(index_count, parallelism * 4)))
    log.info("referenced set: reading %d manifests and %d index manifests", manifest_count, index_count)
    data_files = manifests.mapInArrow(_manifest_reader(table, index=False), REFERENCED_COLUMNS)
    index_files = index_manifests.mapInArrow(_manifest_reader(table, index=True), REFERENCED_COLUMNS)
    paths = named.unionByName(data_files).unionByName(index_files)
    return Referenced(
        paths=paths.localCheckpoint(eager=True),
        branches=len(branches),
        metadata_files=len(metadata_files),
        roots=len(roots),
        vanished_roots=vanished,
        manifests=manifest_count,
        index_manifests=index_count,
    )
