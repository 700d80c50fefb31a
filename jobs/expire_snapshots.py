"""expire-snapshots: remove old snapshots and the files only they used (seed 004, issue #4).

Plan (driver, small): snapshot ids and a few commit times give the range [begin, end) to expire
(`paimon_format.expire.plan_range`). Everything else is DataFrames built on the executors:

- data files: the delta manifests of snapshots (begin, end]; per file path the last operation in
  that order wins (ADD then DELETE: a candidate; DELETE then ADD: kept);
- changelog files and index files of the expired snapshots, their manifests, index manifests,
  statistics and manifest lists;
- minus (LEFT ANTI JOIN) everything the remaining roots need: snapshots >= end, every tag, every
  branch, long-lived changelogs (`jobs.referenced`, read strictly: a failed read is an error).

Order, so that a crash anywhere followed by a rerun deletes exactly what one run deletes:
1. data, extra, changelog and index files; 2. manifests, index manifests, statistics;
3. manifest lists; 4. snapshot files one by one, oldest first; 5. the EARLIEST hint.
A rerun re-plans from the oldest snapshot file left, so it finds the same `end`. It may find
manifests or lists of *expiring* snapshots already deleted: by the order above that only happens
after step 1 completed, so such a missing file is counted (`already_deleted_metadata`) and skipped.
The side that protects files (the retained roots) is never read leniently.

A commit landing during the run only adds roots newer than `end`; they reference files that are
live in the latest snapshot or new, never files deleted at or before `end`. A tag created on an
expiring snapshot meanwhile is detected before anything is deleted (exit 3).

Decoupled changelog retention (Paimon's `changelog.num-retained.*` / `changelog.time-retained`
keeping more than the snapshot settings of this run; unset changelog options fall back to them):
- every expired snapshot becomes a long-lived changelog: right before its snapshot file is deleted,
  `changelog/changelog-<id>` is created (create-if-absent, the snapshot's JSON) and
  `changelog/LATEST` is written. What such a changelog needs (`scan.ChangelogReads`: its changelog
  manifest list, or with `changelog-producer` = none its delta list and the appended files, plus the
  base list) is protected from the plan on, as a root (`CHANGELOG_TO_WRITE_ROOT`), so the anti join
  keeps exactly what Paimon's ExpireSnapshotsImpl keeps when decoupled;
- then the changelogs beyond the changelog retention go (Paimon's ExpireChangelogImpl range, see
  `paimon_format.expire.plan_changelog_range`): their lists, manifests, changelog files and the
  files their deltas name, minus what every retained snapshot, tag, branch and changelog needs;
  same stage order, then the `changelog-<id>` files oldest first, then `changelog/EARLIEST`
  (written before planning too when absent: pypaimon finds the earliest changelog only by it).
A crash anywhere leaves every retained snapshot, tag and changelog readable; a rerun re-plans the
same ranges (a written changelog is kept, a half-expired one is finished).

Spark-submit entry: `spark-submit jobs/expire_snapshots.py --config conf/expire-snapshots.yaml`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pydantic import Field, field_validator

from jobs.config import TableJobConfig
from jobs.errors import BadInputError, SafetyRefusal
from jobs.orphan_deletion import delete_files
from jobs.registry import JobContext
from jobs.report import SAMPLE_LIMIT, RunRecord
from jobs.spark import assert_small, parallelize_small
from jobs.table_open import open_existing_table
from paimon_format.crash_points import crash_point
from paimon_format.errors import MissingFileError, StorageError
from paimon_format.expire import (
    ChangelogSettings,
    ExpireRange,
    ExpireSettings,
    changelog_settings,
    decoupled_cause,
    plan_changelog_range,
    plan_range,
)
from paimon_format.manifest import ADD, read_manifest, read_manifest_list
from paimon_format.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
    parse_duration_ms,
)
from paimon_format.orphans import (
    CHANGELOG_ROOT,
    CHANGELOG_TO_WRITE_ROOT,
    SNAPSHOT_ROOT,
    changelog_or_snapshot,
    index_manifest_references,
    metadata_file_relpaths,
    root_references,
)
from paimon_format.scan import changelog_needs_entry, snapshot_metadata_files
from paimon_format.snapshot import ConsumerManager
from paimon_format.table import MAIN_BRANCH, Table

OPERATION = "expire-snapshots"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_FILES = f"{OPERATION}:files-deleted"
STEP_MANIFESTS = f"{OPERATION}:manifests-deleted"
STEP_LISTS = f"{OPERATION}:manifest-lists-deleted"
STEP_SNAPSHOT = f"{OPERATION}:snapshot-deleted"  # passed once per snapshot file (PAIMON_CRASH_SKIP)
# decoupled changelog retention only
STEP_CHANGELOG_WRITTEN = f"{OPERATION}:changelog-written"  # once per changelog-<id>, before its snapshot goes
STEP_CHANGELOG_PLANNED = f"{OPERATION}:changelog-planned"
STEP_CHANGELOG_FILES = f"{OPERATION}:changelog-files-deleted"
STEP_CHANGELOG_MANIFESTS = f"{OPERATION}:changelog-manifests-deleted"
STEP_CHANGELOG_LISTS = f"{OPERATION}:changelog-manifest-lists-deleted"
STEP_CHANGELOG_DELETED = f"{OPERATION}:changelog-deleted"  # once per expired changelog-<id>
STEPS = (
    STEP_PLANNED,
    STEP_FILES,
    STEP_MANIFESTS,
    STEP_LISTS,
    STEP_CHANGELOG_WRITTEN,
    STEP_SNAPSHOT,
    STEP_CHANGELOG_PLANNED,
    STEP_CHANGELOG_FILES,
    STEP_CHANGELOG_MANIFESTS,
    STEP_CHANGELOG_LISTS,
    STEP_CHANGELOG_DELETED,
)

# Deletion stages, in order.
FILES, MANIFESTS, LISTS = 0, 1, 2
ALREADY_DELETED = 9  # not a deletion stage: metadata of expiring snapshots found missing (counted only)
STAGE_NAMES = {FILES: "files", MANIFESTS: "manifests", LISTS: "manifest_lists"}
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
_NO_ORDER, _NO_KIND, _GONE = 0, -1, -2
_SID_SHIFT, _MANIFEST_SHIFT = 40, 24  # ord = snapshot << 40 | manifest index << 24 | entry position


class ExpireSnapshotsConfig(TableJobConfig):
    retain_min: int | None = Field(default=None, ge=1, description="default: snapshot.num-retained.min")
    retain_max: int | None = Field(default=None, ge=1, description="default: snapshot.num-retained.max")
    older_than: str | None = Field(
        default=None,
        description="duration (1h, 7d) or UTC timestamp ('2024-05-14 00:00:00'); "
        "default: snapshot.time-retained",
    )
    max_deletes: int | None = Field(default=None, ge=1, description="default: snapshot.expire.limit")
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("older_than")
    @classmethod
    def _older_than(cls, value: str | None) -> str | None:
        if value is not None:
            cutoff_ms(value, 0)
        return value


CONFIG_MODEL = ExpireSnapshotsConfig


def cutoff_ms(older_than: str, now_ms: int) -> int:
    """The cutoff time in ms: now - duration, or an absolute UTC timestamp; ValueError otherwise."""
    text = older_than.strip()
    try:
        return now_ms - parse_duration_ms(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{older_than!r} is neither a duration (30 min, 1h, 7d) nor a timestamp (2024-05-14 00:00:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)


def run(context: JobContext, config: ExpireSnapshotsConfig) -> None:
    table = open_existing_table(config)
    expire_snapshots(
        context.spark,
        table,
        retain_min=config.retain_min,
        retain_max=config.retain_max,
        older_than=config.older_than,
        max_deletes=config.max_deletes,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
        batch_size=config.delete_batch_size,
        max_per_second=config.max_deletes_per_second,
    )


def settings_for(
    table: Table,
    retain_min: int | None,
    retain_max: int | None,
    older_than: str | None,
    max_deletes: int | None,
    now_ms: int,
) -> ExpireSettings:
    """Job settings over the table's options (Paimon's defaults where neither sets a value)."""
    options = table.options
    try:
        settings = ExpireSettings(
            retain_min=retain_min if retain_min is not None else options.snapshot_num_retained_min,
            retain_max=retain_max if retain_max is not None else options.snapshot_num_retained_max,
            cutoff_ms=cutoff_ms(older_than, now_ms)
            if older_than is not None
            else now_ms - options.snapshot_time_retained_ms,
            max_deletes=max_deletes if max_deletes is not None else options.snapshot_expire_limit,
        )
        settings.validate()
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    return settings


def changelog_settings_for(table: Table, settings: ExpireSettings, now_ms: int) -> ChangelogSettings:
    """The table's changelog retention; unset options fall back to this run's snapshot settings."""
    options = table.options
    try:
        result = changelog_settings(
            options.changelog_num_retained_min if CHANGELOG_NUM_RETAINED_MIN in options else None,
            options.changelog_num_retained_max if CHANGELOG_NUM_RETAINED_MAX in options else None,
            options.changelog_time_retained_ms if CHANGELOG_TIME_RETAINED in options else None,
            settings,
            now_ms,
        )
        if result.retain_min < 1 or result.retain_max < result.retain_min:
            raise ValueError(
                f"changelog retention min {result.retain_min} / max {result.retain_max}: need 1 <= min <= max"
            )
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    return result


def expire_snapshots(
    spark: Any,
    table: Table,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than: str | None = None,
    max_deletes: int | None = None,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: Any = None,
    batch_size: int = 1000,
    max_per_second: float | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Expire the main branch's old snapshots (see the module docstring for the order), and on a
    table with decoupled changelog retention, its old long-lived changelogs."""
    log = log or logging.getLogger("jobs.expire_snapshots")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    settings = settings_for(table, retain_min, retain_max, older_than, max_deletes, now_ms)
    retention = changelog_settings_for(table, settings, now_ms)
    decoupled = decoupled_cause(retention, settings)
    manager = table.snapshot_manager
    ids = manager.snapshot_ids()
    assert_small(len(ids), SNAPSHOT_LIMIT, "snapshot ids")
    times: dict[int, int] = {}

    def time_of(snapshot_id: int) -> int:
        if snapshot_id not in times:
            times[snapshot_id] = manager.snapshot(snapshot_id).time_millis
        return times[snapshot_id]

    consumer_next = ConsumerManager(table.file_io, table.path).min_next_snapshot()
    plan = plan_range(ids, time_of, settings, consumer_next)
    record.details["settings"] = {
        "retain_min": settings.retain_min,
        "retain_max": settings.retain_max,
        "cutoff": _iso(settings.cutoff_ms),
        "max_deletes": settings.max_deletes,
        "min_consumer_next_snapshot": consumer_next,
    }
    if decoupled:
        record.details["changelog_settings"] = {
            "decoupled": decoupled,
            "retain_min": retention.retain_min,
            "retain_max": retention.retain_max,
            "cutoff": _iso(retention.cutoff_ms),
            "producer": table.options.changelog_producer,
        }
        log.info("changelog retention is decoupled (%s): expired snapshots become changelogs", decoupled)
    if plan is None or plan.count == 0:
        log.info("nothing to expire (%s)", "no snapshot" if plan is None else f"limited by {plan.limited_by}")
        record.count("snapshots_expired", 0)
        if plan is not None:
            record.snapshot_ids.update(earliest=plan.earliest, latest=plan.latest)
        writable: set[int] = set()
    else:
        writable = _expire_snapshot_range(
            spark, table, plan, bool(decoupled), dry_run, record, log, batch_size, max_per_second
        )
    if decoupled and plan is not None:
        _expire_changelogs(
            spark,
            table,
            plan,
            retention,
            consumer_next,
            writable,
            dry_run,
            record,
            log,
            batch_size,
            max_per_second,
        )
    return record


