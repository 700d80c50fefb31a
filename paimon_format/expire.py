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

Pure: no I/O. The job reads ids and times and hands them in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


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
    limited_by: str  # which limit set `end`: retain_min, age, max_deletes or consumer

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
) -> ExpireRange | None:
    """The range to expire, or None for a table without snapshots.

    `snapshot_ids` are the ids present (any order); `time_of(id)` is a snapshot's commit time and is
    only called for ids between the retain_max bound and the retain_min bound.
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
    for snapshot_id, successor in zip(ordered, ordered[1:], strict=False):
        if snapshot_id < unconditional:
            continue
        if snapshot_id >= end:
            break
        if time_of(successor) >= settings.cutoff_ms:
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
