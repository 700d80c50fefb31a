"""Long-lived changelog expiry (Paimon's ExpireChangelogImpl), run by expire-snapshots on a table
with decoupled changelog retention: the changelogs beyond the changelog retention go, with the files
only they needed; then their `changelog-<id>` files oldest first, then `changelog/EARLIEST`.

Also the consumers' hold shared by expire-snapshots and expire-changelogs (`live_consumers_next`):
with `consumer.expiration-time`, consumers whose file is older than that are deleted first (Java's
commit does so before its expiry), so a stopped streaming reader no longer holds snapshots.
"""

from __future__ import annotations

from collections.abc import Callable

from jobs.deletion.context import DeletionContext
from jobs.deletion.expire_candidates import (
    SNAPSHOT_LIMIT,
    changelog_range_reader,
    expiry_candidates,
    future_changelog_roots,
)
from jobs.deletion.roots import KeepRoot
from jobs.deletion.stages import delete_stages, report_candidates
from jobs.runtime.report import SAMPLE_LIMIT
from jobs.runtime.spark import assert_small
from paimon_format.consumers import ConsumerManager
from paimon_format.errors import StorageError
from paimon_format.maintenance.expire import ChangelogSettings, ExpireRange, plan_changelog_range
from paimon_format.maintenance.references import (
    CHANGELOG_ROOT,
    CHANGELOG_TO_WRITE_ROOT,
    SNAPSHOT_ROOT,
    changelog_or_snapshot,
)
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "expire-snapshots"
STEP_CHANGELOG_PLANNED = f"{OPERATION}:changelog-planned"
STEP_CHANGELOG_FILES = f"{OPERATION}:changelog-files-deleted"
STEP_CHANGELOG_MANIFESTS = f"{OPERATION}:changelog-manifests-deleted"
STEP_CHANGELOG_LISTS = f"{OPERATION}:changelog-manifest-lists-deleted"
STEP_CHANGELOG_DELETED = f"{OPERATION}:changelog-deleted"  # once per expired changelog-<id>
STEP_CONSUMERS_EXPIRED = "consumers-expired"  # after the stale consumers are deleted (prefixed by the job)


def live_consumers_next(deletion: DeletionContext, now_ms: int) -> int | None:
    """The smallest next snapshot of the branch's consumers, after deleting (a dry run: leaving out)
    the consumers `consumer.expiration-time` makes stale, by their file's modification time.

    Deleting a consumer first is Java's order: the reader it stood for stopped long ago, and keeping
    it would hold every snapshot after it forever. A crash after some deletions: a rerun finds the
    rest stale again. A consumer a reader rewrites meanwhile is newer than the cutoff next time."""
    table, record = deletion.table, deletion.record
    consumers = ConsumerManager(table.file_io, table.path, table.branch)
    expiration = table.options.consumer_expiration_time_ms
    stale = [] if expiration is None else consumers.stale_consumers(now_ms - expiration)
    record.count("consumers_expired", len(stale))
    record.sample("consumers_expired", stale[:SAMPLE_LIMIT])
    if stale and not deletion.dry_run:
        for consumer_id in stale:
            consumers.delete_consumer(consumer_id)
        crash_point(f"{deletion.record.operation}:{STEP_CONSUMERS_EXPIRED}")
        deletion.log.info("expired %d consumers idle longer than %d ms", len(stale), expiration)
    live = {i: n for i, n in consumers.consumers().items() if i not in stale}
    return min(live.values()) if live else None


