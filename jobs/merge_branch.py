"""merge-branch: add a branch's new data files to another branch (main by default), as Paimon's
`merge_branch` procedure (issue #30). For append tables with `branch-merge.enabled` = true.

What Paimon does (read in apache/paimon at 5dacde5, PRs 7882/7930/7931 added it for Paimon 2.0:
`FileSystemBranchManager.mergeBranch` and `BranchMergeHandler` in paimon-core's `utils`, behind
`Table.mergeBranch(source, target)`; the Spark procedure `MergeBranchProcedure` registered in
`SparkProcedures.java`, the Flink procedure and action `MergeBranchProcedure` / `MergeBranchAction`;
arguments `table`, `source_branch` and an optional `target_branch` defaulting to main. The 1.0
bundle our Java tests use has no mergeBranch, so no differential test is possible):

* refusals, all before anything is written: a blank name, a branch merged into itself, a source or
  target branch that does not exist, a branch without any snapshot; a branch whose history is not
  complete and append-only (its earliest snapshot is not 1, an id between 1 and its latest is
  missing, or a snapshot's commit kind is neither APPEND nor ANALYZE: a compaction or overwrite on
  either side, or expired snapshots); primary keys on either side; data evolution on either side;
  row tracking enabled on one side only; latest schemas whose fields differ;
* the files merged: the live data files of the source's latest snapshot whose identity (partition,
  bucket, level, file name, extra files, embedded index, external path) the target's latest snapshot
  lacks. With both histories append-only no file was ever deleted on either side, so these are the
  files the source added since it forked (or since the last merge): merging again adds only what is
  new, and merging back the other way works too. None: nothing is committed;
* a schema check of those files: each schema id they were written with must exist on the target and
  equal the source's schema of that id (version, fields, keys, options, comment, time);
* the commit: one APPEND snapshot on the target, the files as new files grouped by partition and
  bucket, under a fresh commit user, with the append conflict check (Paimon retries on top of a
  newer target snapshot); row ids of row-tracking tables are cleared and assigned anew;
* untouched: the source branch, every tag (neither side's tags are copied or moved), schemas.

`branch-merge.enabled`: Paimon's Spark and Flink procedure docs say the table must be created with
it = true (an option that rejects compaction and INSERT OVERWRITE so that the history stays
append-only, and is incompatible with deletion vectors); the sources read define no such option
(in `CoreOptions` or elsewhere) and rely on the history check alone. Here both hold: the target's
latest schema must set it to true (unset counts as false; exit 2 otherwise), deletion-vector
tables are refused, and the history is checked as Paimon checks it.
Our other differences: row-tracking tables are refused (exit 2: our commit assigns no row ids), and
a snapshot another writer commits on the target while this job runs stops it with exit 3, nothing
committed (the history check was of the planned snapshots; the rerun plans again). The frame holds
the table's lock throughout (`jobs.runtime.run_lock`).

Order and crashes: plan (metadata reads only), crash step `merge-branch:planned`, then the commit
writes the new manifests, the manifest lists and last the snapshot file (create-if-absent). A
crash before the snapshot file leaves the target as it was plus unreferenced manifests and lists
(remove-orphan-files deletes them); the rerun plans and commits again. A crash after it leaves the
target merged; the rerun finds nothing to add and exits 0. A dry run plans on the same path and
lists the files it would add. Runs on the driver alone (no Spark): it reads manifests, never data.

Spark-submit entry: `spark-submit jobs/merge_branch.py --config conf/merge-branch.yaml`.
"""

from __future__ import annotations

import logging

from pydantic import Field, field_validator, model_validator

from jobs.branching.merge import MergePlan, commit_merge, plan_merge
from jobs.runtime.config import TableJobConfig
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.branches import MAIN_BRANCH, validate_branch_name
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "merge-branch"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_COMMITTED = f"{OPERATION}:committed"
# the run record lists at most this many of the files to add (all of them are counted)
MAX_LISTED_FILES = 1000


class MergeBranchConfig(TableJobConfig):
    source_branch: str = Field(description="the branch whose new data files are merged (may be main)")
    target_branch: str = Field(default=MAIN_BRANCH, description="the branch that gets them")

    @field_validator("source_branch", "target_branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        if value != MAIN_BRANCH:
            validate_branch_name(value)
        return value

    @model_validator(mode="after")
    def _two_branches(self) -> MergeBranchConfig:
        if self.source_branch == self.target_branch:
            raise ValueError(f"cannot merge branch {self.source_branch!r} into itself")
        return self


CONFIG_MODEL = MergeBranchConfig


def run(context: JobContext, config: MergeBranchConfig) -> None:
    merge_branch(
        open_existing_table(config),
        config.source_branch,
        config.target_branch,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def merge_branch(
    table: Table,
    source: str,
    target: str = MAIN_BRANCH,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Plan the merge of `source` into `target` and commit it (module docstring: rules and order)."""
    log = log or logging.getLogger("jobs.merge_branch")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    plan = plan_merge(table, source, target)
    _record_plan(table, plan, record, log)
    crash_point(STEP_PLANNED)
    if not plan.files:
        log.info("branch %r has no data file that %r lacks: nothing to merge", source, target)
        return record
    if dry_run:
        log.info("dry run: nothing committed")
        return record
    snapshot = commit_merge(table, plan)
    crash_point(STEP_COMMITTED)
    record.committed(snapshot.id)
    record.count("files_added", len(plan.files))
    log.info(
        "merged %d files of branch %r into %r as snapshot %d", len(plan.files), source, target, snapshot.id
    )
    return record


def _record_plan(
    table: Table, plan: MergePlan, record: RunRecord, log: logging.Logger | logging.LoggerAdapter
) -> None:
    # table-relative (an external file: its own full path)
    paths = sorted(
        entry.file.external_path
        or f"{table.bucket_relpath(entry.partition, entry.bucket)}/{entry.file.file_name}"
        for entry in plan.files
    )
    record.details["merge_branch"] = {
        "source_branch": plan.source,
        "target_branch": plan.target,
        "source_latest": plan.source_latest,
        "target_latest": plan.target_latest,
        "files_to_add": paths[:MAX_LISTED_FILES],
        "files_listed_all": len(paths) <= MAX_LISTED_FILES,
    }
    record.snapshot_ids.update(source_latest=plan.source_latest, target_latest=plan.target_latest)
    record.count("snapshots_checked", plan.snapshots_checked)
    record.count("files_to_add", len(plan.files))
    record.count("rows_to_add", plan.rows)
    record.add_bytes("files_to_add", plan.bytes)
    record.sample("files_to_add", paths[:SAMPLE_LIMIT])
    log.info(
        "merging branch %r (snapshot %d) into %r (snapshot %d): %d files, %d rows to add",
        plan.source,
        plan.source_latest,
        plan.target,
        plan.target_latest,
        len(plan.files),
        plan.rows,
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
