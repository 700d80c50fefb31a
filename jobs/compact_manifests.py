"""compact-manifests: rewrite a table's manifests into fewer ones (seed 003).

Plan on the driver from the manifest list only (names and sizes): which groups of manifests merge.
Then, per `order`:
- `none` (default, what Paimon's own merge does): each group is merged by Avro blocks in the driver
  process (`paimon_format.manifest.concat`): a manifest no DELETE of the group can touch is copied
  block by block without decoding an entry, the others are read entry by entry and only cancelled
  ADD/DELETE pairs are dropped; entries keep their order. Memory: one manifest, one new manifest,
  the group's DELETE identifiers and the manifests read ahead (the next ones are read while one is
  decoded, within a byte budget: `paimon_format.manifest.read_ahead`), at any table size; no Spark
  job runs.
- `partition`: executors read the entries into a DataFrame; ADD/DELETE pairs cancel by grouping on
  the file identifier; the survivors are range-sorted by partition and written as new manifests of
  `manifest.target-file-size` on the executors (small tables in the driver, `local`).
The driver then commits one COMPACT snapshot whose base list holds the new manifests (followed by any
manifests a concurrent writer added meanwhile) and whose delta list is empty. The driver never
holds a table's entries.

Spark-submit entry: `spark-submit jobs/compact_manifests.py --config conf/compact-manifests.yaml`.
"""

from __future__ import annotations

import logging
import pickle
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from pydantic import Field

from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_exec import ENGINE_DRIVER, LocalRunOptions, run_where_it_fits
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.spark import driver_list_frame
from jobs.runtime.table_open import open_existing_table
from paimon_format.commit import COMPACT, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.errors import CommitConflictError, InvalidTableStateError, PaimonFormatError
from paimon_format.manifest.codec import gc_paused
from paimon_format.manifest.concat import merge_by_blocks, read_deletes
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.manifest.files import rolling_write_raw_manifests
from paimon_format.manifest.raw import RawEntry, iter_raw_entries
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.model.options import CoreOptions, parse_memory_size
from paimon_format.scan.snapshot_scan import EntryMerger, data_manifests
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ArrowMapper = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
RESULT_COLUMNS = "grp int, first_partition binary, first_ord long, meta binary, survivors long, error string"

# A RawEntry's attributes as shuffle columns (the rarely set rest of its identity travels pickled)
_RAW_COLUMNS = {
    "kind": pa.int32(),
    "partition": pa.binary(),
    "bucket": pa.int32(),
    "level": pa.int32(),
    "file_name": pa.string(),
    "identity_rest": pa.binary(),
    "schema_id": pa.int64(),
    "row_count": pa.int64(),
    "first_row_id": pa.int64(),
    "file_size": pa.int64(),
    "created": pa.int64(),
    "datum": pa.binary(),
}
assert list(_RAW_COLUMNS) == list(RawEntry.__slots__)
_ENTRY_SCHEMA = pa.schema([("grp", pa.int32()), ("ord", pa.int64()), *_RAW_COLUMNS.items()])
_DDL = {pa.int32(): "int", pa.int64(): "long", pa.binary(): "binary", pa.string(): "string"}
ENTRY_COLUMNS = ", ".join(f"{field.name} {_DDL[field.type]}" for field in _ENTRY_SCHEMA)


class CompactManifestsConfig(TableJobConfig, LocalRunOptions):
    mode: Literal["full", "auto"] = Field(
        default="auto", description="full: rewrite all; auto: Paimon's rules"
    )
    order: Literal["none", "partition"] = Field(
        default="none",
        description="none: entries keep their order, untouched manifests are copied by Avro blocks in "
        "the driver (Paimon's own merge keeps the order too); partition: entries sorted by partition "
        "across the new manifests (narrower partition stats for readers' pruning), every entry "
        "shuffled on Spark (`local` applies)",
    )
    target_file_size: str | None = Field(default=None, description="overrides manifest.target-file-size")
    full_compaction_threshold_size: str | None = Field(
        default=None, description="overrides manifest.full-compaction-threshold-size"
    )
    merge_min_count: int | None = Field(default=None, ge=2, description="overrides manifest.merge-min-count")


CONFIG_MODEL = CompactManifestsConfig


@dataclass(frozen=True)
class Plan:
    """Which manifests to rewrite: groups of consecutive manifests, each merged into new files."""

    manifests: list[ManifestFileMeta]
    groups: list[list[int]]  # indexes into `manifests`; manifests in no group are kept as they are
    full: bool

    @property
    def rewritten(self) -> int:
        return sum(len(g) for g in self.groups)


