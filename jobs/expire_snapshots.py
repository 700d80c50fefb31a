"""expire-snapshots: remove old snapshots and the files only they used (seed 004, issue #4).

Plan (driver, small): snapshot ids and a few commit times give the range [begin, end) to expire
(`paimon_format.maintenance.expire.plan_range`). Everything else is DataFrames built on the executors:

- data files: the delta manifests of snapshots (begin, end]; per file path the last operation in
  that order wins (ADD then DELETE: a candidate; DELETE then ADD: kept);
- changelog files and index files of the expired snapshots, their manifests, index manifests,
  statistics and manifest lists;
- minus (LEFT ANTI JOIN) everything the remaining roots need: snapshots >= end, every tag, every
  branch, long-lived changelogs (`jobs.deletion.roots.retained_needs`, read strictly: a failed read is
  an error). Retained snapshots of the expired branch and their tags are not read in full: their
  manifests are kept by name, and a candidate (last entry in (begin, end] a DELETE) can only be
  live in them again if a retained delta ADDs it (`orphans.chained_root_references`); older tags,
  other branches and changelogs are read in full. With no data file to delete, no retained
  manifest is read at all (the record's `retained_side` says how many were).

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
  `paimon_format.maintenance.expire.plan_changelog_range`): their lists, manifests, changelog files and the
  files their deltas name, minus what every retained snapshot, tag, branch and changelog needs;
  same stage order, then the `changelog-<id>` files oldest first, then `changelog/EARLIEST`
  (written before planning too when absent: pypaimon finds the earliest changelog only by it).
A crash anywhere leaves every retained snapshot, tag and changelog readable; a rerun re-plans the
same ranges (a written changelog is kept, a half-expired one is finished).

Spark-submit entry: `spark-submit jobs/expire_snapshots.py --config conf/expire-snapshots.yaml`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from jobs.deletion.changelogs import (
    STEP_CHANGELOG_DELETED,
    STEP_CHANGELOG_FILES,
    STEP_CHANGELOG_LISTS,
    STEP_CHANGELOG_MANIFESTS,
    STEP_CHANGELOG_PLANNED,
    expire_changelogs,
    live_consumers_next,
)
from jobs.deletion.context import DeletionContext
from jobs.deletion.expire_candidates import (
    SNAPSHOT_LIMIT,
    expiry_candidates,
    future_changelog_roots,
    snapshot_range_reader,
)
from jobs.deletion.retention import RetentionRequest, retention_keys
from jobs.deletion.stages import delete_stages, report_candidates
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, SafetyRefusal
from jobs.runtime.local_exec import LocalRunOptions, run_where_it_fits
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.spark import assert_small
from jobs.runtime.table_open import open_existing_table
from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import MissingFileError
from paimon_format.maintenance.expire import (
    ChangelogSettings,
    ExpireRange,
    ExpireSettings,
    changelog_settings,
    decoupled_cause,
    plan_range,
)
from paimon_format.maintenance.read_memo import ReadMemoFileIO, with_read_memo
from paimon_format.maintenance.references import CHANGELOG_TO_WRITE_ROOT, SNAPSHOT_ROOT
from paimon_format.model.instants import iso_utc
from paimon_format.model.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
)
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.in_flight import both
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPERATION = "expire-snapshots"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_FILES = f"{OPERATION}:files-deleted"
STEP_MANIFESTS = f"{OPERATION}:manifests-deleted"
STEP_LISTS = f"{OPERATION}:manifest-lists-deleted"
STEP_SNAPSHOT = f"{OPERATION}:snapshot-deleted"  # passed once per snapshot file (PAIMON_CRASH_SKIP)
# decoupled changelog retention only (the changelog expiry's own steps live in jobs.deletion.changelogs)
STEP_CHANGELOG_WRITTEN = f"{OPERATION}:changelog-written"  # once per changelog-<id>, before its snapshot goes
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


class ExpireSnapshotsConfig(TableJobConfig, LocalRunOptions, retention_keys("snapshot")):
    branch: str | None = Field(default=None, description="expire this branch's snapshots (default: main)")
    branches: Literal["all"] | None = Field(
        default=None, description="'all': main and every branch, each by its own retention options"
    )

    @model_validator(mode="after")
    def _one_branch_choice(self) -> ExpireSnapshotsConfig:
        if self.branch is not None and self.branches is not None:
            raise ValueError("give either branch or branches, not both")
        if self.branch is not None and (not self.branch.strip() or "/" in self.branch):
            raise ValueError(f"branch: {self.branch!r} is no branch name")
        return self


CONFIG_MODEL = ExpireSnapshotsConfig


@dataclass(frozen=True)
class ExpiryRequest(RetentionRequest):
    """What a run asks for; None takes the table's option (and Paimon's default where that is unset)."""

    @staticmethod
    def of(config: ExpireSnapshotsConfig) -> ExpiryRequest:
        return ExpiryRequest(**RetentionRequest.keys_of(config))


def run(context: JobContext, config: ExpireSnapshotsConfig) -> None:
    # One read memo for the whole run: the table check, the placement estimate and every pass of
    # every branch read the same snapshots, tags and lists (`read_memo`).
    table = open_existing_table(config, ReadMemoFileIO.wrapping)
    # Expiry reads the expiring snapshots' deltas and names what the retained roots need, whatever
    # the table's size: a large table expiring a few snapshots runs in the driver too.
    run_where_it_fits(
        context,
        table,
        config,
        lambda spark: _expire_branches(context, spark, table, config),
        names_bound=True,
    )


def _expire_branches(
    context: JobContext, spark: SparkSession, table: Table, config: ExpireSnapshotsConfig
) -> None:
    """Each branch the config names by its own retention options; with more than one, each branch's
    record goes under the run's `details.branches`."""
    branches = branches_to_expire(table, config.branch, config.branches)
    request = ExpiryRequest.of(config)
    for branch in branches:
        # the opened handle for main: its schema, options and lists were read by the open check
        branch_table = table if branch == table.branch else table.for_branch(branch)
        if branch != MAIN_BRANCH:  # main was checked when the table was opened
            branch_table.check_metadata()  # a broken branch is refused like a broken table (exit 2)
        record = context.record
        if len(branches) > 1:
            record = RunRecord(operation=OPERATION, table=table.path, dry_run=context.dry_run)
        expire_snapshots(
            spark, branch_table, request, dry_run=context.dry_run, record=record, log=context.log
        )
        if record is not context.record:
            _add_branch_record(context.record, branch, record)


