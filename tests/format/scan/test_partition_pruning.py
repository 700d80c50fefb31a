"""Manifest pruning by partition stats (paimon_format/scan/partition_pruning.py): a manifest that holds a
selected partition is never skipped (random manifests and predicates, checked entry by entry against
`selects`), the ones whose stats rule the selection out are, and stats that prove nothing are read."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from paimon_format.manifest.entries import ManifestFileMeta, SimpleStats
from paimon_format.manifest.files import partition_stats
from paimon_format.model.binary_row import EMPTY_ROW, serialize_row
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.partition_predicate import PartitionColumns, predicate_test, selects, spec_test
from paimon_format.scan.partition_pruning import (
    any_of,
    partitions_pruner,
    predicate_pruner,
    spec_pruner,
)

COLUMNS = PartitionColumns(("dt", "hr", "day"), (parse_type("STRING"), parse_type("INT"), parse_type("DATE")))
DAYS = [f"2024-01-{d:02d}" for d in range(1, 9)]
HOURS = [0, 1, 5, 12, 23]
DATES = [dt.date(2024, 3, 1) + dt.timedelta(days=d) for d in range(6)]


def _row(values: list) -> bytes:
    return serialize_row(values, COLUMNS.types)


def _meta(partitions: list[bytes], types=COLUMNS.types) -> ManifestFileMeta:
    """A manifest's list record as our writer makes it: stats over one partition row per entry."""
    return ManifestFileMeta("manifest-x", 1, len(partitions), 0, partition_stats(partitions, types), 0)


def _random_partition(rng: random.Random) -> list:
    return [
        rng.choice(DAYS + [None]),
        rng.choice(HOURS + [None]),
        rng.choice(DATES + [None]),
    ]


def _literal(rng: random.Random, column: str) -> str:
    if column == "dt":
        return f"'{rng.choice(DAYS + ['2023-12-31', '2024-01-10'])}'"
    if column == "hr":
        return str(rng.choice(HOURS + [-1, 3, 30]))
    return f"DATE '{rng.choice(DATES + [dt.date(2024, 2, 1)]).isoformat()}'"


def _random_predicate(rng: random.Random, depth: int = 0) -> str:
    kind = rng.random()
    if depth < 3 and kind < 0.3:
        joiner = rng.choice([" AND ", " OR "])
        return f"({_random_predicate(rng, depth + 1)}{joiner}{_random_predicate(rng, depth + 1)})"
    if depth < 3 and kind < 0.4:
        return f"NOT ({_random_predicate(rng, depth + 1)})"
    column = rng.choice(COLUMNS.keys)
    test = rng.random()
    if test < 0.15:
        return f"{column} IS {rng.choice(['', 'NOT '])}NULL"
    if test < 0.35:
        listed = ", ".join(_literal(rng, column) for _ in range(rng.randint(1, 3)))
        return f"{column} {rng.choice(['', 'NOT '])}IN ({listed})"
    return f"{column} {rng.choice(['=', '!=', '<', '<=', '>', '>='])} {_literal(rng, column)}"


def _random_manifests(seed: int, count: int):
    """(partition rows, list record) of `count` random manifests of 1-4 entries each."""
    rng = random.Random(seed)
    for _ in range(count):
        rows = [_random_partition(rng) for _ in range(rng.randint(1, 4))]
        yield rng, rows, _meta([_row(row) for row in rows])


def test_a_manifest_holding_a_selected_partition_is_never_skipped_and_others_often_are():
    skipped = 0
    for rng, rows, meta in _random_manifests(20261126, 3000):
        text = _random_predicate(rng)
        test = predicate_test(text, COLUMNS)
        may_hold = predicate_pruner(text, COLUMNS)(meta)
        assert may_hold or not any(selects(test, row) for row in rows), f"{text}: {rows} skipped"
        skipped += not may_hold
    assert skipped > 600  # the stats rule many selections out: the pruning does prune


def test_specs_and_exact_partitions_prune_as_they_select():
    skipped = 0
    for rng, rows, meta in _random_manifests(7, 1000):
        spec = {"dt": rng.choice(DAYS + ["__DEFAULT_PARTITION__"])}
        if rng.random() < 0.5:
            spec["hr"] = str(rng.choice(HOURS))
        may_hold = spec_pruner(spec, COLUMNS)(meta)
        assert may_hold or not any(selects(spec_test(spec, COLUMNS), row) for row in rows), f"{spec}: {rows}"
        skipped += not may_hold

        wanted = [_random_partition(rng) for _ in range(rng.randint(1, 3))]
        exact = partitions_pruner([_row(row) for row in wanted], COLUMNS.types)(meta)
        assert exact or not any(row in wanted for row in rows)
        skipped += not exact
    assert skipped > 600