def plan_compaction(
    manifests: list[ManifestFileMeta], mode: str, target: int, threshold: int, min_count: int
) -> Plan:
    """Decide from sizes alone (no reads) what to rewrite, following the seed's full and minor rules."""
    if not manifests:
        return Plan(manifests, [], mode == "full")
    everything = [list(range(len(manifests)))]
    if mode == "full":
        if len(manifests) == 1 and manifests[0].num_deleted_files == 0:
            return Plan(manifests, [], True)
        return Plan(manifests, everything, True)
    delta_size = sum(m.file_size for m in manifests if m.num_deleted_files > 0 or m.file_size < target)
    if delta_size >= threshold:
        return Plan(manifests, everything, True)
    groups: list[list[int]] = []
    run: list[int] = []
    run_size = 0
    for index, meta in enumerate(manifests):
        run.append(index)
        run_size += meta.file_size
        if run_size >= target:
            if len(run) > 1:
                groups.append(run)
            run, run_size = [], 0
    if len(run) >= min_count:
        groups.append(run)
    return Plan(manifests, groups, False)


def run(context: JobContext, config: CompactManifestsConfig) -> None:
    table = open_existing_table(config)
    if config.order == "none":  # by blocks in the driver: no Spark job at any size
        context.record.details["executed_in"] = ENGINE_DRIVER
        _compact(context, None, table, config)
        return
    run_where_it_fits(context, table, config, lambda spark: _compact(context, spark, table, config))


