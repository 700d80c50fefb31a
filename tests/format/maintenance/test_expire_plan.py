"""The expiry range: retain_min, retain_max, age (successor rule), limit, consumers and gaps."""

from __future__ import annotations

import pytest

from paimon_format.maintenance.expire import ExpireSettings, plan_range

OLD = 1_000  # committed long before every cutoff below
NOW = 10_000


def settings(retain_min=1, retain_max=1_000_000, cutoff_ms=NOW, max_deletes=1_000_000) -> ExpireSettings:
    return ExpireSettings(retain_min, retain_max, cutoff_ms, max_deletes)


def all_old(_snapshot_id: int) -> int:
    return OLD


def test_empty_table_has_no_range() -> None:
    assert plan_range([], all_old, settings()) is None


def test_retain_min_keeps_the_newest() -> None:
    plan = plan_range(range(1, 21), all_old, settings(retain_min=5))
    assert (plan.begin, plan.end, plan.limited_by) == (1, 16, "retain_min")
    assert list(plan.expired_ids) == list(range(1, 16))


def test_fewer_snapshots_than_retain_min_expire_nothing() -> None:
    plan = plan_range(range(1, 4), all_old, settings(retain_min=10))
    assert plan.count == 0


def test_age_successor_rule() -> None:
    # snapshot 5 is the state at the cutoff (6 came later): 1..4 go, 5 stays
    times = {i: (NOW - 100 if i <= 5 else NOW + 100) for i in range(1, 11)}
    plan = plan_range(range(1, 11), times.__getitem__, settings())
    assert (plan.begin, plan.end, plan.limited_by) == (1, 5, "age")


def test_retain_max_expires_regardless_of_age() -> None:
    plan = plan_range(range(1, 21), lambda _i: NOW + 1, settings(retain_min=2, retain_max=5))
    assert (plan.begin, plan.end) == (1, 16)


def test_limit_bounds_one_run() -> None:
    plan = plan_range(range(1, 101), all_old, settings(retain_min=10, max_deletes=7))
    assert (plan.begin, plan.end, plan.limited_by) == (1, 8, "max_deletes")


def test_consumer_keeps_its_next_snapshot() -> None:
    plan = plan_range(range(1, 31), all_old, settings(retain_min=5), consumer_next=12)
    assert (plan.end, plan.limited_by) == (12, "consumer")


def test_gap_below_end_starts_after_it() -> None:
    ids = [3, 4, 6, 7, 8, 9, 10, 11, 12]  # 5 is missing: 3 and 4 are remnants of an earlier expiry
    plan = plan_range(ids, all_old, settings(retain_min=3))
    assert (plan.earliest, plan.begin, plan.end) == (3, 6, 10)


def test_end_must_exist() -> None:
    ids = [1, 2, 3, 5, 6]
    plan = plan_range(ids, all_old, settings(retain_min=3, max_deletes=3))  # end would be 4: missing
    assert (plan.begin, plan.end) == (1, 3)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"retain_min": 0}, "retain_min"),
        ({"retain_min": 5, "retain_max": 4}, "retain_max"),
        ({"max_deletes": 0}, "max_deletes"),
    ],
)
def test_invalid_settings_are_named(kwargs, word) -> None:
    with pytest.raises(ValueError, match=word):
        plan_range([1, 2], all_old, settings(**kwargs))
