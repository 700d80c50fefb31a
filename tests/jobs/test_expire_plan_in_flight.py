"""Planning an expiry with commit times read in flight (issue #26) plans exactly what reading them one
after another plans, asks only for the times the plan may need, and fails as the plain loop fails."""

from __future__ import annotations

import random
import threading

import pytest

from paimon_format.maintenance.expire import (
    ChangelogSettings,
    ExpireSettings,
    plan_changelog_range,
    plan_range,
)


class Times:
    """Commit times by id, remembering which ids were asked for (from any thread)."""

    def __init__(self, times: dict[int, int], failing: int | None = None) -> None:
        self.times = times
        self.failing = failing
        self.asked: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, snapshot_id: int) -> int:
        with self._lock:
            self.asked.add(snapshot_id)
        if snapshot_id == self.failing:
            raise OSError(f"snapshot-{snapshot_id}: read failed")
        return self.times[snapshot_id]


def random_table(rng: random.Random) -> tuple[list[int], dict[int, int]]:
    """Ids with gaps and rising commit times."""
    first = rng.randint(1, 50)
    ids = sorted(rng.sample(range(first, first + 120), rng.randint(1, 100)))
    clock = 0
    times = {}
    for snapshot_id in ids:
        clock += rng.randint(1, 100)
        times[snapshot_id] = clock
    return ids, times


@pytest.mark.parametrize("seed", range(40))
def test_a_snapshot_plan_with_times_in_flight_is_the_serial_plan(seed: int) -> None:
    rng = random.Random(seed)
    ids, times = random_table(rng)
    retain_min = rng.randint(1, 10)
    settings = ExpireSettings(
        retain_min=retain_min,
        retain_max=rng.randint(retain_min, 200),
        cutoff_ms=rng.randint(0, max(times.values()) + 50),
        max_deletes=rng.randint(1, 150),
    )
    consumer = rng.choice([None, rng.choice(ids)])
    serial, parallel = Times(times), Times(times)

    planned = plan_range(ids, serial, settings, consumer)
    assert plan_range(ids, parallel, settings, consumer, parallelism=8) == planned
    assert serial.asked <= parallel.asked  # read ahead of the stop, never fewer
    if planned is not None:
        # only successors of snapshots between the retain_max bound and the retain_min bound are asked
        upper = planned.latest - settings.retain_min + 1
        lower = max(planned.latest - settings.retain_max + 1, planned.earliest)
        successors = {after for before, after in zip(ids, ids[1:], strict=False) if lower <= before < upper}
        assert parallel.asked <= successors


@pytest.mark.parametrize("seed", range(40))
def test_a_changelog_plan_with_times_in_flight_is_the_serial_plan(seed: int) -> None:
    rng = random.Random(seed)
    ids, times = random_table(rng)
    retain_min = rng.randint(1, 10)
    settings = ChangelogSettings(
        retain_min=retain_min,
        retain_max=rng.randint(retain_min, 200),
        cutoff_ms=rng.randint(0, max(times.values()) + 50),
        max_deletes=rng.randint(1, 150),
    )
    latest_snapshot = max(ids) + rng.randint(0, 20)
    serial, parallel = Times(times), Times(times)

    planned = plan_changelog_range(ids, serial, settings, latest_snapshot)
    assert plan_changelog_range(ids, parallel, settings, latest_snapshot, parallelism=8) == planned
    assert serial.asked <= parallel.asked <= set(ids)


def test_a_time_that_cannot_be_read_fails_the_plan_when_the_plan_needs_it() -> None:
    ids = list(range(1, 31))
    times = {i: 1000 * i for i in ids}
    settings = ExpireSettings(retain_min=1, retain_max=100, cutoff_ms=10**9, max_deletes=100)
    with pytest.raises(OSError, match="snapshot-20"):
        plan_range(ids, Times(times, failing=20), settings, parallelism=8)
    # a failure past the first young successor is never needed: the serial plan does not see it
    young = ExpireSettings(retain_min=1, retain_max=100, cutoff_ms=5000, max_deletes=100)
    serial = plan_range(ids, Times(times), young)
    assert serial is not None and serial.end == 4
    assert plan_range(ids, Times(times, failing=29), young, parallelism=8) == serial
