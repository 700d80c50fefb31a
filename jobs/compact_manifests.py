"""compact-manifests: rewrite a table's manifests into fewer, partition-sorted ones (seed 003).

Plan on the driver from the manifest list only (names and sizes). Executors read the entries of the
manifests being rewritten into a DataFrame; ADD/DELETE pairs cancel by grouping on the file
identifier; the survivors are range-sorted by partition and written as new manifests of
`manifest.target-file-size` on the executors. The driver then commits one COMPACT snapshot whose base
list holds the new manifests (followed by any manifests a concurrent writer added meanwhile) and
whose delta list is empty. The driver holds manifest names and metadata, never the entries.

Spark-submit entry: `spark-submit jobs/compact_manifests.py --config conf/compact-manifests.yaml`.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from pydantic import Field

from jobs.config import TableJobConfig
from jobs.errors import BadInputError
from jobs.registry import JobContext
from jobs.report import RunRecord
from paimon_format.commit import COMPACT, AttemptContext, SnapshotCommit
from paimon_format.errors import CommitConflictError, InvalidTableStateError
from paimon_format.manifest import ADD, DELETE, ManifestFileMeta, read_manifest, rolling_write_manifests
from paimon_format.options import CoreOptions, parse_memory_size
from paimon_format.scan import data_manifests
from paimon_format.table import Table

ENTRY_COLUMNS = "grp int, id_key binary, ord long, kind int, partition binary, payload binary"
RESULT_COLUMNS = "grp int, first_partition binary, first_ord long, meta binary"


class CompactManifestsConfig(TableJobConfig):
    mode: Literal["full", "auto"] = Field(
        default="auto", description="full: rewrite all; auto: Paimon's rules"
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
    try:
        table = Table.open(
            config.warehouse, config.table, config.storage_options, config.allow_unsafe_overwrite_commit
        )
        table.schema  # noqa: B018 - fails early, with the path, when it is not a table
    except ValueError as error:
        raise BadInputError(str(error)) from None
    compact_manifests(
        context.spark,
        table,
        mode=config.mode,
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
    spark: Any,
    table: Table,
    mode: str = "auto",
    option_overrides: dict[str, str] | None = None,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: Any = None,
    before_commit: Callable[[], None] | None = None,
) -> RunRecord:
    """Compact the manifests of the table's latest snapshot; `before_commit` is a test hook."""
    import logging

    log = log or logging.getLogger("jobs.compact_manifests")
    record = record or RunRecord(operation="compact-manifests", table=table.path, dry_run=dry_run)
    options = CoreOptions({**table.schema.options, **(option_overrides or {})})
    for key, value in (option_overrides or {}).items():
        if key.endswith("size"):
            try:
                parse_memory_size(value)
            except ValueError as error:
                raise BadInputError(f"{key}: {error}") from None
    latest = table.snapshot_manager.latest()
    if latest is None:
        log.info("the table has no snapshot: nothing to compact")
        return record
    manifests = data_manifests(table, latest)
    plan = plan_compaction(
        manifests,
        mode,
        options.manifest_target_file_size,
        options.manifest_full_compaction_threshold_size,
        options.manifest_merge_min_count,
    )
    record.snapshot_ids["base"] = latest.id
    record.count("manifests_before", len(manifests))
    record.add_bytes("manifests_before", sum(m.file_size for m in manifests))
    record.count("entries_before", sum(m.num_added_files + m.num_deleted_files for m in manifests))
    record.count("manifests_rewritten", plan.rewritten)
    if not plan.groups:
        log.info("nothing to compact in snapshot %d (%d manifests)", latest.id, len(manifests))
        record.count("manifests_after", len(manifests))
        return record

    survivors = _merged_entries(spark, table, plan)
    if dry_run:
        after = survivors.count()
        record.count(
            "entries_after",
            after + sum(manifests[i].num_added_files + manifests[i].num_deleted_files for i in _kept(plan)),
        )
        log.info("dry run: %d manifests would be rewritten", plan.rewritten)
        return record

    new_metas = _write_sorted_manifests(table, survivors, options)
    base = _assemble(plan, new_metas)
    written = [meta.file_name for group in new_metas.values() for meta in group]
    record.count("manifests_written", len(written))
    record.add_bytes("manifests_written", sum(m.file_size for group in new_metas.values() for m in group))
    record.count("manifests_after", len(base))
    record.count("entries_after", sum(m.num_added_files + m.num_deleted_files for m in base))
    planned_names = [m.file_name for m in manifests]

    def rewrite(ctx: AttemptContext, previous: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        names = [m.file_name for m in previous]
        if names[: len(planned_names)] != planned_names:
            raise CommitConflictError(
                f"{table.path}: another writer rewrote the manifests of snapshot {latest.id} "
                "while this job ran; run compact-manifests again"
            )
        return base + previous[len(planned_names) :]  # manifests committed meanwhile stay after ours

    if before_commit is not None:
        before_commit()
    committer = SnapshotCommit(table, options=option_overrides)
    try:
        snapshot = committer.commit(
            lambda _ctx: [], kind=COMPACT, allow_empty=True, rewrite_base=rewrite, check_conflicts=False
        )
    except BaseException:
        table.file_io.delete_many([table.manifest_path(name) for name in written])
        log.info("commit failed: removed the %d manifests this run wrote", len(written))
        raise
    record.snapshot_ids["committed"] = snapshot.id if snapshot else None
    log.info("snapshot %s: %d manifests -> %d", record.snapshot_ids["committed"], len(manifests), len(base))
    return record


def _kept(plan: Plan) -> list[int]:
    grouped = {i for group in plan.groups for i in group}
    return [i for i in range(len(plan.manifests)) if i not in grouped]


def _merged_entries(spark: Any, table: Table, plan: Plan) -> Any:
    """A DataFrame of the entries that survive ADD/DELETE cancellation, per group (read on executors)."""
    from pyspark.sql import functions as F

    work = [(g, i, plan.manifests[i].file_name) for g, group in enumerate(plan.groups) for i in group]
    full = plan.full
    entry_schema = pa.schema(
        [
            ("grp", pa.int32()),
            ("id_key", pa.binary()),
            ("ord", pa.int64()),
            ("kind", pa.int32()),
            ("partition", pa.binary()),
            ("payload", pa.binary()),
        ]
    )

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for group, index, name in zip(
                *(batch.column(c).to_pylist() for c in ("grp", "idx", "name")), strict=True
            ):
                entries = read_manifest(table.file_io, table.manifest_path(name))
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([group] * len(entries), pa.int32()),
                        pa.array([pickle.dumps(e.identifier()) for e in entries], pa.binary()),
                        pa.array([(index << 32) | position for position in range(len(entries))], pa.int64()),
                        pa.array([e.kind for e in entries], pa.int32()),
                        pa.array([e.partition for e in entries], pa.binary()),
                        pa.array([pickle.dumps(e) for e in entries], pa.binary()),
                    ],
                    schema=entry_schema,
                )

    slices = max(1, min(len(work), spark.sparkContext.defaultParallelism * 4))
    names = spark.createDataFrame(work, "grp int, idx long, name string").repartition(slices)
    entries = names.mapInArrow(read, ENTRY_COLUMNS)
    resolved = entries.groupBy("grp", "id_key").agg(
        F.sum(F.when(F.col("kind") == ADD, 1).otherwise(0)).alias("adds"),
        F.sum(F.when(F.col("kind") == DELETE, 1).otherwise(0)).alias("deletes"),
        F.max_by(F.struct("ord", "partition", "payload", "kind"), "ord").alias("last"),
    )
    # the consistency check, the count or the range sort's sampling and the write all read this:
    # keep it rather than reading every manifest again for each of them
    from pyspark import StorageLevel

    resolved = resolved.persist(StorageLevel.MEMORY_AND_DISK)
    bad = resolved.where((F.col("adds") - F.col("deletes") > 1) | (F.col("deletes") - F.col("adds") > 1))
    if full:
        bad = bad.union(resolved.where(F.col("deletes") > F.col("adds")))
    problem = bad.select("last.payload", "adds", "deletes").limit(1).collect()
    if problem:
        entry = pickle.loads(problem[0]["payload"])
        raise InvalidTableStateError(
            f"{table.path}: file {entry.file.file_name} (bucket {entry.bucket}, level {entry.file.level}) is "
            f"added {problem[0]['adds']} and deleted {problem[0]['deletes']} times in the manifests; "
            "the metadata is inconsistent, nothing was changed"
        )
    survivors = resolved.where(F.col("adds") != F.col("deletes")).select(
        "grp",
        F.col("last.partition").alias("partition"),
        F.col("last.ord").alias("ord"),
        F.col("last.payload").alias("payload"),
    )
    return survivors


