"""Merging one branch's data files into another, as Paimon's `mergeBranch` (see jobs/merge_branch.py).

Planning reads metadata only: both branches' snapshot files (their whole history is checked), the
latest snapshot's manifests of each, and the schemas the merged files were written with. Each
refusal is a `BadInputError` (exit 2) naming the branch and the reason, raised before anything is
written. The commit is one APPEND snapshot on the target through `SnapshotCommit`, made only on
top of the target snapshot the plan read (a writer that committed meanwhile: exit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jobs.runtime.errors import BadInputError
from jobs.runtime.table_open import open_branch
from paimon_format.commit import APPEND, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.errors import CommitConflictError
from paimon_format.manifest.codec import decode_manifest
from paimon_format.manifest.entries import ManifestEntry, ManifestFileMeta
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import EntryMerger, data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

BRANCH_MERGE_ENABLED = "branch-merge.enabled"
# the commit kinds a mergeable history may hold: those that delete no data file
APPEND_ONLY_KINDS = ("APPEND", "ANALYZE")
FIRST_SNAPSHOT_ID = 1


@dataclass(frozen=True)
class MergePlan:
    """What a merge adds to the target, and the target snapshot it was planned on."""

    source: str
    target: str
    source_latest: int
    target_latest: int
    files: list[ManifestEntry]  # the source's live files the target lacks (ADD entries)
    snapshots_checked: int  # snapshot files read for the history check, both branches

    @property
    def bytes(self) -> int:
        return sum(entry.file.file_size for entry in self.files)

    @property
    def rows(self) -> int:
        return sum(entry.file.row_count for entry in self.files)


def plan_merge(table: Table, source: str, target: str) -> MergePlan:
    """Check every rule Paimon's mergeBranch checks and compute the files to add (module docstring)."""
    if source == target:
        raise BadInputError(f"{table.path}: cannot merge branch {source!r} into itself")
    source_table, target_table = open_branch(table, source), open_branch(table, target)
    source_schema = _latest_schema(source_table, source)
    target_schema = _latest_schema(target_table, target)
    _refuse_unmergeable_table(target_table, target, target_schema, source, source_schema)
    source_history = _append_only_history(source_table, source)
    target_history = _append_only_history(target_table, target)
    source_latest, target_latest = source_history[-1], target_history[-1]
    source_live, target_live = _live_files(source_table, source_latest, target_table, target_latest)
    present = {entry.identifier() for entry in target_live}
    files = [entry for entry in source_live if entry.identifier() not in present]
    _refuse_schema_history_mismatch(source_table, target_table, source, target, files)
    return MergePlan(
        source=source,
        target=target,
        source_latest=source_latest.id,
        target_latest=target_latest.id,
        files=files,
        snapshots_checked=len(source_history) + len(target_history),
    )


def _latest_schema(table: Table, branch: str) -> TableSchema:
    schema = table.latest_schema()
    if schema is None:
        raise BadInputError(f"{table.metadata_root}: branch {branch!r} has no schema")
    return schema


def _refuse_unmergeable_table(
    target_table: Table, target: str, target_schema: TableSchema, source: str, source_schema: TableSchema
) -> None:
    """The table-level rules: append tables without deletion vectors, row tracking or data evolution
    on both sides (first: no option makes such a table mergeable), the option set on the target, and
    the same columns on both sides."""
    for name, schema in ((source, source_schema), (target, target_schema)):
        if schema.primary_keys:
            raise BadInputError(
                f"{target_table.path}: branch merge is only for append tables, branch {name!r} has "
                f"primary keys {list(schema.primary_keys)}"
            )
        options = schema.core_options()
        for flag, enabled in (
            ("deletion-vectors.enabled", options.deletion_vectors_enabled),
            ("row-tracking.enabled", options.row_tracking_enabled),
            ("data-evolution.enabled", options.data_evolution_enabled),
        ):
            if enabled:
                raise BadInputError(
                    f"{target_table.path}: branch {name!r} sets '{flag}' = 'true', which branch merge "
                    "does not support"
                )
    if target_schema.options.get(BRANCH_MERGE_ENABLED, "false").strip().lower() != "true":
        raise BadInputError(
            f"{target_table.path}: branch {target!r} does not set '{BRANCH_MERGE_ENABLED}' = 'true'; "
            "Paimon merges branches only of tables created with it (ALTER TABLE ... SET TBLPROPERTIES)"
        )
    if source_schema.fields != target_schema.fields:
        raise BadInputError(
            f"{target_table.path}: cannot merge branch {source!r} into {target!r}, schema mismatch: "
            f"columns {_columns(source_schema)} vs {_columns(target_schema)}"
        )


def _columns(schema: TableSchema) -> list[str]:
    return [f"{field.name} {field.type.to_json()}" for field in schema.fields]


