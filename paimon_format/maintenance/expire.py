"""Which snapshots an expiry removes: the range [begin, end), planned from snapshot ids and times only.

Seed 004 "Expiring Snapshots" and Paimon's ExpireSnapshots decide the range from four limits:

- `retain_min`: the newest `retain_min` snapshots always stay (end <= latest - retain_min + 1);
- `retain_max`: snapshots older than the newest `retain_max` go regardless of age;
- age: between those two, a snapshot goes only once its *successor* is older than the cutoff, so
  that the table state as of the cutoff (which the successor replaced) can still be read;
- `max_deletes`: at most that many snapshot ids past the earliest per run (end <= earliest + limit).

A streaming consumer's next snapshot also stays (end <= min next snapshot). Gaps: a missing snapshot
below `end` means everything before it was already expired (by an interrupted run, say), so the
range starts after the newest gap. The snapshot `end` itself must exist, because its delta says
which files the last expired snapshot still had.

Pure: no I/O. The job reads ids and hands in `time_of`, which the planners call for up to
`parallelism` ids at once (`map_in_flight`), in order: each time is a snapshot file read, and reading
hundreds of them one after another on an object store is bound by latency. A planner stops at the
first young enough snapshot; the few times fetched ahead of it are discarded unused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass

from paimon_format.storage.in_flight import map_in_flight


@dataclass(frozen=True)
class ExpireSettings:
    retain_min: int
    retain_max: int
    cutoff_ms: int  # a snapshot goes only if its successor was committed before this time
    max_deletes: int

    def validate(self) -> None:
        """ValueError naming the setting: nonsense limits must never turn into a large deletion."""
        if self.retain_min < 1:
            raise ValueError(f"retain_min must be at least 1, got {self.retain_min}")
        if self.retain_max < self.retain_min:
            raise ValueError(f"retain_max ({self.retain_max}) must be >= retain_min ({self.retain_min})")
        if self.max_deletes < 1:
            raise ValueError(f"max_deletes must be at least 1, got {self.max_deletes}")


@dataclass(frozen=True)
class ExpireRange:
    earliest: int
    latest: int
    begin: int  # first snapshot to expire
    end: int  # first snapshot kept (exclusive end); begin == end: nothing to expire
    limited_by: str  # which limit set `end`: retain_min, age, max_deletes or consumer (changelogs: more)

    @property
    def count(self) -> int:
        return max(self.end - self.begin, 0)

    @property
    def expired_ids(self) -> range:
        return range(self.begin, max(self.end, self.begin))


def plan_range(
    snapshot_ids: Sequence[int],
    time_of: Callable[[int], int],
    settings: ExpireSettings,
    consumer_next: int | None = None,
    parallelism: int = 1,
) -> ExpireRange | None:
    """The range to expire, or None for a table without snapshots.

    `snapshot_ids` are the ids present (any order); `time_of(id)` is a snapshot's commit time and is
    only called for ids between the retain_max bound and the retain_min bound, from up to
    `parallelism` threads at once.
    """
    settings.validate()
    if not snapshot_ids:
        return None
    present = set(snapshot_ids)
    earliest, latest = min(present), max(present)
    end = latest - settings.retain_min + 1
    limited_by = "retain_min"
    if consumer_next is not None and consumer_next < end:
        end, limited_by = consumer_next, "consumer"
    if earliest + settings.max_deletes < end:
        end, limited_by = earliest + settings.max_deletes, "max_deletes"
    unconditional = max(latest - settings.retain_max + 1, earliest)
    ordered = sorted(present)
    pairs = [
        (snapshot_id, successor)
        for snapshot_id, successor in zip(ordered, ordered[1:], strict=False)
        if unconditional <= snapshot_id < end
    ]
    with closing(map_in_flight(time_of, [successor for _, successor in pairs], parallelism)) as times:
        for (snapshot_id, _), successor_time in zip(pairs, times, strict=False):
            if successor_time >= settings.cutoff_ms:
                end, limited_by = snapshot_id, "age"
                break
    while end > earliest and end not in present:
        end -= 1  # a gap above the range: keep the newest existing snapshot as the first retained
    if end <= earliest:
        return ExpireRange(earliest, latest, earliest, earliest, limited_by)
    begin = earliest
    for snapshot_id in range(end - 1, earliest - 1, -1):
        if snapshot_id not in present:
            begin = snapshot_id + 1
            break
    return ExpireRange(earliest, latest, begin, end, limited_by)


# -- decoupled changelog retention -------------------------------------------------------------------


@dataclass(frozen=True)
class ChangelogSettings:
    """How long long-lived changelogs stay (`changelog.num-retained.*`, `changelog.time-retained`).

    Paimon's ExpireConfig: an option the table does not set falls back to the *run's* snapshot
    setting, so a table without changelog options is never decoupled, whatever the job overrides.
    """

    retain_min: int
    retain_max: int
    cutoff_ms: int  # a changelog committed at or after this time stays
    max_deletes: int


def changelog_settings(
    retain_min: int | None,
    retain_max: int | None,
    time_ms: int | None,
    snapshot: ExpireSettings,
    now_ms: int,
) -> ChangelogSettings:
    """The table's changelog options as set (None = unset) completed by the run's snapshot settings."""
    return ChangelogSettings(
        retain_min=snapshot.retain_min if retain_min is None else retain_min,
        retain_max=snapshot.retain_max if retain_max is None else retain_max,
        cutoff_ms=snapshot.cutoff_ms if time_ms is None else now_ms - time_ms,
        max_deletes=snapshot.max_deletes,
    )


def decoupled_cause(changelog: ChangelogSettings, snapshot: ExpireSettings) -> str | None:
    """Why changelogs outlive snapshots in this run (Paimon's isChangelogDecoupled), or None.

    Any changelog bound that keeps more than the snapshot bound decouples: the expired snapshots'
    changelog must then survive as `changelog/changelog-<id>` files.
    """
    if changelog.retain_max > snapshot.retain_max:
        return f"changelog.num-retained.max={changelog.retain_max} > retain_max={snapshot.retain_max}"
    if changelog.retain_min > snapshot.retain_min:
        return f"changelog.num-retained.min={changelog.retain_min} > retain_min={snapshot.retain_min}"
    if changelog.cutoff_ms < snapshot.cutoff_ms:
        hours = (snapshot.cutoff_ms - changelog.cutoff_ms) / 3_600_000
        return f"changelog.time-retained keeps changelogs {hours:g} h longer than the snapshot cutoff"
    return None


# Long-lived changelogs [begin, end) to expire share the snapshot range's shape; `limited_by` adds
# latest_changelog and missing_end.
ChangelogRange = ExpireRange


def plan_changelog_range(
    changelog_ids: Sequence[int],
    time_of: Callable[[int], int],
    settings: ChangelogSettings,
    latest_snapshot_id: int,
    consumer_next: int | None = None,
    parallelism: int = 1,
) -> ChangelogRange | None:
    """Which long-lived changelogs go (Paimon's ExpireChangelogImpl), or None when there are none.

    Counted from the latest *snapshot* id, as the ids of snapshots and changelogs are one sequence:
    the newest `retain_min` ids stay; ids older than the newest `retain_max` go regardless of age;
    in between a changelog goes only while it is older than the cutoff (its own commit time). The
    consumer's next snapshot, `max_deletes` past the earliest and the latest changelog itself (the
    newest one always stays) bound the end, which must be an existing changelog. `time_of` is
    called from up to `parallelism` threads at once.
    """
    if not changelog_ids:
        return None
    present = set(changelog_ids)
    earliest, latest = min(present), max(present)
    end, limited_by = latest_snapshot_id - settings.retain_min + 1, "retain_min"
    if consumer_next is not None and consumer_next < end:
        end, limited_by = consumer_next, "consumer"
    if earliest + settings.max_deletes < end:
        end, limited_by = earliest + settings.max_deletes, "max_deletes"
    if latest < end:
        end, limited_by = latest, "latest_changelog"
    if end <= earliest:
        return ChangelogRange(earliest, latest, earliest, earliest, limited_by)
    ids = [
        i for i in range(max(latest_snapshot_id - settings.retain_max + 1, earliest), end + 1) if i in present
    ]
    with closing(map_in_flight(time_of, ids, parallelism)) as times:
        for changelog_id, changelog_time in zip(ids, times, strict=False):
            if changelog_time >= settings.cutoff_ms:
                end, limited_by = changelog_id, "age"
                break
    if end not in present:
        return ChangelogRange(earliest, latest, earliest, earliest, "missing_end")
    return ChangelogRange(earliest, latest, earliest, end, limited_by)
