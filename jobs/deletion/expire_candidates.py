"""expire-snapshots' candidates: what the expiring snapshots (or changelogs) of a range name, read on
the executors, minus what every retained root needs (`jobs.deletion.roots.retained_needs`).

Two passes: per snapshot id its metadata files and the manifests to read (`snapshot_range_reader`,
`changelog_range_reader`), then per manifest its entries (`_manifest_reader`); data files whose last
entry in the deltas of (begin, end] is not an ADD are candidates.

Both passes keep `FileIO.io_parallelism` reads in flight per task (`roots.rows_in_flight`): a
snapshot's JSON and its lists, or a manifest, are small reads that each wait a full request latency
on an object store. Rows come out in id (manifest) order, and lenient and strict reads fail or are
counted exactly as one after another: reading decides nothing about what is deleted or when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.deletion.context import DeletionContext
from jobs.deletion.roots import ArrowMapper, KeepRoot, Root, retained_needs, rows_in_flight
from jobs.deletion.stages import ALREADY_DELETED, FILES, LISTS, MANIFESTS
from jobs.runtime.local_frame import functions_for
from paimon_format.errors import MissingFileError
from paimon_format.maintenance.references import (
    CHANGELOG_TO_WRITE_ROOT,
    changelog_or_snapshot,
    index_manifest_references,
    snapshot_metadata_files,
)
from paimon_format.manifest.codec import read_manifest, read_manifest_list
from paimon_format.manifest.entries import ADD
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SNAPSHOT_LIMIT = 1_000_000  # snapshot ids the driver lists; Paimon tables keep far fewer

# rows of the first executor pass (per snapshot) and of the second (per manifest)
_ROOT_COLUMNS = "what string, name string, size long, ord long, sid long"
_ROOT_SCHEMA = pa.schema(
    [
        ("what", pa.string()),
        ("name", pa.string()),
        ("size", pa.int64()),
        ("ord", pa.int64()),
        ("sid", pa.int64()),
    ]
)
_FILE_COLUMNS = "path string, size long, stage int, ord long, kind int"
_FILE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("stage", pa.int32()),
        ("ord", pa.int64()),
        ("kind", pa.int32()),
    ]
)
_DELTA, _META, _LIST, _CHANGELOG, _INDEX, _MISSING = "delta", "meta", "list", "changelog", "index", "missing"
_DELTA_ALL = "delta-all"  # a delta manifest of an expiring changelog: every file it names is a candidate
_DELETES = "deletes"  # per delta manifest of the range: its DELETE entry count (`size`), from the list
_NO_ORDER, _NO_KIND, _GONE = 0, -1, -2
_SID_SHIFT, _MANIFEST_SHIFT = 40, 24  # ord = snapshot << 40 | manifest index << 24 | entry position


def future_changelog_roots(table: Table, end: int) -> list[Root]:
    """Every retained snapshot, read also as the changelog it becomes when it expires.

    Its delta may DELETE an append-origin file that an expiring snapshot or changelog ADDed (an
    overwrite, a compaction): not live in any root, yet the changelog this snapshot becomes needs it
    (Paimon's snapshot expiry keeps every append-origin file of a decoupled table for that reason,
    and only changelog expiry deletes them).
    """
    ids = [i for i in table.snapshot_manager.snapshot_ids() if i >= end]
    return [(table.branch, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in ids]


def expiry_candidates(
    deletion: DeletionContext,
    ids: tuple[int, int],
    reader: ArrowMapper,
    end: int,
    keep_root: KeepRoot,
    extra_roots: list[Root],
    chain_end: int | None = None,
    stats: dict[str, int] | None = None,
) -> DataFrame:
    """DataFrame (path, size, stage) of the files to delete, checkpointed; stage ALREADY_DELETED rows
    name metadata of expiring snapshots or changelogs that an interrupted run already deleted
    (counted only). `reader` maps the ids [first, last) to metadata rows and manifests to read;
    `keep_root`/`extra_roots` say which roots stay (their needs are never candidates).
    `chain_end`: the candidates are a snapshot range's (last entry up to snapshot `chain_end` not an
    ADD), so retained snapshots from it on need not have their base manifests read
    (`retained_needs`); `stats` receives what the retained side read."""
    spark, table = deletion.spark, deletion.table
    F = functions_for(spark)
    roots = _range_roots(spark, ids, reader)
    entries = _range_manifest_entries(deletion, roots, end, stats)
    everything = _range_files(F, roots, entries)
    protected = retained_needs(
        spark,
        table,
        everything.filter(F.col("stage") == FILES),
        keep_root,
        extra_roots,
        deletion.log,
        chain_end=chain_end,
        stats=stats,
    )
    candidates = everything.join(protected, "path", "left_anti").localCheckpoint(eager=True)
    roots.unpersist()
    entries.unpersist()
    everything.unpersist()
    return candidates


def _range_roots(spark: SparkSession, ids: tuple[int, int], reader: ArrowMapper) -> DataFrame:
    """The first pass, per id of [first, last): metadata rows and the manifests to read, checkpointed."""
    F = functions_for(spark)
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    first, last = ids
    frame = spark.range(first, last, numPartitions=max(1, min(last - first, parallelism * 4)))
    roots = frame.select(F.col("id").alias("sid")).mapInArrow(reader, _ROOT_COLUMNS)
    return roots.localCheckpoint(eager=True)


def _range_manifest_entries(
    deletion: DeletionContext, roots: DataFrame, end: int, stats: dict[str, int] | None
) -> DataFrame:
    """The second pass, per manifest to read: its entries (`_manifest_reader`), checkpointed. The
    expiring deltas are skipped when their lists count no DELETE entry."""
    spark = deletion.spark
    F = functions_for(spark)
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    to_read = roots.filter(F.col("what").isin(_DELTA, _CHANGELOG, _INDEX, _DELTA_ALL)).dropDuplicates(
        ["what", "name"]
    )
    deletes, deltas, retained_deltas = _range_deltas(F, roots, end)
    if not deletes:
        # Only a DELETE entry makes a data file a candidate: deltas of pure appends need no reading.
        # The first retained snapshot's delta is still read, strictly: a broken retained manifest
        # there fails the run (exit 2) as it always did, rather than going unnoticed.
        deletion.log.info("the expiring deltas delete no data file (their lists say so): not reading them")
        to_read = to_read.filter((F.col("what") != _DELTA) | (F.col("sid") >= end))
    if stats is not None:
        stats["expiring_deltas_read"] = deltas if deletes else retained_deltas
    reader = _manifest_reader(deletion.table, end)
    entries = to_read.repartition(parallelism * 2).mapInArrow(reader, _FILE_COLUMNS)
    return entries.localCheckpoint(eager=True)


def _range_files(F: Any, roots: DataFrame, entries: DataFrame) -> DataFrame:  # noqa: N803 - functions
    """Every file the range names, one row per path with its largest size and earliest stage,
    checkpointed: data files whose last entry is not an ADD, changelog and index files, metadata
    files, and what an interrupted run already deleted."""
    missing = (
        roots.filter(F.col("what") == _MISSING)
        .select(F.col("name").alias("path"), "size")
        .unionByName(entries.filter(F.col("kind") == _GONE).select("path", "size"))
        .select("path", "size", F.lit(ALREADY_DELETED).alias("stage"))
    )
    data = (
        entries.filter(F.col("ord") > _NO_ORDER)
        .groupBy("path")
        .agg(F.max_by("kind", "ord").alias("kind"), F.max("size").alias("size"))
        .filter(F.col("kind") != ADD)
        .select("path", "size", F.lit(FILES).alias("stage"))
    )
    other_files = entries.filter((F.col("ord") == _NO_ORDER) & (F.col("kind") == _NO_KIND)).select(
        "path", "size", "stage"
    )
    metadata = roots.filter(F.col("what").isin(_META, _LIST)).select(
        F.col("name").alias("path"),
        "size",
        F.when(F.col("what") == _LIST, F.lit(LISTS)).otherwise(F.lit(MANIFESTS)).alias("stage"),
    )
    return (
        data.unionByName(other_files)
        .unionByName(metadata)
        .unionByName(missing)
        .groupBy("path")
        .agg(F.max("size").alias("size"), F.min("stage").alias("stage"))
        .localCheckpoint(eager=True)
    )


def _range_deltas(F: Any, roots: DataFrame, end: int) -> tuple[int, int, int]:  # noqa: N803 - functions
    """(DELETE entries the delta manifests of the range hold, as their manifest lists count them;
    delta manifests; those of snapshots >= end), in one small job.

    Trusting the count is safe: ADD entries alone never make a candidate, so a count of 0 that were
    wrong could only make the expiry delete fewer files, never a file a retained root needs."""
    rows = (
        roots.filter(F.col("what").isin(_DELETES, _DELTA))
        .withColumn("retained", (F.col("sid") >= end).cast("int"))
        .groupBy("what", "retained")
        .agg(F.sum("size").alias("n"), F.count("name").alias("c"))
        .collect()
    )
    deletes = sum(int(row["n"] or 0) for row in rows if row["what"] == _DELETES)
    deltas = sum(int(row["c"]) for row in rows if row["what"] == _DELTA)
    retained = sum(int(row["c"]) for row in rows if row["what"] == _DELTA and row["retained"] == 1)
    return deletes, deltas, retained


def snapshot_range_reader(table: Table, begin: int, end: int) -> ArrowMapper:
    """Per snapshot id in [begin, end]: its metadata files (expiring ones) and the manifests to read."""

    def read_one(sid: int) -> list[tuple[str, str, int, int, int]]:
        rows: list[tuple[str, str, int, int, int]] = []
        snapshot = table.snapshot_manager.snapshot(sid)
        expiring = sid < end
        if sid > begin:  # its delta decides which data files the previous snapshot lost
            delta = _read_list(table, snapshot.delta_manifest_list, lenient=expiring, rows=rows, sid=sid)
            for index, meta in enumerate(delta or []):
                order = (sid << _SID_SHIFT) | (index << _MANIFEST_SHIFT)
                rows.append((_DELTA, meta.file_name, meta.file_size, order, sid))
                rows.append((_DELETES, meta.file_name, meta.num_deleted_files, order, sid))
        if not expiring:
            return rows
        sizes = {
            snapshot.base_manifest_list: snapshot.base_manifest_list_size,
            snapshot.delta_manifest_list: snapshot.delta_manifest_list_size,
            snapshot.changelog_manifest_list: snapshot.changelog_manifest_list_size,
        }
        for path in snapshot_metadata_files(snapshot):
            name = path.rsplit("/", 1)[-1]
            what = _LIST if name in sizes else _META
            rows.append((what, path, sizes.get(name) or 0, _NO_ORDER, sid))
        for list_name, what in (
            (snapshot.base_manifest_list, _META),
            (snapshot.delta_manifest_list, _META),
            (snapshot.changelog_manifest_list, _CHANGELOG),
        ):
            for meta in _read_list(table, list_name, lenient=True, rows=rows, sid=sid) or []:
                rows.append((_META, f"manifest/{meta.file_name}", meta.file_size, _NO_ORDER, sid))
                if what == _CHANGELOG:
                    rows.append((_CHANGELOG, meta.file_name, meta.file_size, _NO_ORDER, sid))
        if snapshot.index_manifest:
            rows.append((_INDEX, snapshot.index_manifest, 0, _NO_ORDER, sid))
        return rows

    return _per_id_rows(table, read_one)


def changelog_range_reader(table: Table) -> ArrowMapper:
    """Per expiring changelog id: its lists and manifests (candidates) and the manifests to read:
    changelog manifests (their ADDs) and delta manifests (every file they name). Everything on this
    side is read leniently: what an interrupted run already deleted is only counted."""

    def read_one(sid: int) -> list[tuple[str, str, int, int, int]]:
        rows: list[tuple[str, str, int, int, int]] = []
        changelog = changelog_or_snapshot(table, sid)
        if changelog is None:
            return rows  # a gap, or deleted by an interrupted run
        for list_name, size, what in (
            (changelog.changelog_manifest_list, changelog.changelog_manifest_list_size, _CHANGELOG),
            (changelog.delta_manifest_list, changelog.delta_manifest_list_size, _DELTA_ALL),
            (changelog.base_manifest_list, changelog.base_manifest_list_size, _META),
        ):
            if not list_name:
                continue
            metas = _read_list(table, list_name, lenient=True, rows=rows, sid=sid)
            if metas is None:
                continue
            rows.append((_LIST, f"manifest/{list_name}", size or 0, _NO_ORDER, sid))
            for meta in metas:
                rows.append((_META, f"manifest/{meta.file_name}", meta.file_size, _NO_ORDER, sid))
                if what != _META:
                    rows.append((what, meta.file_name, meta.file_size, _NO_ORDER, sid))
        return rows

    return _per_id_rows(table, read_one)


def _per_id_rows(
    table: Table, read_one: Callable[[int], list[tuple[str, str, int, int, int]]]
) -> ArrowMapper:
    """The first pass's mapper: `read_one(sid)`'s rows for every id of a batch, reads in flight."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = [
                row for _sid, found in rows_in_flight(table, [batch], ("sid",), read_one) for row in found
            ]
            yield pa.RecordBatch.from_pylist(
                [dict(zip(_ROOT_SCHEMA.names, row, strict=True)) for row in rows], schema=_ROOT_SCHEMA
            )

    return read