def test_the_usual_nightly_selections_skip_the_manifests_of_other_days():
    january_second = _meta([_row(["2024-01-02", hour, None]) for hour in HOURS])
    first_days = _meta([_row([day, 1, None]) for day in DAYS[:3]])
    assert not predicate_pruner("dt = '2024-01-05'", COLUMNS)(january_second)
    assert predicate_pruner("dt < '2024-01-03'", COLUMNS)(january_second)
    assert not predicate_pruner("dt >= '2024-01-04'", COLUMNS)(first_days)
    assert predicate_pruner("dt >= '2024-01-03'", COLUMNS)(first_days)
    assert predicate_pruner("dt = '2024-01-02' AND hr = 3", COLUMNS)(january_second)  # a range, not a set
    assert not predicate_pruner("dt = '2024-01-03' AND hr = 3", COLUMNS)(january_second)
    assert predicate_pruner("dt = '2024-01-03' OR hr = 3", COLUMNS)(january_second)
    assert not predicate_pruner("hr > 23", COLUMNS)(january_second)
    assert not predicate_pruner("day IS NOT NULL", COLUMNS)(january_second)  # only nulls there
    assert not any_of([spec_pruner({"dt": d}, COLUMNS) for d in DAYS[5:]])(first_days)
    assert any_of([spec_pruner({"dt": d}, COLUMNS) for d in DAYS[1:]])(first_days)


@pytest.mark.parametrize(
    "stats",
    [
        SimpleStats(EMPTY_ROW, EMPTY_ROW, []),  # another arity: no stats kept
        SimpleStats(b"\x00\x01", b"\x00", [0, 0, 3]),  # broken bytes
        SimpleStats(_row([None, 0, None]), _row([None, 0, None]), [0, 0, 3]),  # dt: values, no bounds
        SimpleStats(_row(["2024-01-09", 0, None]), _row(["2024-01-01", 0, None]), [0, 0, 3]),  # min > max
        SimpleStats(_row(["2024-01-01", 0, None]), _row(["2024-01-02", 0, None]), None),  # no null counts
    ],
    ids=["empty", "broken", "no bounds", "min above max", "no null counts"],
)
def test_stats_that_prove_nothing_leave_the_manifest_read(stats):
    """dt is unproven in each (hr is 0 and day null throughout, as the wanted partition has them)."""
    meta = ManifestFileMeta("manifest-x", 1, 3, 0, stats, 0)
    wanted = "2024-01-05" if stats.null_counts is not None else "2024-01-01"
    assert predicate_pruner(f"dt = '{wanted}'", COLUMNS)(meta)
    assert spec_pruner({"dt": wanted}, COLUMNS)(meta)
    assert partitions_pruner([_row([wanted, 0, None])], COLUMNS.types)(meta)


FLOATS = PartitionColumns(("x",), (parse_type("DOUBLE"),))
FLOAT_VALUES = [float("nan"), -0.0, 0.0, 1.5, 2.5, None]


def _float_stats_as_pypaimon_writes_them(values: list) -> SimpleStats:
    """Python's min/max over the values, which can leave a NaN out of the range ([1.5, NaN] -> 1.5)."""
    present = [v for v in values if v is not None]
    low = min(present) if present else None
    high = max(present) if present else None
    return SimpleStats(
        serialize_row([low], FLOATS.types), serialize_row([high], FLOATS.types), [values.count(None)]
    )


@pytest.mark.parametrize("writer", ["ours", "pypaimon"])
def test_float_columns_are_never_ranged_so_nan_cannot_hide(writer):
    """NaN compares with nothing in Python (`x != 'NaN'` holds for every x, `x < 'NaN'` for none),
    Java orders it last and pypaimon's min/max can leave it out: a manifest of a float partition
    column is read whenever it has values, whatever the predicate or the stats' writer."""
    rng = random.Random(5)
    ops = ["=", "!=", "<", "<=", ">", ">="]
    for _ in range(2000):
        values = [rng.choice(FLOAT_VALUES) for _ in range(rng.randint(1, 3))]
        rows = [serialize_row([v], FLOATS.types) for v in values]
        stats = (
            partition_stats(rows, FLOATS.types)
            if writer == "ours"
            else _float_stats_as_pypaimon_writes_them(values)
        )
        meta = ManifestFileMeta("m", 1, len(rows), 0, stats, 0)
        literal = rng.choice(["'NaN'", "0", "1.5", "-0.0", "2"])
        text = rng.choice(
            [
                f"x {rng.choice(ops)} {literal}",
                f"NOT (x {rng.choice(ops)} {literal})",
                f"x NOT IN ({literal})",
            ]
        )
        test = predicate_test(text, FLOATS)
        may_hold = predicate_pruner(text, FLOATS)(meta)
        assert may_hold or not any(selects(test, [v]) for v in values), f"{text}: {values} skipped"
        assert partitions_pruner(rows[:1], FLOATS.types)(meta), values


def test_nan_bounds_and_binary_columns_are_not_ranged():
    floats = FLOATS
    nan = float("nan")
    meta = ManifestFileMeta(
        "m",
        1,
        2,
        0,
        SimpleStats(serialize_row([nan], floats.types), serialize_row([nan], floats.types), [0]),
        0,
    )
    assert predicate_pruner("x < 1", floats)(meta) and predicate_pruner("x = 5", floats)(meta)
    ranged = _meta([serialize_row([2.0], floats.types)], floats.types)
    assert predicate_pruner("x < 1", floats)(ranged)  # floats are never ranged (NaN)
    assert not predicate_pruner("x IS NULL", floats)(ranged)  # null counts still prove

    binary = PartitionColumns(("b",), (parse_type("VARBINARY(8)"),))
    rows = [serialize_row([b"\x01"], binary.types), serialize_row([b"\x02"], binary.types)]
    assert partitions_pruner([serialize_row([b"\xff"], binary.types)], binary.types)(
        _meta(rows, binary.types)
    )
