"""What dropped roots alone needed: the retained side of every deletion job, and the dropped side.

A maintenance job that drops metadata roots (expired snapshots or changelogs, deleted or expired tags,
snapshots a rollback discards) deletes their files in one shape:

- candidates: a DataFrame (path, size, stage) of what the dropped roots named
  (`dropped_root_candidates`; expire-snapshots builds its own, `jobs.deletion.expire_candidates`);
- minus (LEFT ANTI JOIN) `retained_needs`: what every root that stays needs (every snapshot, tag and
  long-lived changelog of every branch, unless the job's `keep_root` says it is dropped), read
  strictly on the executors: a failed read fails the job, never protects less;
- deleted in stages (`jobs.deletion.stages.delete_stages`): data, changelog and index files, then
  manifests, index manifests and statistics, then manifest lists, so that a crash between stages
  leaves every retained root readable and a rerun finds the rest.

Every reader here keeps `FileIO.io_parallelism` reads in flight per task (`rows_in_flight`): on an
object store each read waits tens of milliseconds for its first byte, so one read after another is
bound by latency; decoding one manifest overlaps fetching the next. Results come back in row order
and a failed read fails the task at its row's turn, exactly as the plain loop did. Reading is all
these readers do: what is deleted, and in which order, is decided afterwards, so reading in flight
changes neither the candidates nor the stage order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from jobs.deletion.retained_read import MISSING_MARK, RetainedRead, collect_notes, read_retained_root
from jobs.deletion.stages import ALREADY_DELETED, FILES, LISTS, MANIFESTS
from jobs.runtime.local_frame import functions_for
from jobs.runtime.spark import parallelize_small
from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.maintenance.references import (
    CHANGELOG_ROOT,
    PENDING_TAG_ROOT,
    SNAPSHOT_ROOT,
    TAG_ROOT,
    RootReferences,
    chained_root_references,
    changelog_needs_entry,
    index_manifest_references,
    root_references,
    snapshot_metadata_files,
)
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import ADD
from paimon_format.storage.in_flight import both, map_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    import logging

    from pyspark.sql import DataFrame, SparkSession

_NEEDS_COLUMNS = "root string, what string, value string"
_NEEDS_SCHEMA = pa.schema([("root", pa.string()), ("what", pa.string()), ("value", pa.string())])
_LIVE_COLUMNS = "manifest string, path string, delta int, appended int"
_LIVE_SCHEMA = pa.schema(
    [("manifest", pa.string()), ("path", pa.string()), ("delta", pa.int32()), ("appended", pa.int32())]
)
_PATH_SCHEMA = pa.schema([("path", pa.string())])
_ROOT_DDL = "branch string, kind string, name string"
_ROOT_COLUMNS = ("branch", "kind", "name")
ROOT_LIMIT = 1_000_000

# (branch, kind, name) of a snapshot, tag or changelog; `keep_root` says whether one stays
Root = tuple[str, str, str]
KeepRoot = Callable[[str, str, str], bool]
ArrowMapper = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
R = TypeVar("R")


def rows_in_flight(
    table: Table, batches: Iterable[pa.RecordBatch], columns: tuple[str, ...], read: Callable[..., R]
) -> Iterator[tuple[tuple[Any, ...], R]]:
    """(row, `read(*row)`) for every row (the values of `columns`) of the Arrow batches, in row order,
    with up to `table.file_io.io_parallelism` reads in flight (`map_in_flight`).

    Why: a task reading its manifests one after another waits a full request latency per manifest.
    Rows are taken lazily (a window of them, never a whole partition), and the first failing read
    is raised at its row's turn, so a caller's loop keeps its error semantics: a read the caller
    wants lenient must catch its own error inside `read`.
    """
    rows = (
        row for batch in batches for row in zip(*(batch.column(c).to_pylist() for c in columns), strict=True)
    )
    return map_in_flight(lambda row: (row, read(*row)), rows, table.file_io.io_parallelism)


def retained_needs(
    spark: SparkSession,
    table: Table,
    file_candidates: DataFrame,
    keep_root: KeepRoot,
    extra_roots: list[Root],
    log: logging.Logger | logging.LoggerAdapter,
    chain_end: int | None = None,
    stats: dict[str, int] | None = None,
    lenient: RetainedRead | None = None,
) -> DataFrame:
    """Paths the retained roots need among the candidates: a DataFrame of one `path` column.

    Roots: every snapshot kept, every tag and long-lived changelog of every branch, plus
    `extra_roots` (changelogs this run writes). Their metadata files (lists, manifests, index
    manifest, statistics) and index files count as needed as named.
    A data or changelog file is needed when it is *live* in some root: added more often than
    deleted within that root's manifests (a level upgrade deletes and re-adds the same file name).
    Of a changelog's delta manifests (no changelog producer) every append-origin entry counts, ADD
    or DELETE (`changelog_needs_entry`): compaction output is not changelog.
    A DELETE entry alone does not protect a file, or nothing deleted before the last manifest
    compaction could ever expire. Every read here is strict: a failure fails the job.

    `chain_end` (expire-snapshots only, whose file candidates are the files whose last entry in the
    expiring deltas up to snapshot `chain_end` of `table.branch` is not an ADD): the retained
    snapshots of that branch, and its tags on them, are read by `chained_root_references`,
    i.e. their base manifests are kept by name and not read (Paimon's delta-chain proof); every other
    root is read in full. Without file candidates no manifest is read at all: names protect the
    metadata candidates, and only file candidates need liveness. `stats` receives how many roots
    and manifests were read.

    `lenient` (not with `chain_end`): a manifest list, manifest or index manifest found missing is
    noted in it instead of failing the job (`jobs.deletion.retained_read`), and so are the roots
    gone when read and the retained snapshots as read. The caller MUST judge every missing one
    before it deletes anything: what it names is not protected here. The frames the notes come
    from are checkpointed first, so that the notes and the protected paths come from one read.
    """
    if lenient is not None and chain_end is not None:
        raise ValueError("a lenient read of the retained roots has no delta-chain proof")
    F = functions_for(spark)
    roots = _retained_roots(table, keep_root, extra_roots)
    log.info("reading what %d retained snapshots, tags and changelogs need", len(roots))
    root_frame = spark.createDataFrame(
        parallelize_small(spark, roots, limit=ROOT_LIMIT, what="retained roots"), _ROOT_DDL
    )
    needs = root_frame.mapInArrow(
        _retained_root_reader(table, chain_end, lenient is not None), _NEEDS_COLUMNS
    )
    needs = needs.localCheckpoint(eager=True)
    if lenient is not None:
        lenient.note_latest(roots)
        collect_notes(F, needs, lenient)
    named = needs.filter(F.col("what") == "file").select(F.col("value").alias("path"))
    if stats is not None:
        stats["retained_roots"] = len(roots)
    if file_candidates.limit(1).count() == 0:
        log.info("no data, changelog or index file to delete: retained manifests are kept by name, not read")
        if stats is not None:
            stats["retained_manifests_read"] = 0
        return named.distinct()
    index_names = needs.filter(F.col("what") == "index").select("value").distinct()
    index_files = index_names.mapInArrow(_index_file_reader(table, lenient is not None), "path string")
    if lenient is not None:
        index_files = index_files.localCheckpoint(eager=True)
        marked = index_files.filter(F.col("path") < "\x01").collect()
        lenient.missing.extend(row["path"][len(MISSING_MARK) :] for row in marked)
        index_files = index_files.filter(F.col("path") >= "\x01")
    live = _live_in_retained_roots(spark, table, needs, file_candidates, stats, lenient)
    return named.unionByName(index_files).unionByName(live).distinct()


_LISTINGS_AT_ONCE = 8  # branches listed at once at most (`each_branch`: fewer under a low io_parallelism)
_BRANCH_LISTINGS = 3  # the listings `_branch_roots` sends at once


def each_branch(table: Table, read_branch: Callable[[str], R], requests_each: int) -> list[tuple[str, R]]:
    """(branch, read_branch(branch)) for main and every other branch, main's read sent beside the
    listing of branch/ (when both fit in `io_parallelism`), the other branches' after it, as many at
    once as keep the bound when each read sends `requests_each` requests at once."""
    parallelism = table.file_io.io_parallelism
    main, others = both(
        lambda: read_branch(MAIN_BRANCH),
        table.branch_manager.branch_names,
        parallelism if parallelism > requests_each else 1,
    )
    at_once = max(1, min(_LISTINGS_AT_ONCE, parallelism // requests_each))
    return [(MAIN_BRANCH, main), *zip(others, map_in_flight(read_branch, others, at_once), strict=True)]


def _retained_roots(table: Table, keep_root: KeepRoot, extra_roots: list[Root]) -> list[Root]:
    """Every snapshot, tag and changelog of every branch that `keep_root` keeps, then `extra_roots`."""
    roots: list[Root] = []
    for _branch, listed in each_branch(table, lambda branch: _branch_roots(table, branch), _BRANCH_LISTINGS):
        roots.extend(r for r in listed if keep_root(*r))
    roots.extend(extra_roots)
    return roots


def _branch_roots(table: Table, branch: str) -> list[Root]:
    """A branch's snapshots, tags and long-lived changelogs, listed now, the three listings at once
    (on an object store each is a round trip; its schema directory, which `metadata_file_relpaths`
    lists too, names no root)."""
    branch_table = table.for_branch(branch)
    manager = branch_table.snapshot_manager
    listings: list[Callable[[], list[Any]]] = [
        manager.snapshot_ids,
        branch_table.tag_manager.tag_names,
        manager.changelog_ids,
    ]
    at_once = min(len(listings), table.file_io.io_parallelism)
    snapshots, tags, changelogs = map_in_flight(lambda listing: listing(), listings, at_once)
    roots = [(branch, SNAPSHOT_ROOT, str(i)) for i in snapshots]
    roots += [(branch, TAG_ROOT, name) for name in tags]
    roots += [(branch, CHANGELOG_ROOT, str(i)) for i in changelogs]
    return roots


def _named_by_root(
    found: RootReferences, manifest_what: Callable[[RootReferences, str], str]
) -> list[tuple[str, str]]:
    """(what, value) per file a root names, per manifest it needs (`manifest_what` says how that
    manifest counts) and for its index manifest, if any."""
    named = [("file", path) for path in found.files]
    named += [(manifest_what(found, manifest), manifest) for manifest in found.manifests]
    if found.index_manifest:
        named.append(("index", found.index_manifest))
    return named


def _retained_root_reader(table: Table, chain_end: int | None, lenient: bool) -> ArrowMapper:
    """Per retained root: (root, what, value) rows of the files it names and the manifests and index
    manifest it needs, each manifest with how it counts (`_manifest_mode`); `lenient`: also the
    notes of `retained_read.read_retained_root` (a missing list noted, not raised)."""
    chain_branch = table.branch

    def read_root(branch: str, kind: str, name: str) -> tuple[RootReferences | None, list[tuple[str, str]]]:
        if lenient:
            return read_retained_root(table, branch, kind, name)
        if chain_end is not None and branch == chain_branch and kind in (SNAPSHOT_ROOT, TAG_ROOT):
            return chained_root_references(table.for_branch(branch), kind, name, chain_end), []
        return root_references(table.for_branch(branch), kind, name), []

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {"root": [], "what": [], "value": []}
            for (branch, kind, name), (found, notes) in rows_in_flight(
                table, [batch], _ROOT_COLUMNS, read_root
            ):
                key = f"{branch}/{kind}/{name}"
                for what, value in notes:
                    out["root"].append(key)
                    out["what"].append(what)
                    out["value"].append(value)
                if found is None:
                    continue  # expired concurrently: needs nothing
                for what, value in _named_by_root(found, _manifest_mode):
                    out["root"].append(key)
                    out["what"].append(what)
                    out["value"].append(value)
            yield pa.RecordBatch.from_pydict(out, schema=_NEEDS_SCHEMA)

    return read_roots


def _index_file_reader(table: Table, lenient: bool) -> ArrowMapper:
    """Per index manifest name (`value`): the index files it names, strictly; `lenient`: a missing
    one gives the path `MISSING_MARK` + its path instead."""

    def read_one(name: str) -> list[str]:
        try:
            return index_manifest_references(table, name)
        except MissingFileError as error:
            if not lenient:
                raise
            return [MISSING_MARK + error.path]

    def read_index(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            read = rows_in_flight(table, [batch], ("value",), read_one)
            paths = [p for _name, found in read for p in found]
            yield pa.RecordBatch.from_pydict({"path": paths}, schema=_PATH_SCHEMA)

    return read_index


def _live_in_retained_roots(
    spark: SparkSession,
    table: Table,
    needs: DataFrame,
    file_candidates: DataFrame,
    stats: dict[str, int] | None,
    lenient: RetainedRead | None,
) -> DataFrame:
    """The file candidates live in some retained root: each manifest the roots need is read once,
    its entries of candidate files joined back to the roots needing it, and summed per root as the
    manifest's mode says (a balance of ADDs over DELETEs, append-origin entries, or ADDs only).

    `lenient`: a missing manifest gives one entry of path `MISSING_MARK`, which the join with the
    candidates keeps; the entries kept are checkpointed (one read gives both the protected files and
    the missing manifests) and the missing manifests noted in `lenient`."""
    F = functions_for(spark)
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    root_manifests = (
        needs.filter(F.col("what").isin(_BALANCE, _APPENDED, _ADDED))
        .select("root", F.col("value").alias("manifest"), F.col("what").alias("mode"))
        .dropDuplicates()
    )
    manifests = root_manifests.select("manifest").distinct()
    if stats is not None:
        stats["retained_manifests_read"] = manifests.count()
    reader = _retained_entry_reader(table, lenient is not None)
    entries = manifests.repartition(parallelism * 2).mapInArrow(reader, _LIVE_COLUMNS)
    wanted = file_candidates.select("path")
    if lenient is not None:
        wanted = wanted.unionByName(spark.createDataFrame([(MISSING_MARK,)], "path string"))
    entries = entries.join(wanted, "path", "left_semi")
    if lenient is not None:
        entries = entries.localCheckpoint(eager=True)
        marked = entries.filter(F.col("path") == MISSING_MARK).select("manifest").distinct().collect()
        lenient.missing.extend(table.manifest_path(row["manifest"]) for row in marked)
        entries = entries.filter(F.col("path") != MISSING_MARK)
    return (
        entries.join(root_manifests, "manifest")
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


def _retained_entry_reader(table: Table, lenient: bool) -> ArrowMapper:
    """Per manifest: (manifest, path, delta, appended) of every entry, strictly; `lenient`: a missing
    manifest gives one row of path `MISSING_MARK` instead."""

    def read_one(name: str) -> pa.RecordBatch:
        out: dict[str, list] = {"manifest": [], "path": [], "delta": [], "appended": []}
        try:
            entries = read_manifest(table.file_io, table.manifest_path(name))
        except MissingFileError:
            if not lenient:
                raise
            entries = []
            for column, value in zip(out, (name, MISSING_MARK, 0, 0), strict=True):
                out[column].append(value)
        for entry in entries:
            appended = 1 if changelog_needs_entry(entry, appended_only=True) else 0
            for path in table.entry_relpaths(entry):
                out["manifest"].append(name)
                out["path"].append(path)
                out["delta"].append(1 if entry.kind == ADD else -1)
                out["appended"].append(appended)
        return pa.RecordBatch.from_pydict(out, schema=_LIVE_SCHEMA)

    def read_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _name, entries in rows_in_flight(table, batches, ("manifest",), read_one):
            yield entries

    return read_entries


# how a retained root's manifest counts: entries' balance (live files), append-origin entries of a
# changelog's delta (`changelog_needs_entry`), or every ADD entry (a delta after a chain's end)
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
_CANDIDATE_COLUMNS = "path string, size long, stage int"
_CANDIDATE_SCHEMA = pa.schema([("path", pa.string()), ("size", pa.int64()), ("stage", pa.int32())])


def _metadata_stage(relative_path: str) -> int:
    """Manifest lists go last (they name the manifests); manifests, index manifests, statistics before."""
    return LISTS if relative_path.rsplit("/", 1)[-1].startswith("manifest-list-") else MANIFESTS


def dropped_root_candidates(
    spark: SparkSession,
    table: Table,
    dropped: list[Root],
    keep_root: KeepRoot,
    extra_roots: list[Root],
    log: logging.Logger | logging.LoggerAdapter,
    lenient: RetainedRead | None = None,
) -> DataFrame:
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
    ever means deleting less. The retained side is strict, unless the caller asks for a `lenient`
    read (`retained_needs`) and judges what it notes before deleting anything.
    """
    F = functions_for(spark)
    root_frame = spark.createDataFrame(
        parallelize_small(spark, dropped, limit=ROOT_LIMIT, what="dropped roots"), _ROOT_DDL
    )
    named = root_frame.mapInArrow(_dropped_root_reader(table), _DROPPED_COLUMNS).localCheckpoint(eager=True)
    root_manifests = (
        named.filter(F.col("what") == "manifest")
        .select("root", F.col("value").alias("manifest"))
        .dropDuplicates()
    )
    entries = _dropped_manifest_entries(spark, table, root_manifests)
    everything = (
        _live_in_dropped_roots(F, entries, root_manifests)
        .unionByName(_dropped_index_files(F, table, named))
        .unionByName(_dropped_metadata(F, named))
        .unionByName(_already_deleted(F, named, entries))
        .groupBy("path")
        .agg(F.max("size").alias("size"), F.min("stage").alias("stage"))
        .localCheckpoint(eager=True)
    )
    protected = retained_needs(
        spark, table, everything.filter(F.col("stage") == FILES), keep_root, extra_roots, log, lenient=lenient
    )
    candidates = everything.join(protected, "path", "left_anti").localCheckpoint(eager=True)
    named.unpersist()
    entries.unpersist()
    everything.unpersist()
    return candidates


def _dropped_root_reader(table: Table) -> ArrowMapper:
    """Per dropped root: (root, what, value, size) rows of its metadata files, manifests and index
    manifest; a root whose list an interrupted run deleted also gives a `missing` row."""

    def read_root(branch: str, kind: str, name: str) -> tuple[RootReferences | None, bool]:
        """(what the root names, whether an interrupted run deleted one of its manifest lists)."""
        branch_table = table.for_branch(branch)
        try:
            return root_references(branch_table, kind, name), False
        except MissingFileError:
            return _half_deleted_root(branch_table, kind, name), True

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {"root": [], "what": [], "value": [], "size": []}
            for (branch, kind, name), (found, half_deleted) in rows_in_flight(
                table, [batch], _ROOT_COLUMNS, read_root
            ):
                if half_deleted:
                    out["root"].append(f"{branch}/{kind}/{name}")
                    out["what"].append("missing")
                    out["value"].append(f"{branch}/{kind}/{name}")
                    out["size"].append(0)
                if found is None:
                    continue  # gone already: a rerun after its files went, or dropped concurrently
                key = f"{branch}/{kind}/{name}"
                for what, value in _named_by_root(found, lambda _found, _manifest: "manifest"):
                    out["root"].append(key)
                    out["what"].append(what)
                    out["value"].append(value)
                    out["size"].append(0)
            yield pa.RecordBatch.from_pydict(out, schema=_DROPPED_SCHEMA)

    return read_roots


def _dropped_metadata(F: Any, named: DataFrame) -> DataFrame:  # noqa: N803 - pyspark's functions
    """The dropped roots' own metadata files, staged MANIFESTS or LISTS by name."""
    stage_of = F.udf(_metadata_stage, "int")
    return (
        named.filter(F.col("what") == "file")
        .select(F.col("value").alias("path"))
        .distinct()
        .select("path", F.lit(0).cast("long").alias("size"), stage_of("path").alias("stage"))
    )


def _dropped_index_files(F: Any, table: Table, named: DataFrame) -> DataFrame:  # noqa: N803
    """The index files the dropped roots' index manifests name (stage FILES); an index manifest an
    interrupted run deleted (after its index files) names nothing."""

    def read_one(name: str) -> list[str]:
        try:
            return index_manifest_references(table, name)
        except MissingFileError:  # deleted by an interrupted run, after its index files
            return []

    def read_index(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths = [
                path
                for _name, found in rows_in_flight(table, [batch], ("value",), read_one)
                for path in found
            ]
            yield pa.RecordBatch.from_pydict(
                {"path": paths, "size": [0] * len(paths), "stage": [FILES] * len(paths)},
                schema=_CANDIDATE_SCHEMA,
            )

    return (
        named.filter(F.col("what") == "index")
        .select("value")
        .distinct()
        .mapInArrow(read_index, _CANDIDATE_COLUMNS)
    )


def _dropped_manifest_entries(spark: SparkSession, table: Table, root_manifests: DataFrame) -> DataFrame:
    """Every entry of the dropped roots' manifests (manifest, path, delta, size), each manifest read
    once, checkpointed; a manifest already deleted gives one row of delta `_MISSING_DELTA`."""

    def read_one(name: str) -> pa.RecordBatch:
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
        return pa.RecordBatch.from_pydict(out, schema=_ENTRY_SCHEMA)

    def read_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _name, entries in rows_in_flight(table, batches, ("manifest",), read_one):
            yield entries

    parallelism = max(1, spark.sparkContext.defaultParallelism)
    entries = (
        root_manifests.select("manifest")
        .distinct()
        .repartition(parallelism * 2)
        .mapInArrow(read_entries, _ENTRY_COLUMNS)
    )
    return entries.localCheckpoint(eager=True)


def _already_deleted(F: Any, named: DataFrame, entries: DataFrame) -> DataFrame:  # noqa: N803
    """Manifests and lists of dropped roots that an interrupted run already deleted (stage
    ALREADY_DELETED: counted, not deleted)."""
    return (
        entries.filter(F.col("delta") == _MISSING_DELTA)
        .select("path")
        .unionByName(named.filter(F.col("what") == "missing").select(F.col("value").alias("path")))
        .distinct()
        .select("path", F.lit(0).cast("long").alias("size"), F.lit(ALREADY_DELETED).alias("stage"))
    )


def _live_in_dropped_roots(F: Any, entries: DataFrame, root_manifests: DataFrame) -> DataFrame:  # noqa: N803
    """Data and changelog files live in some dropped root (added more often than deleted within its
    manifests), with their size (stage FILES)."""
    return (
        entries.filter(F.col("delta") != _MISSING_DELTA)
        .join(root_manifests, "manifest")
        .groupBy("root", "path")
        .agg(F.sum("delta").alias("balance"), F.max("size").alias("size"))
        .filter(F.col("balance") > 0)
        .groupBy("path")
        .agg(F.max("size").alias("size"))
        .select("path", "size", F.lit(FILES).alias("stage"))
    )


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