def _read_list(table: Table, name: str | None, lenient: bool, rows: list, sid: int) -> list | None:
    """A manifest list's metas; when `lenient`, a missing list is recorded as already deleted."""
    if not name:
        return []
    try:
        return read_manifest_list(table.file_io, table.manifest_path(name))
    except MissingFileError:
        if not lenient:
            raise
        rows.append((_MISSING, f"manifest/{name}", 0, _NO_ORDER, sid))
        return None


def _manifest_reader(table: Table, end: int) -> ArrowMapper:
    """Per delta manifest: (path, size, ord, kind) of every entry; per changelog/index manifest: files."""

    def read_one(what: str, name: str, order: int, sid: int) -> list[tuple[str, int, int, int]]:
        """(path, size, ord, kind) of what one manifest to read names."""
        try:
            if what == _INDEX:
                return [(path, 0, _NO_ORDER, _NO_KIND) for path in index_manifest_references(table, name)]
            entries = read_manifest(table.file_io, table.manifest_path(name))
        except MissingFileError:
            if what == _DELTA and sid >= end:
                raise  # the first retained snapshot's delta: never lenient
            return [(f"manifest/{name}", 0, _NO_ORDER, _GONE)]  # already deleted by an earlier run
        found: list[tuple[str, int, int, int]] = []
        for position, entry in enumerate(entries):
            if what == _CHANGELOG and entry.kind != ADD:
                continue
            for number, path in enumerate(table.entry_relpaths(entry)):
                size = entry.file.file_size if number == 0 else 0
                if what == _DELTA:
                    found.append((path, size, order | position, entry.kind))
                else:
                    found.append((path, size, _NO_ORDER, _NO_KIND))
        return found

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {name: [] for name in _FILE_SCHEMA.names}
            for _row, found in rows_in_flight(table, [batch], ("what", "name", "ord", "sid"), read_one):
                for path, size, order, kind in found:
                    out["path"].append(path)
                    out["size"].append(size)
                    out["stage"].append(FILES)
                    out["ord"].append(order)
                    out["kind"].append(kind)
            yield pa.RecordBatch.from_pydict(out, schema=_FILE_SCHEMA)

    return read