def _live_files(
    source_table: Table, source_latest: Snapshot, target_table: Table, target_latest: Snapshot
) -> tuple[list[ManifestEntry], list[ManifestEntry]]:
    """The live data files of both latest snapshots. Branches share the table's manifest directory,
    and two branches that forked share most of their manifests: each is read once (many in flight)."""
    source_metas = data_manifests(source_table, source_latest)
    target_metas = data_manifests(target_table, target_latest)
    unique = list({meta.file_name: meta for meta in source_metas + target_metas}.values())
    files = [(target_table.manifest_path(meta.file_name), meta.file_size) for meta in unique]
    entries = {
        meta.file_name: list(decode_manifest(data, path))
        for meta, (path, _size), data in zip(
            unique, files, sized_bytes(target_table.file_io, files), strict=True
        )
    }

    def live(table: Table, snapshot: Snapshot, metas: list[ManifestFileMeta]) -> list[ManifestEntry]:
        merger = EntryMerger(f"{table.metadata_root} snapshot {snapshot.id}")
        return merger.add_all(entry for meta in metas for entry in entries[meta.file_name]).live()

    return live(source_table, source_latest, source_metas), live(target_table, target_latest, target_metas)


def _append_only_history(table: Table, branch: str) -> list[Snapshot]:
    """Every snapshot of the branch, oldest first, when they run from snapshot 1 without a gap and
    each is an APPEND (or ANALYZE): then no data file was ever deleted on it, so a file the other
    branch has and this one lacks was added there, never removed here (Paimon's rule, which keeps
    no record of where a branch forked). BadInputError otherwise."""
    manager = table.snapshot_manager
    checked = manager.latest(reuse_read=True)  # the table's open check read it: not again
    ids = manager.snapshot_ids()
    where = f"{table.metadata_root}: cannot merge: branch {branch!r}"
    if not ids:
        raise BadInputError(f"{where} has no snapshot")
    if ids[0] != FIRST_SNAPSHOT_ID:
        raise BadInputError(
            f"{where} does not start at snapshot {FIRST_SNAPSHOT_ID} (earliest is {ids[0]}); branch merge "
            "requires its complete append-only snapshot history"
        )
    gaps = sorted(set(range(FIRST_SNAPSHOT_ID, ids[-1] + 1)) - set(ids))
    if gaps:
        raise BadInputError(
            f"{where}: snapshot {gaps[0]} is missing; branch merge requires its complete append-only "
            "snapshot history"
        )
    known = {checked.id: checked} if checked is not None else {}
    history = list(
        map_in_flight(lambda i: known.get(i) or manager.snapshot(i), ids, table.file_io.io_parallelism)
    )
    for snapshot in history:
        if snapshot.commit_kind not in APPEND_ONLY_KINDS:
            raise BadInputError(
                f"{where}: snapshot {snapshot.id} has commit kind {snapshot.commit_kind}; branch merge "
                "requires a complete append-only snapshot history (no compaction or overwrite)"
            )
    return history


def _refuse_schema_history_mismatch(
    source_table: Table, target_table: Table, source: str, target: str, files: list[ManifestEntry]
) -> None:
    """Each schema the merged files were written with must exist on the target as the same schema:
    readers of the target read a file with the target's schema of the file's schema id."""
    target_ids = set(target_table.schema_manager.list_ids())
    for schema_id in sorted({entry.file.schema_id for entry in files}):
        if schema_id not in target_ids:
            raise BadInputError(
                f"{target_table.path}: cannot merge branch {source!r} into {target!r}: the target has no "
                f"schema {schema_id}, which files of the source were written with"
            )
        if _comparable(source_table.schema_by_id(schema_id)) != _comparable(
            target_table.schema_by_id(schema_id)
        ):
            raise BadInputError(
                f"{target_table.path}: cannot merge branch {source!r} into {target!r}: schema {schema_id} "
                "differs between the two branches (schema history mismatch)"
            )


def _comparable(schema: TableSchema) -> tuple:
    """What Paimon's TableSchema.equals compares."""
    return (
        schema.version,
        schema.fields,
        schema.partition_keys,
        schema.primary_keys,
        schema.options,
        schema.comment,
        schema.time_millis,
    )


def commit_merge(table: Table, plan: MergePlan, commit_user: str | None = None) -> Snapshot:
    """One APPEND snapshot on the target adding the planned files. Only on top of the planned
    target snapshot: another writer's commit meanwhile is a CommitConflictError (exit 3), nothing
    committed. The commit writes manifests, then the manifest lists, then the snapshot file
    (create-if-absent), so a crash leaves the target as it was (plus unreferenced manifests and
    lists, for remove-orphan-files) or merged."""
    target_table = open_branch(table, plan.target)
    snapshot = SnapshotCommit(target_table, commit_user).commit(
        _planned_only(target_table, plan), kind=APPEND, check_conflicts=False
    )
    if snapshot is None:  # the plan had files, so the commit has entries
        raise AssertionError(f"{target_table.path}: merge of {len(plan.files)} files committed nothing")
    return snapshot


def _planned_only(target_table: Table, plan: MergePlan) -> Callable[[AttemptContext], list[ManifestEntry]]:
    def build(ctx: AttemptContext) -> list[ManifestEntry]:
        if ctx.latest is None or ctx.latest.id != plan.target_latest:
            found = ctx.latest.id if ctx.latest else None
            raise CommitConflictError(
                f"{target_table.metadata_root}: another writer committed snapshot {found} on branch "
                f"{plan.target!r} while merge-branch ran (planned on {plan.target_latest}); nothing was "
                "committed, run merge-branch again"
            )
        return list(plan.files)

    return build
