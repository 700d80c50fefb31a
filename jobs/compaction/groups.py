"""Partial progress: the planned bins committed in groups, each as soon as its files are written.

A big compaction committed once at the end loses everything to a crash after hours, and a rival
commit that removed one input of one bin (a Java writer's own compaction, an overwrite) throws the
whole run away. So the planned bins (in job order, `jobs.compaction.slices`) are cut into commit
groups of at most `max_commit_bins` bins and `max_commit_bytes` input bytes, as Iceberg's
`rewrite_data_files` commits file groups with `partial-progress.enabled`. A bucket is never split
over two groups: a group's commit drops the deletion vectors of its buckets from the index, which
must not happen while another group's inputs in the bucket are still live (their deleted rows
would come back), and its rival check compares its buckets' vectors with the plan's.

Each group is one pass of `jobs.compaction.rewrite.rewrite_and_commit` over its bins only: one task
per bin writes the new files, executors write the group's manifests, the driver commits one COMPACT
snapshot. The driver holds no file list at any time: the bins' payloads stay in the persisted plan
on the executors (a group's bins are picked from it by a broadcast semi-join on its buckets), a
group's results stay on the executors until its commit, and only counts come back. (A small plan
made in the driver, `jobs.compaction.run`, is a local relation of at most `LOCAL_PLAN_BYTES` of
payloads held in the driver's JVM instead.)

A group whose commit finds that a commit after the plan removed one of its inputs (or changed its
buckets' deletion vectors) removes what it wrote, is planned again from the latest snapshot (its
buckets only) and retried once; a second conflict gives it up. The other groups stay committed.
A run with a group given up ends with exit 3 (a racing writer, `CommitRaceLost`) after every other
group was tried, its record listing the groups committed, retried and given up; the next run plans
the given-up buckets again. A run whose groups all committed (on the first try or the retry) is 0.

Crash ordering: the groups commit one after another, each with the crash points of
`rewrite_and_commit` (`compact:after-files-written`, `compact:after-commit`; the N-th pass is the
N-th group). A crash leaves the groups committed before it committed (each is a complete COMPACT
snapshot on its own) and the files of the group in flight unreferenced, for remove-orphan-files;
the rerun plans the rest from the latest snapshot.

Each group's rival check reads the deltas of every snapshot since the plan, including this run's
earlier groups (their buckets are disjoint, so they never conflict): O(groups^2) delta reads over a
run, small for the tens of groups the default caps make of a large table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.compaction.plan import BinSummary, only_buckets
from jobs.compaction.rewrite import rewrite_and_commit
from jobs.partitions.records import RECORD_PARTITION_LIMIT
from jobs.runtime.errors import CommitRaceLost
from jobs.runtime.report import RunRecord
from paimon_format.compaction.rewrite import RewriteSpec
from paimon_format.errors import CommitRetriesExhaustedError
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Log = logging.Logger | logging.LoggerAdapter
Buckets = frozenset[tuple[bytes, int]]
# plans the given buckets again on the latest snapshot: (that snapshot, its persisted bins, summaries)
Replan = Callable[[Buckets], tuple[Snapshot | None, "DataFrame | None", list[BinSummary]]]

COMMITTED = "committed"
COMMITTED_ON_RETRY = "committed-on-retry"
NOTHING_LEFT = "nothing-left-on-retry"  # the replan found the buckets compacted already (by the rival)
GIVEN_UP = "given-up"


@dataclass(frozen=True)
class CommitGroup:
    """Bins committed together: whole buckets, in job order."""

    index: int  # 1-based, the order of the commits
    summaries: tuple[BinSummary, ...]

    @property
    def buckets(self) -> Buckets:
        return frozenset((s.partition, s.bucket) for s in self.summaries)

    @property
    def files(self) -> int:
        return sum(s.files for s in self.summaries)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.summaries)


def plan_groups(
    summaries: Sequence[BinSummary], partial_progress: bool, max_bins: int, max_bytes: int
) -> list[CommitGroup]:
    """Consecutive buckets of `summaries` (in job order, a bucket's bins adjacent) packed into groups
    of at most `max_bins` bins and `max_bytes` input bytes; a bucket larger than a cap is a group of
    its own. Without partial progress: one group, one commit."""
    if not summaries:
        return []
    if not partial_progress:
        return [CommitGroup(1, tuple(summaries))]
    buckets: list[list[BinSummary]] = []
    for summary in summaries:
        if buckets and (buckets[-1][0].partition, buckets[-1][0].bucket) == (
            summary.partition,
            summary.bucket,
        ):
            buckets[-1].append(summary)
        else:
            buckets.append([summary])
    groups: list[list[BinSummary]] = []
    bins = size = 0
    for bucket in buckets:
        bucket_bytes = sum(s.bytes for s in bucket)
        if groups and bins + len(bucket) <= max_bins and size + bucket_bytes <= max_bytes:
            groups[-1].extend(bucket)
            bins, size = bins + len(bucket), size + bucket_bytes
        else:
            groups.append(list(bucket))
            bins, size = len(bucket), bucket_bytes
    return [CommitGroup(index, tuple(group)) for index, group in enumerate(groups, 1)]


def record_groups(record: RunRecord, groups: Sequence[CommitGroup]) -> None:
    """The planned groups in the record (a dry run shows them as `planned`), at most
    RECORD_PARTITION_LIMIT of them listed; `counts.groups` is the total."""
    record.count("groups", len(groups))
    record.details["groups"] = [
        {
            "group": group.index,
            "buckets": len(group.buckets),
            "bins": len(group.summaries),
            "files": group.files,
            "bytes": group.bytes,
            "status": "planned",
        }
        for group in groups[:RECORD_PARTITION_LIMIT]
    ]


def commit_in_groups(
    spark: SparkSession,
    table: Table,
    planned: Snapshot,
    bins: DataFrame,
    groups: Sequence[CommitGroup],
    spec: RewriteSpec,
    record: RunRecord,
    log: Log,
    before_commit: Callable[[], None] | None,
    replan: Replan | None,
) -> None:
    """Rewrite and commit each group in turn; `replan` (None: no retry, one group as before partial
    progress) plans a conflicted group's buckets again. Exit 3 at the end if a group was given up."""
    given_up: list[tuple[CommitGroup, str]] = []
    own: set[int] = set()  # the snapshots this run's groups committed (the rival checks skip them)
    for key in ("groups_committed", "groups_retried", "groups_given_up"):
        record.count(key, 0)  # every key in every run's record, for dashboards
    for group in groups:
        log.info(
            "commit group %d of %d: %d bins in %d buckets, %d files, %d bytes",
            group.index,
            len(groups),
            len(group.summaries),
            len(group.buckets),
            group.files,
            group.bytes,
        )
        group_bins = bins if len(groups) == 1 else only_buckets(spark, bins, group.buckets)
        try:
            snapshot_id = _attempt(
                spark, table, planned, group_bins, group.summaries, spec, record, log, before_commit, own
            )
            status = COMMITTED
        except (CommitRaceLost, CommitRetriesExhaustedError) as lost:
            if replan is None:
                raise
            log.warning(
                "commit group %d: %s; planning its buckets again on the latest snapshot", group.index, lost
            )
            record.count("groups_retried", 1)
            status, snapshot_id, reason = _retry(
                spark, table, group, spec, record, log, before_commit, replan, own
            )
            if status == GIVEN_UP:
                given_up.append((group, reason))
        if snapshot_id is not None:
            own.add(snapshot_id)
        _note(record, group, status, snapshot_id)
    if given_up:
        first_group, reason = given_up[0]
        raise CommitRaceLost(
            f"{table.path}: {len(given_up)} of {len(groups)} commit groups gave up after a retry (group "
            f"{first_group.index}: {reason}); {record.counts.get('groups_committed', 0)} groups were "
            "committed, run compact again for the rest"
        )


def _retry(
    spark: SparkSession,
    table: Table,
    group: CommitGroup,
    spec: RewriteSpec,
    record: RunRecord,
    log: Log,
    before_commit: Callable[[], None] | None,
    replan: Replan,
    own: set[int],
) -> tuple[str, int | None, str]:
    """The conflicted group's buckets planned again on the latest snapshot and committed once more:
    (status, committed snapshot id, the reason it was given up)."""
    latest, fresh, summaries = replan(group.buckets)
    try:
        if latest is None or fresh is None or not summaries:
            log.info("commit group %d: nothing left to compact in its buckets", group.index)
            return NOTHING_LEFT, None, ""
        try:
            snapshot_id = _attempt(
                spark, table, latest, fresh, summaries, spec, record, log, before_commit, own
            )
        except (CommitRaceLost, CommitRetriesExhaustedError) as again:
            log.warning("commit group %d: %s; given up", group.index, again)
            return GIVEN_UP, None, str(again)
        return COMMITTED_ON_RETRY, snapshot_id, ""
    finally:
        if fresh is not None:
            fresh.unpersist()


def _attempt(
    spark: SparkSession,
    table: Table,
    planned: Snapshot,
    bins: DataFrame,
    summaries: Sequence[BinSummary],
    spec: RewriteSpec,
    record: RunRecord,
    log: Log,
    before_commit: Callable[[], None] | None,
    own: set[int],
) -> int | None:
    """One rewrite and commit of `summaries`' bins; its counts join `record` only once it committed
    (an attempt that lost its race rewrote files nobody will read, and removed them)."""
    scratch = RunRecord(operation=record.operation, table=record.table)
    rewrite_and_commit(
        spark, table, planned, bins, list(summaries), spec, scratch, log, before_commit, frozenset(own)
    )
    _merge(record, scratch)
    committed = scratch.snapshot_ids.get("committed")
    if committed is not None:
        record.committed(committed)
    return committed


def _merge(record: RunRecord, scratch: RunRecord) -> None:
    for key, value in scratch.counts.items():
        record.count(key, value)
    for key, value in scratch.bytes.items():
        record.add_bytes(key, value)
    for key, paths in scratch.samples.items():
        record.sample(key, paths)


def _note(record: RunRecord, group: CommitGroup, status: str, snapshot_id: int | None) -> None:
    """The group's outcome in the record's counts and (when listed) its entry."""
    if status in (COMMITTED, COMMITTED_ON_RETRY):
        record.count("groups_committed", 1)
    elif status == GIVEN_UP:
        record.count("groups_given_up", 1)
    listed: list[dict[str, Any]] = record.details.get("groups", [])
    for entry in listed:
        if entry["group"] == group.index:
            entry["status"] = status
            entry["snapshot"] = snapshot_id
