"""What a table's options ask for next, given what its metadata shows: concrete lines for the page.

Each rule compares one figure with the option that governs it (Paimon's default when unset) and
names the job that acts on it, so a line reads as a to-do: "14 snapshots, more than
snapshot.num-retained.max (10): expire-snapshots removes the oldest 4". Rules only read
`TableHealth`; no storage is touched here.
"""

from __future__ import annotations

from jobs.report.figures import duration_text, share_text, size_text
from jobs.report.table_health import TableHealth
from paimon_format.model.options import CoreOptions

SMALL_SHARE = 0.5  # more than half the live files small: compaction is due
PARTITIONS_WITHOUT_EXPIRY = 1000  # this many partitions and nothing drops them: worth a line


def advice_lines(health: TableHealth, now_ms: int) -> list[str]:
    """The advice for one readable table, most pressing first; one line saying so when all is well."""
    options = CoreOptions(health.options)
    if health.latest is None:
        return ["no snapshot yet: nothing to maintain until a writer commits"]
    lines = [
        *_snapshot_lines(health, options, now_ms),
        *_consumer_lines(health, options, now_ms),
        *_file_lines(health, options),
        *_manifest_lines(health, options),
        *_partition_and_tag_lines(health, options),
    ]
    return lines or ["nothing due: snapshots, file sizes and manifests are within the table's options"]


def _snapshot_lines(health: TableHealth, options: CoreOptions, now_ms: int) -> list[str]:
    count, earliest = health.snapshot_count, health.earliest
    retain_min, retain_max = options.snapshot_num_retained_min, options.snapshot_num_retained_max
    time_retained = options.snapshot_time_retained_ms
    if count > retain_max:
        return [
            f"{count} snapshots, more than snapshot.num-retained.max ({retain_max}): expire-snapshots "
            f"removes the oldest {count - retain_max}"
        ]
    if earliest is not None and count > retain_min and now_ms - earliest.time_millis > time_retained:
        return [
            f"{count} snapshots; the earliest (snapshot {earliest.id}, committed "
            f"{duration_text(now_ms - earliest.time_millis)} ago) is older than snapshot.time-retained "
            f"({duration_text(time_retained)}) and more than snapshot.num-retained.min ({retain_min}) are "
            "kept: expire-snapshots has snapshots to expire"
        ]
    lines = []
    changelog_max = options.changelog_num_retained_max
    if health.changelog_count > changelog_max:
        lines.append(
            f"{health.changelog_count} long-lived changelogs, more than changelog.num-retained.max "
            f"({changelog_max}): expire-changelogs removes the oldest"
        )
    return lines


def _consumer_lines(health: TableHealth, options: CoreOptions, now_ms: int) -> list[str]:
    """Consumers far behind the latest snapshot keep every snapshot after theirs from expiring."""
    latest = health.latest
    if not health.consumers or latest is None:
        return []
    slowest = min(health.consumers, key=lambda consumer: consumer.next_snapshot)
    behind = latest.id - slowest.next_snapshot
    if behind < options.snapshot_num_retained_min:
        return []
    line = (
        f"consumer {slowest.consumer_id} reads from snapshot {slowest.next_snapshot}, {behind} behind the "
        f"latest ({latest.id}); its file was written {duration_text(max(now_ms - slowest.modified_ms, 0))} "
        "ago, and expiry keeps every snapshot from its next one on"
    )
    if options.consumer_expiration_time_ms is None:
        line += ": set consumer.expiration-time, or clear-consumers once its reader is gone"
    return [line]


def _file_lines(health: TableHealth, options: CoreOptions) -> list[str]:
    live = health.live
    if live is None or live.files < 2:
        return []
    lines = []
    average = live.bytes // live.files
    if live.small_files > SMALL_SHARE * live.files:
        where = "a dedicated compaction job (the table is write-only)" if options.write_only else "compact"
        lines.append(
            f"{live.small_files} of {live.files} live files ({share_text(live.small_files, live.files)}) are "
            f"under half of target-file-size ({size_text(health.target_file_size)}), on average "
            f"{size_text(average)}: {where} merges them into fewer, larger files"
        )
    trigger = options.num_sorted_run_compaction_trigger
    if health.primary_keys and live.level0_files > trigger:
        lines.append(
            f"{live.level0_files} level-0 files, more than num-sorted-run.compaction-trigger ({trigger}) "
            "in total: readers merge every sorted run; compact merges them"
        )
    return lines


def _manifest_lines(health: TableHealth, options: CoreOptions) -> list[str]:
    live = health.live
    if live is None:
        return []
    lines = []
    if live.manifests > options.manifest_merge_min_count:
        lines.append(
            f"{live.manifests} manifests in the latest snapshot, more than manifest.merge-min-count "
            f"({options.manifest_merge_min_count}): compact-manifests merges them"
        )
    if live.manifests_with_deletes:
        lines.append(
            f"{live.manifests_with_deletes} of {live.manifests} manifests hold DELETE entries that every "
            "scan cancels again: compact-manifests drops them"
        )
    return lines


def _partition_and_tag_lines(health: TableHealth, options: CoreOptions) -> list[str]:
    lines = []
    live = health.live
    expiration = options.partition_expiration_time_ms
    if live is not None and expiration is not None:
        lines.append(
            f"partition.expiration-time {duration_text(expiration)}: expire-partitions drops older "
            f"partitions ({live.partition_count} live now)"
        )
    elif live is not None and live.partition_count > PARTITIONS_WITHOUT_EXPIRY:
        lines.append(
            f"{live.partition_count} partitions and no partition.expiration-time: partitions stay until "
            "dropped (drop-partition, or set the option for expire-partitions)"
        )
    automatic = health.options.get("tag.automatic-creation", "none").strip().lower() not in ("", "none")
    limited = "tag.num-retained-max" in health.options or "tag.default-time-retained" in health.options
    if automatic and not limited:
        lines.append(
            f"tag.automatic-creation makes tags ({health.tag_count} now) but neither tag.num-retained-max "
            "nor tag.default-time-retained limits them: every tag keeps its files"
        )
    oldest = health.oldest_tag
    if health.earliest is not None and oldest is not None:
        if oldest.snapshot_id < health.earliest.id:
            lines.append(
                f"tag {oldest.name} holds snapshot {oldest.snapshot_id}, older than the earliest snapshot "
                f"({health.earliest.id}): its files stay until delete-tag or expire-tags removes it"
            )
    return lines
