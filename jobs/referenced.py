"""Every file a table still needs, as a DataFrame of table-relative paths, read on the executors.

The same set as `paimon_format.scan.referenced_files` (which reads it in one process), built in three
distributed steps so that neither the driver nor one task holds a table's worth of entries:

1. The driver lists each branch's metadata directories: schema ids, snapshot ids, tag names and
   long-lived changelog ids (a small plan). Those files are referenced themselves.
2. Executors read each root (snapshot, tag, changelog JSON) and its manifest lists: manifest lists,
   index manifest, statistics and the manifest names.
3. Manifest names and index manifest names are de-duplicated (tags and snapshots share most of them)
   and read once each, on executors: data files with extra files, changelog files, index files.

Any read error fails the job: a missing or corrupt manifest would make its files look unreferenced.
Only a root deleted between listing and reading (expired concurrently) is skipped, as it then
needs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from jobs.local_frame import functions_for
from jobs.spark import parallelize_small
from paimon_format.orphans import (
    branch_prefix,
    index_manifest_references,
    manifest_references,
    metadata_file_relpaths,
    root_references,
)
from paimon_format.table import MAIN_BRANCH, Table

REFERENCED_COLUMNS = "path string"
_PATH_SCHEMA = pa.schema([("path", pa.string())])
_ROOT_OUT_COLUMNS = "what string, value string"
_ROOT_OUT_SCHEMA = pa.schema([("what", pa.string()), ("value", pa.string())])
_FILE, _MANIFEST, _INDEX_MANIFEST, _VANISHED = "file", "manifest", "index-manifest", "vanished"
_BATCH_ROWS = 20_000
# Roots per table: snapshots retained plus tags and changelogs; far below this in any sane table.
ROOT_LIMIT = 1_000_000


@dataclass
class Referenced:
    """The referenced paths (a checkpointed DataFrame of REFERENCED_COLUMNS) and the driver's counts."""

    paths: Any  # DataFrame
    branches: int
    metadata_files: int  # schema, snapshot, tag, changelog files themselves (not what they reference)
    roots: int
    vanished_roots: int
    manifests: int
    index_manifests: int


def _root_reader(table: Table):
    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            what: list[str] = []
            value: list[str] = []
            for branch, kind, name in zip(
                *(batch.column(c).to_pylist() for c in ("branch", "kind", "name")), strict=True
            ):
                found = root_references(table.for_branch(branch), kind, name)
                if found is None:
                    what.append(_VANISHED)
                    value.append(f"{branch_prefix(branch)}{kind}/{name}")
                    continue
                for path in found.files:
                    what.append(_FILE)
                    value.append(path)
                for manifest in found.manifests:
                    what.append(_MANIFEST)
                    value.append(manifest)
                if found.index_manifest:
                    what.append(_INDEX_MANIFEST)
                    value.append(found.index_manifest)
            yield pa.RecordBatch.from_pydict({"what": what, "value": value}, schema=_ROOT_OUT_SCHEMA)

    return read_roots


def _manifest_reader(table: Table, index: bool):
    def read_manifests(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name in batch.column("value").to_pylist():
                paths = index_manifest_references(table, name) if index else manifest_references(table, name)
                for start in range(0, len(paths), _BATCH_ROWS):
                    yield pa.RecordBatch.from_pydict(
                        {"path": paths[start : start + _BATCH_ROWS]}, schema=_PATH_SCHEMA
                    )

    return read_manifests


def referenced_paths(
    spark: Any,
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

    own = (
        spark.createDataFrame(
            parallelize_small(
                spark, [(p,) for p in metadata_files], limit=3 * ROOT_LIMIT, what="metadata files"
            ),
            REFERENCED_COLUMNS,
        )
        if metadata_files
        else spark.createDataFrame([], REFERENCED_COLUMNS)
    )
    if roots:
        root_frame = spark.createDataFrame(
            parallelize_small(spark, roots, limit=ROOT_LIMIT, what="snapshots, tags and changelogs"),
            "branch string, kind string, name string",
        )
        read = root_frame.mapInArrow(_root_reader(table), _ROOT_OUT_COLUMNS).localCheckpoint(eager=True)
    else:
        read = spark.createDataFrame([], _ROOT_OUT_COLUMNS)
    counts = {
        row["what"]: row["n"]
        for row in read.groupBy("what").agg(F.countDistinct("value").alias("n")).collect()
    }
    vanished = counts.get(_VANISHED, 0)
    manifest_count, index_count = counts.get(_MANIFEST, 0), counts.get(_INDEX_MANIFEST, 0)
    from_roots = read.filter(F.col("what") == _FILE).select(F.col("value").alias("path"))
    manifests = read.filter(F.col("what") == _MANIFEST).select("value").distinct()
    index_manifests = read.filter(F.col("what") == _INDEX_MANIFEST).select("value").distinct()
    log.info("referenced set: reading %d manifests and %d index manifests", manifest_count, index_count)
    data_files = manifests.repartition(max(1, min(manifest_count, parallelism * 4))).mapInArrow(
        _manifest_reader(table, index=False), REFERENCED_COLUMNS
    )
    index_files = index_manifests.repartition(max(1, min(index_count, parallelism * 4))).mapInArrow(
        _manifest_reader(table, index=True), REFERENCED_COLUMNS
    )
    paths = own.unionByName(from_roots).unionByName(data_files).unionByName(index_files)
    return Referenced(
        paths=paths.localCheckpoint(eager=True),
        branches=len(branches),
        metadata_files=len(metadata_files),
        roots=len(roots),
        vanished_roots=vanished,
        manifests=manifest_count,
        index_manifests=index_count,
    )
