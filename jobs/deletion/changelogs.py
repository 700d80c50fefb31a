"""Long-lived changelog expiry (Paimon's ExpireChangelogImpl), run by expire-snapshots on a table
with decoupled changelog retention: the changelogs beyond the changelog retention go, with the files
only they needed; then their `changelog-<id>` files oldest first, then `changelog/EARLIEST`.
"""

from __future__ import annotations

from typing import Any

from jobs.deletion.expire_candidates import (
    SNAPSHOT_LIMIT,
    changelog_range_reader,
    expiry_candidates,
    future_changelog_roots,
)
from jobs.deletion.roots import delete_stages, report_candidates
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.spark import assert_small
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


def expire_changelogs(
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
        if branch != table.branch:
            return True
        if kind == SNAPSHOT_ROOT:
            return int(name) >= plan.end  # below: expired by this run (or the dry run's plan)
        if kind == CHANGELOG_ROOT:
            return not cplan.begin <= int(name) < cplan.end
        return True

    planned = [(table.branch, CHANGELOG_TO_WRITE_ROOT, str(i)) for i in to_write if i >= cplan.end]
    planned += future_changelog_roots(table, plan.end)
    ids = (cplan.begin, cplan.end)
    candidates = expiry_candidates(
        spark, table, ids, changelog_range_reader(table), -1, keep_root, planned, log
    )
    try:
        totals = report_candidates(candidates, record, "changelog_")
        present = set(changelog_ids)
        expiring = [i for i in cplan.expired_ids if i in present]
        record.count("changelogs_to_expire", len(expiring))
        record.sample("changelogs_to_expire", [manager.changelog_path(i) for i in expiring[:SAMPLE_LIMIT]])
        if dry_run:
            return
        delete_stages(
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