def _compact(
    context: JobContext, spark: SparkSession | None, table: Table, config: CompactManifestsConfig
) -> None:
    compact_manifests(
        spark,
        table,
        mode=config.mode,
        order=config.order,
        option_overrides={
            key: value
            for key, value in {
                "manifest.target-file-size": config.target_file_size,
                "manifest.full-compaction-threshold-size": config.full_compaction_threshold_size,
                "manifest.merge-min-count": None
                if config.merge_min_count is None
                else str(config.merge_min_count),
            }.items()
            if value is not None
        },
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def compact_manifests(
    spark: SparkSession | None,
    table: Table,
    *,
    mode: str = "auto",
    order: str = "none",
    option_overrides: dict[str, str] | None = None,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    before_commit: Callable[[], None] | None = None,
) -> RunRecord:
    """Compact the manifests of the table's latest snapshot; `before_commit` is a test hook.

    `order` "none": merged by Avro blocks in this process (`spark` unused, may be None);
    "partition": entries sorted by partition through a Spark (or LocalSession) shuffle.
    """
    log = log or logging.getLogger("jobs.compact_manifests")
    record = record or RunRecord(operation="compact-manifests", table=table.path, dry_run=dry_run)
    options = _options_with(table, option_overrides or {})
    latest = table.snapshot_manager.latest(reuse_read=True)  # the open check's read, when it is handed over
    if latest is None:
        log.info("the table has no snapshot: nothing to compact")
        return record
    table.schema_by_id(latest.schema_id)  # a snapshot naming a missing schema: refuse (exit 2)
    manifests = data_manifests(table, latest)
    plan = plan_compaction(
        manifests,
        mode,
        options.manifest_target_file_size,
        options.manifest_full_compaction_threshold_size,
        options.manifest_merge_min_count,
    )
    _record_before(record, latest.id, plan)
    if not plan.groups:
        log.info("nothing to compact in snapshot %d (%d manifests)", latest.id, len(manifests))
        record.count("manifests_after", len(manifests))
        return record

    if order == "partition":
        assert spark is not None, "order: partition merges through a (Spark or local) session"
        outcome = _merge_and_write(spark, table, plan, options, write=not dry_run)
    else:
        outcome = _merge_by_blocks(table, plan, options, write=not dry_run)
    if dry_run:
        kept_entries = sum(_entries(manifests[i]) for i in _kept(plan))
        record.count("entries_after", outcome.survivors + kept_entries)
        log.info("dry run: %d manifests would be rewritten", plan.rewritten)
        return record

    base = _assemble(plan, outcome.metas)
    written = [meta for group in outcome.metas.values() for meta in group]
    record.count("manifests_written", len(written))
    record.add_bytes("manifests_written", sum(m.file_size for m in written))
    record.count("manifests_after", len(base))
    record.count("entries_after", sum(_entries(m) for m in base))
    if before_commit is not None:
        before_commit()
    _commit(table, option_overrides, latest.id, plan, base, [m.file_name for m in written], record, log)
    return record


def _options_with(table: Table, overrides: dict[str, str]) -> CoreOptions:
    """The table's options with the job's overrides; a size override that is no size is exit 2."""
    for key, value in overrides.items():
        if key.endswith("size"):
            try:
                parse_memory_size(value)
            except ValueError as error:
                raise BadInputError(f"{key}: {error}") from None
    return CoreOptions({**table.schema.options, **overrides})


def _entries(meta: ManifestFileMeta) -> int:
    return meta.num_added_files + meta.num_deleted_files


def _record_before(record: RunRecord, snapshot_id: int, plan: Plan) -> None:
    manifests = plan.manifests
    record.snapshot_ids["base"] = snapshot_id
    record.count("manifests_before", len(manifests))
    record.add_bytes("manifests_before", sum(m.file_size for m in manifests))
    record.count("entries_before", sum(_entries(m) for m in manifests))
    record.count("manifests_rewritten", plan.rewritten)


def _commit(
    table: Table,
    option_overrides: dict[str, str] | None,
    snapshot_id: int,
    plan: Plan,
    base: list[ManifestFileMeta],
    written: list[str],
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> None:
    """One COMPACT snapshot whose base list is `base` followed by any manifests committed meanwhile;
    refused when another writer rewrote the planned manifests. A failed commit removes the
    manifests this run wrote."""
    planned_names = [m.file_name for m in plan.manifests]

    def rewrite(ctx: AttemptContext, previous: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        names = [m.file_name for m in previous]
        if names[: len(planned_names)] != planned_names:
            raise CommitConflictError(
                f"{table.path}: another writer rewrote the manifests of snapshot {snapshot_id} "
                "while this job ran; run compact-manifests again"
            )
        return base + previous[len(planned_names) :]  # manifests committed meanwhile stay after ours

    committer = SnapshotCommit(table, options=option_overrides)
    try:
        snapshot = committer.commit(
            lambda _ctx: [], kind=COMPACT, allow_empty=True, rewrite_base=rewrite, check_conflicts=False
        )
    except BaseException:
        table.file_io.delete_many([table.manifest_path(name) for name in written])
        log.info("commit failed: removed the %d manifests this run wrote", len(written))
        raise
    record.snapshot_ids["committed"] = None
    if snapshot is not None:
        record.committed(snapshot.id)
    log.info(
        "snapshot %s: %d manifests -> %d", record.snapshot_ids["committed"], len(plan.manifests), len(base)
    )


def _merge_by_blocks(table: Table, plan: Plan, options: CoreOptions, write: bool) -> MergeOutcome:
    """Each planned group merged by Avro blocks (`manifest_concat`): untouched manifests copied, the
    rest entry by entry; a full compaction refuses a DELETE without its ADD. A failure removes every
    manifest this run wrote."""
    prefix = str(uuid.uuid4())
    counter = iter(range(1 << 30))
    metas: dict[int, list[ManifestFileMeta]] = {}
    try:
        for group_index, group in enumerate(plan.groups):
            inputs = [plan.manifests[i] for i in group]
            metas[group_index] = merge_by_blocks(
                table.file_io,
                table.manifest_path,
                inputs,
                read_deletes(table.file_io, table.manifest_path, inputs),
                table.file_io.join(table.path, "manifest"),
                lambda: f"manifest-{prefix}-{next(counter)}",
                options.manifest_target_file_size,
                options.manifest_compression,
                table.schema.partition_types(),
                table.schema.id,
                strict=plan.full,
                source=f"{table.path} manifests",
                write=write,
            )
    except BaseException as error:
        if write:
            table.file_io.delete_many(
                [table.manifest_path(meta.file_name) for group in metas.values() for meta in group]
            )
        if isinstance(error, InvalidTableStateError):
            raise InvalidTableStateError(
                f"{error}; the metadata is inconsistent, nothing was changed"
            ) from None
        raise
    survivors = sum(m.num_added_files + m.num_deleted_files for group in metas.values() for m in group)
    return MergeOutcome(metas, survivors)


def _kept(plan: Plan) -> list[int]:
    grouped = {i for group in plan.groups for i in group}
    return [i for i in range(len(plan.manifests)) if i not in grouped]


@dataclass
class MergeOutcome:
    metas: dict[int, list[ManifestFileMeta]]  # new manifests per group, in partition order
    survivors: int


_RESULT_SCHEMA = pa.schema(
    [
        ("grp", pa.int32()),
        ("first_partition", pa.binary()),
        ("first_ord", pa.int64()),
        ("meta", pa.binary()),
        ("survivors", pa.int64()),
        ("error", pa.string()),
    ]
)


def _merge_and_write(
    spark: SparkSession, table: Table, plan: Plan, options: CoreOptions, write: bool
) -> MergeOutcome:
    """Read the planned manifests on executors, cancel ADD/DELETE pairs, write partition-sorted manifests.

    An ADD and the DELETE that cancels it always share their partition, so one range shuffle by
    (group, partition) puts both in the same task, already in partition order; each task merges its
    runs with the same `EntryMerger` the commit path uses and writes its own rolling manifests.
    """
    # pyspark's storage level (a LocalSession ignores it); not at the top: `--help` never loads pyspark
    from pyspark import StorageLevel

    target = options.manifest_target_file_size
    work = [(g, i, plan.manifests[i]) for g, group in enumerate(plan.groups) for i in group]
    names = driver_list_frame(
        spark,
        {
            "grp": pa.array([g for g, _i, _meta in work], pa.int32()),
            "idx": pa.array([i for _g, i, _meta in work], pa.int64()),
            "name": pa.array([meta.file_name for _g, _i, meta in work], pa.string()),
            "size": pa.array([meta.file_size for _g, _i, meta in work], pa.int64()),
        },
        "manifest names",
    )
    # one writer per target-size of input manifests: each writer's output is a run of full manifests
    rewritten_bytes = sum(meta.file_size for _g, _i, meta in work)
    writers = max(1, min(-(-rewritten_bytes // target), spark.sparkContext.defaultParallelism * 4))
    # the range shuffle samples its input first: keep the entries rather than reading every manifest twice
    entries = names.mapInArrow(_manifest_reader(table), ENTRY_COLUMNS).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        arranged = entries.repartitionByRange(writers, "grp", "partition").sortWithinPartitions(
            "grp", "partition", "ord"
        )
        merger = _group_merger(table, plan.full, target, options.manifest_compression, write)
        results = arranged.mapInArrow(merger, RESULT_COLUMNS).collect()
    finally:
        entries.unpersist()
    return _outcome_of(table, results)


def _manifest_reader(table: Table) -> ArrowMapper:
    """Per planned manifest (grp, idx, name, size): its raw entries as shuffle rows. A task reads its
    next manifests while it decodes one (`read_ahead`): one after another it would be bound by the
    store's latency."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [
            row
            for batch in batches
            for row in zip(
                *(batch.column(c).to_pylist() for c in ("grp", "idx", "name", "size")), strict=True
            )
        ]
        files = [(table.manifest_path(name), size) for _group, _index, name, size in rows]
        for (group, index, _name, _size), (path, _), data in zip(
            rows, files, sized_bytes(table.file_io, files), strict=True
        ):
            with gc_paused():
                entries = list(iter_raw_entries(data, path))
            yield raw_entries_batch(entries, group, index)

    return read


def _group_merger(table: Table, full: bool, target: int, compression: str, write: bool) -> ArrowMapper:
    """Per task (rows sorted by group, partition, order): each group's partition runs merged, the
    survivors written as rolling manifests (or only counted, `write` False); one result row per new
    manifest, per dry-run group, and per merge error."""
    schema = table.schema
    manifest_dir = table.file_io.join(table.path, "manifest")

    def merge_and_write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [batch for batch in batches if batch.num_rows]
        if not collected:
            return
        rows = pa.Table.from_batches(collected)
        groups = rows.column("grp").to_pylist()
        partitions = rows.column("partition").to_pylist()
        orders = rows.column("ord").to_pylist()
        entries = raw_entries_of(rows)
        prefix = str(uuid.uuid4())
        counter = iter(range(1 << 30))
        out: list[dict[str, Any]] = []
        for start, end in _runs(groups, 0, len(groups)):
            survivors = _merge_group(table, entries, groups, partitions, start, end, full, out)
            first = {"grp": groups[start], "first_partition": partitions[start], "first_ord": orders[start]}
            if write and survivors:
                metas = rolling_write_raw_manifests(
                    table.file_io,
                    manifest_dir,
                    lambda: f"manifest-{prefix}-{next(counter)}",
                    survivors,
                    target,
                    compression,
                    schema.partition_types(),
                    schema.id,
                )
                out.extend(
                    {**first, "meta": pickle.dumps(meta), "survivors": _entries(meta), "error": None}
                    for meta in metas
                )
            elif survivors:
                out.append({**first, "meta": None, "survivors": len(survivors), "error": None})
        yield pa.RecordBatch.from_pylist(out, schema=_RESULT_SCHEMA)

    return merge_and_write


def _runs(keys: list[Any], start: int, stop: int) -> Iterator[tuple[int, int]]:
    """[start, end) spans of equal consecutive keys within [start, stop)."""
    while start < stop:
        end = start + 1
        while end < stop and keys[end] == keys[start]:
            end += 1
        yield start, end
        start = end


def _merge_group(
    table: Table,
    entries: list[RawEntry],
    groups: list[int],
    partitions: list[bytes],
    start: int,
    end: int,
    full: bool,
    errors: list[dict[str, Any]],
) -> list[RawEntry]:
    """One group's rows [start, end): each partition's run merged (`EntryMerger`: a full compaction
    keeps live entries only), survivors in order; a merge error becomes an error row in `errors`."""
    survivors: list[RawEntry] = []
    for run_start, run_end in _runs(partitions, start, end):
        merger = EntryMerger(f"{table.path} manifests")
        try:
            merger.add_all(entries[run_start:run_end])
            merged = merger.live() if full else merger.merged()
        except PaimonFormatError as error:
            errors.append(
                {
                    "grp": groups[start],
                    "first_partition": b"",
                    "first_ord": 0,
                    "meta": None,
                    "survivors": 0,
                    "error": str(error),
                }
            )
            merged = []
        survivors.extend(merged)
    return survivors


def _outcome_of(table: Table, results: list[Any]) -> MergeOutcome:
    """The new manifests per group in partition order; on any merge error, every manifest written is
    removed again and the run fails (the metadata is inconsistent, nothing was changed)."""
    errors = [row["error"] for row in results if row["error"]]
    new_metas = [row for row in results if row["meta"] is not None]
    if errors:
        table.file_io.delete_many(
            [table.manifest_path(pickle.loads(row["meta"]).file_name) for row in new_metas]
        )
        raise InvalidTableStateError(f"{errors[0]}; the metadata is inconsistent, nothing was changed")
    by_group: dict[int, list[tuple]] = {}
    for row in new_metas:
        by_group.setdefault(row["grp"], []).append(
            ((bytes(row["first_partition"]), row["first_ord"]), pickle.loads(row["meta"]))
        )
    metas = {
        g: [meta for _key, meta in sorted(items, key=lambda item: item[0])] for g, items in by_group.items()
    }
    return MergeOutcome(metas, sum(row["survivors"] for row in results))


_NO_IDENTITY_REST = (None, None, None)


def raw_entries_batch(entries: list[RawEntry], group: int, index: int) -> pa.RecordBatch:
    """One manifest's raw entries as shuffle rows; `ord` keeps file order (manifest index, position)."""
    columns = [
        pa.array([group] * len(entries), pa.int32()),
        pa.array([(index << 32) | position for position in range(len(entries))], pa.int64()),
    ]
    for name, arrow_type in _RAW_COLUMNS.items():
        values = [getattr(e, name) for e in entries]
        if name == "identity_rest":
            values = [None if rest == _NO_IDENTITY_REST else pickle.dumps(rest) for rest in values]
        columns.append(pa.array(values, arrow_type))
    return pa.RecordBatch.from_arrays(columns, schema=_ENTRY_SCHEMA)


def raw_entries_of(rows: pa.Table) -> list[RawEntry]:
    """The RawEntry objects of shuffle rows made by `raw_entries_batch`, in row order."""
    columns = [rows.column(name).to_pylist() for name in _RAW_COLUMNS]
    rest = list(_RAW_COLUMNS).index("identity_rest")
    columns[rest] = [_NO_IDENTITY_REST if value is None else pickle.loads(value) for value in columns[rest]]
    return [RawEntry(*values) for values in zip(*columns, strict=True)]


def _assemble(plan: Plan, new_metas: dict[int, list[ManifestFileMeta]]) -> list[ManifestFileMeta]:
    """The new base list: kept manifests in place, each rewritten group replaced by its new manifests."""
    group_of = {i: g for g, group in enumerate(plan.groups) for i in group}
    result: list[ManifestFileMeta] = []
    emitted: set[int] = set()
    for index, meta in enumerate(plan.manifests):
        group = group_of.get(index)
        if group is None:
            result.append(meta)
        elif group not in emitted:
            emitted.add(group)
            result.extend(new_metas.get(group, []))
    return result


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("compact-manifests")