def _iso(epoch_ms: int) -> str:
    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.timezone.utc).isoformat()


def _expire_snapshot_range(
    spark: Any,
    table: Table,
    plan: ExpireRange,
    decoupled: bool,
    dry_run: bool,
    record: RunRecord,
    log: Any,
    batch_size: int,
    max_per_second: float | None,
) -> set[int]:
    """Delete what only snapshots [begin, end) need, then their snapshot files, oldest first.
    Returns the ids that become (or, in a dry run, would become) long-lived changelogs.

    Decoupled: each expired snapshot is first written as `changelog/changelog-<id>`, and what that
    changelog needs is protected like a retained root (`CHANGELOG_TO_WRITE_ROOT`) from the start.
    """
    manager = table.snapshot_manager
    record.snapshot_ids.update(
        earliest=plan.earliest, latest=plan.latest, begin=plan.begin, end=plan.end, limited_by=plan.limited_by
    )
    log.info(
        "expiring snapshots [%d, %d) of [%d, %d] (%s)",
        plan.begin,
        plan.end,
        plan.earliest,
        plan.latest,
        plan.limited_by,
    )
    tags_at_plan = _tag_snapshot_ids(table)
    crash_point(STEP_PLANNED)

    def keep_root(branch: str, kind: str, name: str) -> bool:
        # every main snapshot below `end` is expiring (or a remnant of an earlier expiry)
        return not (branch == MAIN_BRANCH and kind == SNAPSHOT_ROOT and int(name) < plan.end)

    writable = _writable_changelogs(table, plan.expired_ids, record, log) if decoupled else set()
    changelog_roots = [(MAIN_BRANCH, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in sorted(writable)]
    if decoupled:
        changelog_roots += _future_changelog_roots(table, plan.end)
    reader = _root_reader(table, plan.begin, plan.end)
    candidates = _candidates(
        spark, table, (plan.begin, plan.end + 1), reader, plan.end, keep_root, changelog_roots, log
    )
    try:
        totals = _report_candidates(candidates, record, "")
        record.count("snapshots_to_expire", plan.count)
        record.sample(
            "snapshots_to_expire", [manager.snapshot_path(i) for i in plan.expired_ids[:SAMPLE_LIMIT]]
        )
        if decoupled:
            record.count("changelogs_to_write", len(writable))
            record.sample("changelogs_to_write", [manager.changelog_path(i) for i in sorted(writable)])
        if dry_run:
            log.info("dry run: nothing deleted")
            return writable

        if _tag_snapshot_ids(table) - tags_at_plan & set(plan.expired_ids):
            raise SafetyRefusal(
                f"{table.path}: a tag was created on a snapshot in [{plan.begin}, {plan.end}) while this job "
                "ran; nothing was deleted, run expire-snapshots again"
            )
        _delete_stages(
            spark,
            table,
            candidates,
            totals,
            "",
            (STEP_FILES, STEP_MANIFESTS, STEP_LISTS),
            record,
            log,
            batch_size,
            max_per_second,
        )
    finally:
        candidates.unpersist()

    for snapshot_id in plan.expired_ids:  # oldest first: a rerun starts from the oldest one left
        if snapshot_id in writable:
            _write_changelog(table, snapshot_id, record)
            crash_point(STEP_CHANGELOG_WRITTEN)
        table.file_io.delete(manager.snapshot_path(snapshot_id))
        record.count("snapshots_expired", 1)
        crash_point(STEP_SNAPSHOT)
    manager.write_earliest_hint(plan.end)
    log.info("expired %d snapshots; EARLIEST = %d", plan.count, plan.end)
    return writable


def _future_changelog_roots(table: Table, end: int) -> list[tuple[str, str, str]]:
    """Every retained snapshot, read also as the changelog it becomes when it expires.

    Its delta may DELETE an append-origin file that an expiring snapshot or changelog ADDed (an
    overwrite, a compaction): not live in any root, yet the changelog this snapshot becomes needs it
    (Paimon's snapshot expiry keeps every append-origin file of a decoupled table for that reason,
    and only changelog expiry deletes them).
    """
    ids = [i for i in table.snapshot_manager.snapshot_ids() if i >= end]
    return [(MAIN_BRANCH, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in ids]


def _writable_changelogs(table: Table, expired_ids: range, record: RunRecord, log: Any) -> set[int]:
    """The expiring snapshots that can still become changelogs: those whose lists a changelog reads
    exist (or whose changelog already does). A run made before the table was decoupled may have
    crashed after deleting an expiring snapshot's lists; such a snapshot expires without a changelog
    (reported), rather than failing every rerun on a list that cannot come back."""
    manager = table.snapshot_manager
    produces = table.options.changelog_producer != "none"
    writable: set[int] = set()
    for snapshot_id in expired_ids:
        if table.file_io.exists(manager.changelog_path(snapshot_id)):
            writable.add(snapshot_id)
            continue
        snapshot = manager.snapshot(snapshot_id)
        lists = [snapshot.changelog_manifest_list] + ([] if produces else [snapshot.delta_manifest_list])
        if all(table.file_io.exists(table.manifest_path(name)) for name in lists if name):
            writable.add(snapshot_id)
        else:
            record.count("changelogs_not_writable", 1)
            log.warning(
                "snapshot %d lost its manifest lists to an earlier interrupted expiry: it expires "
                "without a long-lived changelog",
                snapshot_id,
            )
    return writable


def _write_changelog(table: Table, snapshot_id: int, record: RunRecord) -> None:
    """`changelog/changelog-<id>` = the snapshot's JSON as stored (Paimon's Changelog has the same
    fields), created atomically; already there (a rerun after a crash) counts as written."""
    manager = table.snapshot_manager
    try:
        data = table.file_io.read_bytes(manager.snapshot_path(snapshot_id))
    except MissingFileError:
        if table.file_io.exists(manager.changelog_path(snapshot_id)):
            return  # written and its snapshot deleted by an interrupted run
        raise
    if table.file_io.create_if_absent(manager.changelog_path(snapshot_id), data):
        record.count("changelogs_written", 1)
    else:
        record.count("changelogs_already_written", 1)
    manager.write_changelog_latest_hint(snapshot_id)


def _report_candidates(candidates: Any, record: RunRecord, prefix: str) -> dict[int, tuple[int, int]]:
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


def _delete_stages(
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


# -- long-lived changelogs (decoupled retention) -----------------------------------------------------


def _expire_changelogs(
    spark: Any,
    table: Table,
    plan: ExpireRange,
    settings: ChangelogSettings,
    consumer_next: int | None,
    writable: set[int],
    dry_run: bool,
    record: RunRecord,
    log: Any,
    batch_size: int,
    max_per_second: float | None,
) -> None:
    """Paimon's ExpireChangelogImpl: delete the long-lived changelogs beyond the changelog retention.

    Candidates: the metadata of changelogs [begin, end) (changelog, delta and base manifest lists and
    their manifests), the files their changelog manifests add, and every file their delta
    manifests name; minus what every retained snapshot, tag, branch and changelog needs. A dry run
    plans with the changelogs the snapshot expiry would have written (`writable`).
    """
    manager = table.snapshot_manager
    existing = set(manager.changelog_ids())
    if existing and not dry_run and not table.file_io.exists(manager.changelog_earliest_hint_path()):
        # Java writes EARLIEST only after a changelog expiry and lists without it; pypaimon
        # finds the earliest changelog by this hint alone, so it is there as soon as changelogs are.
        manager.write_changelog_earliest_hint(min(existing))
    to_write = [] if not dry_run else sorted(i for i in writable if i not in existing)
    changelog_ids = sorted(existing | set(to_write))
    assert_small(len(changelog_ids), SNAPSHOT_LIMIT, "changelog ids")

    def time_of(changelog_id: int) -> int:
        found = changelog_or_snapshot(table, changelog_id)
        if found is None:
            raise StorageError(f"{manager.changelog_path(changelog_id)}: changelog vanished while planning")
        return found.time_millis

    cplan = plan_changelog_range(changelog_ids, time_of, settings, plan.latest, consumer_next)
    if cplan is None or cplan.count == 0:
        log.info(
            "no long-lived changelog to expire (%s)",
            "none" if cplan is None else f"limited by {cplan.limited_by}",
        )
        record.count("changelogs_expired", 0)
        if cplan is not None:
            record.details["changelog_ids"] = {"earliest": cplan.earliest, "latest": cplan.latest}
        return
    record.details["changelog_ids"] = {
        "earliest": cplan.earliest,
        "latest": cplan.latest,
        "begin": cplan.begin,
        "end": cplan.end,
        "limited_by": cplan.limited_by,
    }
    log.info(
        "expiring changelogs [%d, %d) of [%d, %d] (%s)",
        cplan.begin,
        cplan.end,
        cplan.earliest,
        cplan.latest,
        cplan.limited_by,
    )
    crash_point(STEP_CHANGELOG_PLANNED)

    def keep_root(branch: str, kind: str, name: str) -> bool:
        if branch != MAIN_BRANCH:
            return True
        if kind == SNAPSHOT_ROOT:
            return int(name) >= plan.end  # below: expired by this run (or the dry run's plan)
        if kind == CHANGELOG_ROOT:
            return not cplan.begin <= int(name) < cplan.end
        return True

    planned = [(MAIN_BRANCH, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in to_write if i >= cplan.end]
    planned += _future_changelog_roots(table, plan.end)
    ids = (cplan.begin, cplan.end)
    candidates = _candidates(spark, table, ids, _changelog_reader(table), -1, keep_root, planned, log)
    try:
        totals = _report_candidates(candidates, record, "changelog_")
        present = set(changelog_ids)
        expiring = [i for i in cplan.expired_ids if i in present]
        record.count("changelogs_to_expire", len(expiring))
        record.sample("changelogs_to_expire", [manager.changelog_path(i) for i in expiring[:SAMPLE_LIMIT]])
        if dry_run:
            return
        _delete_stages(
            spark,
            table,
            candidates,
            totals,
            "changelog_",
            (STEP_CHANGELOG_FILES, STEP_CHANGELOG_MANIFESTS, STEP_CHANGELOG_LISTS),
            record,
            log,
            batch_size,
            max_per_second,
        )
    finally:
        candidates.unpersist()
    for changelog_id in expiring:  # oldest first: a rerun starts from the oldest one left
        table.file_io.delete(manager.changelog_path(changelog_id))
        record.count("changelogs_expired", 1)
        crash_point(STEP_CHANGELOG_DELETED)
    manager.write_changelog_earliest_hint(cplan.end)
    log.info("expired %d changelogs; changelog EARLIEST = %d", len(expiring), cplan.end)


def _tag_snapshot_ids(table: Table) -> set[int]:
    return {snapshot.id for snapshot in table.tag_manager.tags().values()}


# -- candidates on the executors ---------------------------------------------------------------------


def _candidates(
    spark: Any,
    table: Table,
    ids: tuple[int, int],
    reader: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    end: int,
    keep_root: Callable[[str, str, str], bool],
    extra_roots: list[tuple[str, str, str]],
    log: Any,
) -> Any:
    """DataFrame (path, size, stage) of the files to delete, checkpointed; stage ALREADY_DELETED rows
    name metadata of expiring snapshots or changelogs that an interrupted run already deleted
    (counted only). `reader` maps the ids [first, last) to metadata rows and manifests to read;
    `keep_root`/`extra_roots` say which roots stay (their needs are never candidates)."""
    from pyspark.sql import functions as F

    parallelism = max(1, spark.sparkContext.defaultParallelism)
    first, last = ids
    frame = spark.range(first, last, numPartitions=max(1, min(last - first, parallelism * 4)))
    roots = frame.select(F.col("id").alias("sid")).mapInArrow(reader, _ROOT_COLUMNS)
    roots = roots.localCheckpoint(eager=True)
    to_read = roots.filter(F.col("what").isin(_DELTA, _CHANGELOG, _INDEX, _DELTA_ALL)).dropDuplicates(
        ["what", "name"]
    )
    entries = to_read.repartition(parallelism * 2).mapInArrow(_manifest_reader(table, end), _FILE_COLUMNS)
    entries = entries.localCheckpoint(eager=True)
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
    everything = (
        data.unionByName(other_files)
        .unionByName(metadata)
        .unionByName(missing)
        .groupBy("path")
        .agg(F.max("size").alias("size"), F.min("stage").alias("stage"))
    )

    protected = _retained_needs(
        spark, table, everything.filter(F.col("stage") == FILES), keep_root, extra_roots, log
    )
    candidates = everything.join(protected, "path", "left_anti").localCheckpoint(eager=True)
    roots.unpersist()
    entries.unpersist()
    return candidates


_NEEDS_COLUMNS = "root string, what string, value string"
_NEEDS_SCHEMA = pa.schema([("root", pa.string()), ("what", pa.string()), ("value", pa.string())])
_LIVE_COLUMNS = "manifest string, path string, delta int, appended int"
_LIVE_SCHEMA = pa.schema(
    [("manifest", pa.string()), ("path", pa.string()), ("delta", pa.int32()), ("appended", pa.int32())]
)
ROOT_LIMIT = 1_000_000


def _retained_needs(
    spark: Any,
    table: Table,
    file_candidates: Any,
    keep_root: Callable[[str, str, str], bool],
    extra_roots: list[tuple[str, str, str]],
    log: Any,
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
    """
    from pyspark.sql import functions as F

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

    def read_roots(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {"root": [], "what": [], "value": []}
            for branch, kind, name in zip(
                *(batch.column(c).to_pylist() for c in ("branch", "kind", "name")), strict=True
            ):
                found = root_references(table.for_branch(branch), kind, name)
                if found is None:
                    continue  # expired concurrently: needs nothing
                key = f"{branch}/{kind}/{name}"
                values = [("file", path) for path in found.files] + [
                    ("appended" if m in found.appended_only else "manifest", m) for m in found.manifests
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
        needs.filter(F.col("what").isin("manifest", "appended"))
        .select(
            "root",
            F.col("value").alias("manifest"),
            (F.col("what") == "appended").cast("int").alias("appended_only"),
        )
        .dropDuplicates()
    )
    manifests = root_manifests.select("manifest").distinct()

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
        .groupBy("root", "path")
        .agg(
            F.sum(F.when(F.col("appended_only") == 1, F.col("appended")).otherwise(F.col("delta"))).alias(
                "balance"
            )
        )
        .filter(F.col("balance") > 0)
        .select("path")
    )
    return named.unionByName(index_files).unionByName(live).distinct()


def _root_reader(table: Table, begin: int, end: int):
    """Per snapshot id in [begin, end]: its metadata files (expiring ones) and the manifests to read."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        manager = table.snapshot_manager
        for batch in batches:
            rows: list[tuple[str, str, int, int, int]] = []
            for sid in batch.column("sid").to_pylist():
                snapshot = manager.snapshot(sid)
                expiring = sid < end
                if sid > begin:  # its delta decides which data files the previous snapshot lost
                    delta = _read_list(
                        table, snapshot.delta_manifest_list, lenient=expiring, rows=rows, sid=sid
                    )
                    for index, meta in enumerate(delta or []):
                        order = (sid << _SID_SHIFT) | (index << _MANIFEST_SHIFT)
                        rows.append((_DELTA, meta.file_name, meta.file_size, order, sid))
                if not expiring:
                    continue
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
            yield pa.RecordBatch.from_pylist(
                [dict(zip(_ROOT_SCHEMA.names, row, strict=True)) for row in rows], schema=_ROOT_SCHEMA
            )

    return read


def _changelog_reader(table: Table):
    """Per expiring changelog id: its lists and manifests (candidates) and the manifests to read:
    changelog manifests (their ADDs) and delta manifests (every file they name). Everything on this
    side is read leniently: what an interrupted run already deleted is only counted."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows: list[tuple[str, str, int, int, int]] = []
            for sid in batch.column("sid").to_pylist():
                changelog = changelog_or_snapshot(table, sid)
                if changelog is None:
                    continue  # a gap, or deleted by an interrupted run
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


def _manifest_reader(table: Table, end: int):
    """Per delta manifest: (path, size, ord, kind) of every entry; per changelog/index manifest: files."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {name: [] for name in _FILE_SCHEMA.names}

            def emit(path: str, size: int, order: int, kind: int, out: dict[str, list] = out) -> None:
                out["path"].append(path)
                out["size"].append(size)
                out["stage"].append(FILES)
                out["ord"].append(order)
                out["kind"].append(kind)

            columns = (batch.column(c).to_pylist() for c in ("what", "name", "ord", "sid"))
            for what, name, order, sid in zip(*columns, strict=True):
                try:
                    if what == _INDEX:
                        for path in index_manifest_references(table, name):
                            emit(path, 0, _NO_ORDER, _NO_KIND)
                        continue
                    entries = read_manifest(table.file_io, table.manifest_path(name))
                except MissingFileError:
                    if what == _DELTA and sid >= end:
                        raise  # the first retained snapshot's delta: never lenient
                    emit(f"manifest/{name}", 0, _NO_ORDER, _GONE)  # already deleted by an earlier run
                    continue
                for position, entry in enumerate(entries):
                    if what == _CHANGELOG and entry.kind != ADD:
                        continue
                    for number, path in enumerate(table.entry_relpaths(entry)):
                        size = entry.file.file_size if number == 0 else 0
                        if what == _DELTA:
                            emit(path, size, order | position, entry.kind)
                        else:
                            emit(path, size, _NO_ORDER, _NO_KIND)
            yield pa.RecordBatch.from_pydict(out, schema=_FILE_SCHEMA)

    return read


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