def expire_changelogs(
    deletion: DeletionContext,
    plan: ExpireRange,
    settings: ChangelogSettings,
    consumer_next: int | None,
    writable: set[int],
    *,
    everything: bool = False,
) -> None:
    """Paimon's ExpireChangelogImpl: delete the long-lived changelogs beyond the changelog retention.

    Candidates: the metadata of changelogs [begin, end) (changelog, delta and base manifest lists and
    their manifests), the files their changelog manifests add, and every file their delta
    manifests name; minus what every retained snapshot, tag, branch and changelog needs. A dry run
    plans with the changelogs the snapshot expiry would have written (`writable`). `everything`
    (expire-changelogs' `delete_all`, Paimon's `expireAll`): every long-lived changelog goes.
    """
    table, record, log = deletion.table, deletion.record, deletion.log
    existing = _existing_changelogs(deletion)
    to_write = [] if not deletion.dry_run else sorted(i for i in writable if i not in existing)
    changelog_ids = sorted(existing | set(to_write))
    assert_small(len(changelog_ids), SNAPSHOT_LIMIT, "changelog ids")
    if everything and changelog_ids:
        first, last = changelog_ids[0], changelog_ids[-1]
        cplan: ExpireRange | None = ExpireRange(first, last, first, last + 1, "delete_all")
    else:
        cplan = plan_changelog_range(
            changelog_ids,
            _changelog_time(table),
            settings,
            plan.latest,
            consumer_next,
            table.file_io.io_parallelism,
        )
    if cplan is None or cplan.count == 0:
        log.info(
            "no long-lived changelog to expire (%s)",
            "none" if cplan is None else f"limited by {cplan.limited_by}",
        )
        record.count("changelogs_expired", 0)
        if cplan is not None:
            record.details["changelog_ids"] = {"earliest": cplan.earliest, "latest": cplan.latest}
        return
    _record_changelog_range(deletion, cplan)
    crash_point(STEP_CHANGELOG_PLANNED)
    planned = [(table.branch, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in to_write if i >= cplan.end]
    planned += future_changelog_roots(table, plan.end)
    candidates = expiry_candidates(
        deletion,
        (cplan.begin, cplan.end),
        changelog_range_reader(table),
        -1,
        _keep_root(table, plan, cplan),
        planned,
    )
    try:
        totals = report_candidates(candidates, record, "changelog_", log)
        present = set(changelog_ids)
        expiring = [i for i in cplan.expired_ids if i in present]
        record.count("changelogs_to_expire", len(expiring))
        record.sample(
            "changelogs_to_expire",
            [table.snapshot_manager.changelog_path(i) for i in expiring[:SAMPLE_LIMIT]],
        )
        if deletion.dry_run:
            return
        delete_stages(
            deletion,
            candidates,
            totals,
            "changelog_",
            (STEP_CHANGELOG_FILES, STEP_CHANGELOG_MANIFESTS, STEP_CHANGELOG_LISTS),
        )
    finally:
        candidates.unpersist()
    _delete_changelog_files(deletion, expiring, cplan.end)


def _existing_changelogs(deletion: DeletionContext) -> set[int]:
    """The ids of the branch's long-lived changelogs; writes `changelog/EARLIEST` when they exist
    without it (not in a dry run)."""
    table = deletion.table
    manager = table.snapshot_manager
    existing = set(manager.changelog_ids())
    hint = manager.changelog_earliest_hint_path()
    if existing and not deletion.dry_run and not table.file_io.file_exists(hint):
        # Java writes EARLIEST only after a changelog expiry and lists without it; pypaimon
        # finds the earliest changelog by this hint alone, so it is there as soon as changelogs are.
        manager.write_changelog_earliest_hint(min(existing))
    return existing


def _changelog_time(table: Table) -> Callable[[int], int]:
    """The commit time of a changelog (or of the snapshot a dry run would have made one)."""

    def time_of(changelog_id: int) -> int:
        found = changelog_or_snapshot(table, changelog_id)
        if found is None:
            path = table.snapshot_manager.changelog_path(changelog_id)
            raise StorageError(f"{path}: changelog vanished while planning")
        return found.time_millis

    return time_of


def _record_changelog_range(deletion: DeletionContext, cplan: ExpireRange) -> None:
    deletion.record.details["changelog_ids"] = {
        "earliest": cplan.earliest,
        "latest": cplan.latest,
        "begin": cplan.begin,
        "end": cplan.end,
        "limited_by": cplan.limited_by,
    }
    deletion.log.info(
        "expiring changelogs [%d, %d) of [%d, %d] (%s)",
        cplan.begin,
        cplan.end,
        cplan.earliest,
        cplan.latest,
        cplan.limited_by,
    )


def _keep_root(table: Table, plan: ExpireRange, cplan: ExpireRange) -> KeepRoot:
    """Every root stays but this branch's snapshots below the snapshot range's end (expired by this
    run, or the dry run's plan) and its changelogs in the changelog range."""

    def keep_root(branch: str, kind: str, name: str) -> bool:
        if branch != table.branch:
            return True
        if kind == SNAPSHOT_ROOT:
            return int(name) >= plan.end  # below: expired by this run (or the dry run's plan)
        if kind == CHANGELOG_ROOT:
            return not cplan.begin <= int(name) < cplan.end
        return True

    return keep_root


def _delete_changelog_files(deletion: DeletionContext, expiring: list[int], end: int) -> None:
    """The `changelog-<id>` files oldest first (a rerun starts from the oldest one left), then
    `changelog/EARLIEST`."""
    manager = deletion.table.snapshot_manager
    for changelog_id in expiring:
        deletion.table.file_io.delete(manager.changelog_path(changelog_id))
        deletion.record.count("changelogs_expired", 1)
        crash_point(STEP_CHANGELOG_DELETED)
    manager.write_changelog_earliest_hint(end)
    deletion.log.info("expired %d changelogs; changelog EARLIEST = %d", len(expiring), end)