def _add_branch_record(total: RunRecord, branch: str, record: RunRecord) -> None:
    """One branch's record under `details.branches`, its counts and bytes added to the run's."""
    total.details.setdefault("branches", {})[branch] = {
        "snapshot_ids": record.snapshot_ids,
        "counts": record.counts,
        "bytes": record.bytes,
        "details": record.details,
    }
    for key, value in record.counts.items():
        total.count(key, value)
    for key, value in record.bytes.items():
        total.add_bytes(key, value)


def branches_to_expire(table: Table, branch: str | None, branches: str | None) -> list[str]:
    """The branches a run expires: main by default, one named branch, or main and every branch.
    A named branch that does not exist (no `branch/branch-<name>` with a schema) is exit 2."""
    if branches == "all":
        return [MAIN_BRANCH, *table.branch_manager.branch_names()]
    if branch is None or branch == MAIN_BRANCH:
        return [MAIN_BRANCH]
    branch_table = table.for_branch(branch)
    if not table.branch_manager.branch_exists(branch) or branch_table.schema_manager.latest() is None:
        raise BadInputError(
            f"{branch_table.metadata_root}: branch {branch!r} does not exist "
            f"(branches: {table.branch_manager.branch_names() or 'none'})"
        )
    return [branch]


def settings_for(table: Table, request: ExpiryRequest, now_ms: int) -> ExpireSettings:
    """Job settings over the table's options (Paimon's defaults where neither sets a value)."""
    options = table.options
    try:
        settings = ExpireSettings(
            **request.over(
                options.snapshot_num_retained_min,
                options.snapshot_num_retained_max,
                options.snapshot_time_retained_ms,
                options.snapshot_expire_limit,
                now_ms,
            )
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
    spark: SparkSession,
    table: Table,
    request: ExpiryRequest = ExpiryRequest(),
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Expire one branch's old snapshots (`table.branch`; see the module docstring for the order),
    and on a table with decoupled changelog retention, its old long-lived changelogs.

    A job run calls this once per branch with its config's request and its own record and log;
    `now_ms` is a test hook (the moment retention is measured from). Every metadata file is read
    once per call (`with_read_memo`; a job run shares one memo over all its branches)."""
    table = with_read_memo(table)
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    _expire_branch(deletion, request, int(time.time() * 1000) if now_ms is None else now_ms)
    return deletion.record


def _expire_branch(deletion: DeletionContext, request: ExpiryRequest, now_ms: int) -> None:
    """Expire the snapshots of `deletion.table`'s branch that `request` and the table's options let
    go, then (decoupled changelog retention) its changelogs beyond their retention."""
    table, record, log = deletion.table, deletion.record, deletion.log
    settings = settings_for(table, request, now_ms)
    retention = changelog_settings_for(table, settings, now_ms)
    decoupled = decoupled_cause(retention, settings)
    ids = table.snapshot_manager.snapshot_ids()
    assert_small(len(ids), SNAPSHOT_LIMIT, "snapshot ids")
    # after the checks: it also removes consumers past their expiration, which a refused run must not
    consumer_next = live_consumers_next(deletion, now_ms)
    snapshot_hold = None if table.options.consumer_changelog_only else consumer_next
    plan = plan_range(ids, _commit_times(table), settings, snapshot_hold, table.file_io.io_parallelism)
    _record_settings(deletion, settings, retention, consumer_next, decoupled)
    if plan is None or plan.count == 0:
        log.info("nothing to expire (%s)", "no snapshot" if plan is None else f"limited by {plan.limited_by}")
        record.count("snapshots_expired", 0)
        if plan is not None:
            record.snapshot_ids.update(earliest=plan.earliest, latest=plan.latest)
        writable: set[int] = set()
    else:
        writable = _expire_snapshot_range(deletion, plan, bool(decoupled))
    if decoupled and plan is not None:
        expire_changelogs(deletion, plan, retention, consumer_next, writable)


def _commit_times(table: Table) -> Callable[[int], int]:
    """A snapshot's commit time by id, each snapshot read once (the plan asks for a few only)."""
    manager = table.snapshot_manager
    times: dict[int, int] = {}

    def time_of(snapshot_id: int) -> int:
        if snapshot_id not in times:
            times[snapshot_id] = manager.snapshot(snapshot_id).time_millis
        return times[snapshot_id]

    return time_of


def _record_settings(
    deletion: DeletionContext,
    settings: ExpireSettings,
    retention: ChangelogSettings,
    consumer_next: int | None,
    decoupled: str | None,
) -> None:
    """The settings in effect into the record (the changelog ones when decoupled)."""
    deletion.record.details["settings"] = {
        "retain_min": settings.retain_min,
        "retain_max": settings.retain_max,
        "cutoff": iso_utc(settings.cutoff_ms),
        "max_deletes": settings.max_deletes,
        "min_consumer_next_snapshot": consumer_next,
    }
    if decoupled:
        deletion.record.details["changelog_settings"] = {
            "decoupled": decoupled,
            "retain_min": retention.retain_min,
            "retain_max": retention.retain_max,
            "cutoff": iso_utc(retention.cutoff_ms),
            "producer": deletion.table.options.changelog_producer,
        }
        deletion.log.info(
            "changelog retention is decoupled (%s): expired snapshots become changelogs", decoupled
        )


def _expire_snapshot_range(deletion: DeletionContext, plan: ExpireRange, decoupled: bool) -> set[int]:
    """Delete what only snapshots [begin, end) need, then their snapshot files, oldest first.
    Returns the ids that become (or, in a dry run, would become) long-lived changelogs.

    Decoupled: each expired snapshot is first written as `changelog/changelog-<id>`, and what that
    changelog needs is protected like a retained root (`CHANGELOG_TO_WRITE_ROOT`) from the start.
    """
    table, record, log = deletion.table, deletion.record, deletion.log
    _record_range(deletion, plan)
    tags_at_plan, branches_at_plan = _tags_and_branches(table)
    crash_point(STEP_PLANNED)
    writable = _writable_changelogs(table, plan.expired_ids, record, log) if decoupled else set()
    candidates = _range_candidates(deletion, plan, writable, decoupled)
    try:
        totals = report_candidates(candidates, record, "", log)
        _record_range_to_expire(deletion, plan, writable, decoupled)
        if deletion.dry_run:
            log.info("dry run: nothing deleted")
            return writable
        tags_now, branches_now = _tags_and_branches(table)
        if tags_now - tags_at_plan & set(plan.expired_ids):
            raise SafetyRefusal(
                f"{table.path}: a tag was created on a snapshot in [{plan.begin}, {plan.end}) while this job "
                "ran; nothing was deleted, run expire-snapshots again"
            )
        new_branches = branches_now - branches_at_plan
        if new_branches:  # made from a snapshot or tag this run may expire: its files must stay
            raise SafetyRefusal(
                f"{table.path}: branches {sorted(new_branches)} were created while this job ran; nothing "
                "was deleted, run expire-snapshots again"
            )
        delete_stages(deletion, candidates, totals, "", (STEP_FILES, STEP_MANIFESTS, STEP_LISTS))
    finally:
        candidates.unpersist()
    _delete_snapshot_files(deletion, plan, writable)
    return writable


def _record_range(deletion: DeletionContext, plan: ExpireRange) -> None:
    deletion.record.snapshot_ids.update(
        earliest=plan.earliest, latest=plan.latest, begin=plan.begin, end=plan.end, limited_by=plan.limited_by
    )
    deletion.log.info(
        "expiring snapshots [%d, %d) of [%d, %d] (%s)",
        plan.begin,
        plan.end,
        plan.earliest,
        plan.latest,
        plan.limited_by,
    )


def _range_candidates(
    deletion: DeletionContext, plan: ExpireRange, writable: set[int], decoupled: bool
) -> DataFrame:
    """What only the expiring snapshots need: their files minus what every retained root needs, the
    changelogs this run writes (and, decoupled, every retained snapshot's future changelog) included."""
    table = deletion.table

    def keep_root(branch: str, kind: str, name: str) -> bool:
        # every main snapshot below `end` is expiring (or a remnant of an earlier expiry)
        return not (branch == table.branch and kind == SNAPSHOT_ROOT and int(name) < plan.end)

    changelog_roots = [(table.branch, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in sorted(writable)]
    if decoupled:
        changelog_roots += future_changelog_roots(table, plan.end)
    reader = snapshot_range_reader(table, plan.begin, plan.end)
    retained: dict[str, int] = {}
    candidates = expiry_candidates(
        deletion,
        (plan.begin, plan.end + 1),
        reader,
        plan.end,
        keep_root,
        changelog_roots,
        chain_end=plan.end,
        stats=retained,
    )
    deletion.record.details["retained_side"] = retained
    return candidates


def _record_range_to_expire(
    deletion: DeletionContext, plan: ExpireRange, writable: set[int], decoupled: bool
) -> None:
    manager, record = deletion.table.snapshot_manager, deletion.record
    record.count("snapshots_to_expire", plan.count)
    record.sample("snapshots_to_expire", [manager.snapshot_path(i) for i in plan.expired_ids[:SAMPLE_LIMIT]])
    if decoupled:
        record.count("changelogs_to_write", len(writable))
        record.sample("changelogs_to_write", [manager.changelog_path(i) for i in sorted(writable)])


def _delete_snapshot_files(deletion: DeletionContext, plan: ExpireRange, writable: set[int]) -> None:
    """The snapshot files oldest first (a rerun starts from the oldest one left), each written as its
    changelog first when it becomes one; then the EARLIEST hint.

    One at a time, not in one DeleteObjects batch: a batch deletes its keys in no order and may fail
    some of them, which could leave a newer snapshot deleted and an older one there, a hole in the
    snapshot ids that readers and the rerun's plan would trip over. Each goes as a one-key
    `delete_many` (one request on S3; `delete` asks whether the file exists first, a second)."""
    table, record = deletion.table, deletion.record
    manager = table.snapshot_manager
    for snapshot_id in plan.expired_ids:
        if snapshot_id in writable:
            _write_changelog(table, snapshot_id, record)
            crash_point(STEP_CHANGELOG_WRITTEN)
        table.file_io.delete_many([manager.snapshot_path(snapshot_id)])
        record.count("snapshots_expired", 1)
        crash_point(STEP_SNAPSHOT)
    manager.write_earliest_hint(plan.end)
    deletion.log.info("expired %d snapshots; EARLIEST = %d", plan.count, plan.end)


def _writable_changelogs(
    table: Table, expired_ids: range, record: RunRecord, log: logging.Logger | logging.LoggerAdapter
) -> set[int]:
    """The expiring snapshots that can still become changelogs: those whose lists a changelog reads
    exist (or whose changelog already does). A run made before the table was decoupled may have
    crashed after deleting an expiring snapshot's lists; such a snapshot expires without a changelog
    (reported), rather than failing every rerun on a list that cannot come back."""
    manager = table.snapshot_manager
    produces = table.options.changelog_producer != "none"
    writable: set[int] = set()
    for snapshot_id in expired_ids:
        if table.file_io.file_exists(manager.changelog_path(snapshot_id)):
            writable.add(snapshot_id)
            continue
        snapshot = manager.snapshot(snapshot_id)
        lists = [snapshot.changelog_manifest_list] + ([] if produces else [snapshot.delta_manifest_list])
        if all(table.file_io.file_exists(table.manifest_path(name)) for name in lists if name):
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
        if table.file_io.file_exists(manager.changelog_path(snapshot_id)):
            return  # written and its snapshot deleted by an interrupted run
        raise
    if table.file_io.create_if_absent(manager.changelog_path(snapshot_id), data):
        record.count("changelogs_written", 1)
    else:
        record.count("changelogs_already_written", 1)
    manager.write_changelog_latest_hint(snapshot_id)


def _tag_snapshot_ids(table: Table) -> set[int]:
    return {snapshot.id for snapshot in table.tag_manager.tags().values()}


def _tags_and_branches(table: Table) -> tuple[set[int], set[str]]:
    """The snapshot ids the tags name and the branch names, both listed at once."""
    return both(
        lambda: _tag_snapshot_ids(table),
        lambda: set(table.branch_manager.branch_names()),
        table.file_io.io_parallelism,
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