def _write_sorted_manifests(
    table: Table, survivors: Any, options: CoreOptions
) -> dict[int, list[ManifestFileMeta]]:
    """Range-sort survivors by (group, partition) and write rolling manifests on the executors."""
    schema = table.schema
    target = options.manifest_target_file_size
    compression = options.manifest_compression
    manifest_dir = table.file_io.join(table.path, "manifest")

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prefix = str(uuid.uuid4())
        counter = iter(range(1 << 30))
        collected = [batch for batch in batches if batch.num_rows]
        if not collected:
            return
        rows = pa.Table.from_batches(collected)
        groups = rows.column("grp").to_pylist()
        partitions = rows.column("partition").to_pylist()
        orders = rows.column("ord").to_pylist()
        payloads = rows.column("payload").to_pylist()
        out = []
        start = 0
        while start < len(groups):
            end = start
            while end < len(groups) and groups[end] == groups[start]:
                end += 1
            entries = [pickle.loads(p) for p in payloads[start:end]]
            metas = rolling_write_manifests(
                table.file_io,
                manifest_dir,
                lambda: f"manifest-{prefix}-{next(counter)}",
                entries,
                target,
                compression,
                schema.partition_types(),
                schema.id,
            )
            out.extend(
                {
                    "grp": groups[start],
                    "first_partition": partitions[start],
                    "first_ord": orders[start],
                    "meta": pickle.dumps(meta),
                }
                for meta in metas
            )
            start = end
        yield pa.RecordBatch.from_pylist(
            out,
            schema=pa.schema(
                [
                    ("grp", pa.int32()),
                    ("first_partition", pa.binary()),
                    ("first_ord", pa.int64()),
                    ("meta", pa.binary()),
                ]
            ),
        )

    written = survivors.orderBy("grp", "partition", "ord").mapInArrow(write, RESULT_COLUMNS).collect()
    by_group: dict[int, list[tuple]] = {}
    for row in written:
        by_group.setdefault(row["grp"], []).append(
            ((bytes(row["first_partition"]), row["first_ord"]), pickle.loads(row["meta"]))
        )
    return {
        group: [meta for _key, meta in sorted(items, key=lambda item: item[0])]
        for group, items in by_group.items()
    }


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
