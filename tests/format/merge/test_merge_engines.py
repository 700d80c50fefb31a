"""Partial-update and aggregation merge engines: hand-made runs with known results (from Paimon's
documented semantics and merge-function sources), option checks, and randomized differential tests
against small reference merges written here."""

from __future__ import annotations

import random
from collections import defaultdict
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from paimon_format.errors import UnsupportedOperationError
from paimon_format.merge.aggregates import AggregationError, field_aggregator
from paimon_format.merge.interface import MergeFunctionError
from paimon_format.merge.row import RowMergeEngine, row_merge_engine
from paimon_format.merge.row_functions import MergeRow
from paimon_format.merge.sorted_runs import merge_rows
from paimon_format.merge.table_engine import check_merge_supported
from paimon_format.model.options import CoreOptions
from paimon_format.model.type_parsing import parse_type
from tests.support.merge_runs import make_run, make_schema, merged_rows

PU_COLUMNS = (("k", "INT"), ("a", "STRING"), ("b", "INT"), ("c", "STRING"))


def pu_schema(**options: str):
    return make_schema(columns=PU_COLUMNS, options={"merge-engine": "partial-update", **options})


def pu(k: int, a: Any = None, b: Any = None, c: Any = None) -> dict[str, Any]:
    return {"k": k, "a": a, "b": b, "c": c}


# -- partial-update ---------------------------------------------------------------------------------------


def test_partial_update_non_null_fields_overwrite_in_sequence_order() -> None:
    schema = pu_schema()
    runs = [
        make_run(schema, [(1, "+I", pu(1, a="a1", b=1)), (2, "+I", pu(2, a="only"))]),
        make_run(schema, [(5, "+I", pu(1, b=2, c="c2"))]),
        make_run(schema, [(3, "+I", pu(1, a="a3", c="older"))]),  # older than seq 5: c stays c2
    ]
    assert merged_rows(schema, runs) == [(5, "+I", pu(1, "a3", 2, "c2")), (2, "+I", pu(2, a="only"))]


def test_partial_update_delete_handling() -> None:
    runs_rows = [[(1, "+I", pu(1, a="a", b=1))], [(2, "-D", pu(1, a="a", b=1)), (3, "-D", pu(2, a="x"))]]
    schema = pu_schema()
    with pytest.raises(MergeFunctionError, match="ignore-delete"):
        merged_rows(schema, [make_run(schema, rows) for rows in runs_rows])
    # a lone delete is passed through without the merge function, as Paimon's reducer wrapper does
    assert merged_rows(schema, [make_run(schema, runs_rows[1][1:])], drop_deletes=False) == [
        (3, "-D", pu(2, a="x"))
    ]
    ignoring = pu_schema(**{"partial-update.ignore-delete": "true"})
    runs = [make_run(ignoring, rows) for rows in runs_rows]
    assert merged_rows(ignoring, runs) == [(1, "+I", pu(1, a="a", b=1))]
    removing = pu_schema(**{"partial-update.remove-record-on-delete": "true"})
    runs = [make_run(removing, rows) for rows in runs_rows]
    assert merged_rows(removing, runs) == []
    assert merged_rows(removing, runs, drop_deletes=False) == [
        (2, "-D", pu(1, a="a", b=1)),
        (3, "-D", pu(2, a="x")),
    ]
    again = runs + [make_run(removing, [(9, "+I", pu(1, c="new"))])]
    assert merged_rows(removing, again) == [(9, "+I", pu(1, a="a", b=1, c="new"))]


def test_partial_update_update_before_is_refused_without_options() -> None:
    schema = pu_schema()
    runs = [make_run(schema, [(1, "+I", pu(1, a="a"))]), make_run(schema, [(2, "-U", pu(1, a="a"))])]
    with pytest.raises(MergeFunctionError):
        merged_rows(schema, runs)


def test_partial_update_only_retractions_with_ignore_delete() -> None:
    """The merge function's row starts from the first retraction's values and stays a -D."""
    schema = pu_schema(**{"ignore-delete": "true"})
    runs = [make_run(schema, [(4, "-U", pu(1, a="x"))]), make_run(schema, [(6, "-D", pu(1, a="y"))])]
    assert merged_rows(schema, runs) == []
    assert merged_rows(schema, runs, drop_deletes=False) == [(0, "-D", pu(1, a="x"))]


def test_partial_update_not_null_column_refuses_null() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("a", "STRING NOT NULL")), options={"merge-engine": "partial-update"}
    )
    runs = [
        make_run(schema, [(1, "+I", {"k": 1, "a": "x"})]),
        make_run(schema, [(2, "+I", {"k": 1, "a": None})]),
    ]
    with pytest.raises(MergeFunctionError, match="field a"):
        merged_rows(schema, runs)


def test_partial_update_sequence_groups() -> None:
    """Group (b -> a): a changes only with a newer-or-equal b; c is updated as without groups."""
    schema = pu_schema(**{"fields.b.sequence-group": "a"})
    runs = [
        make_run(schema, [(1, "+I", pu(1, a="a@5", b=5, c="c1"))]),
        make_run(schema, [(2, "+I", pu(1, a="a@3", b=3, c="c2"))]),  # b older: a/b unchanged
        make_run(schema, [(3, "+I", pu(1, a=None, b=None, c=None))]),  # null group sequence: skipped
        make_run(schema, [(4, "+I", pu(1, a=None, b=7))]),  # newer group: a overwritten, even by null
    ]
    assert merged_rows(schema, runs[:3]) == [(3, "+I", pu(1, "a@5", 5, "c2"))]
    assert merged_rows(schema, runs) == [(4, "+I", pu(1, None, 7, "c2"))]


def test_partial_update_sequence_group_aggregates_and_retracts() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("total", "BIGINT"), ("seen", "STRING"), ("g", "INT")),
        options={
            "merge-engine": "partial-update",
            "fields.g.sequence-group": "total,seen",
            "fields.total.aggregate-function": "sum",
            "fields.seen.aggregate-function": "last_value",
        },
    )

    def r(total, seen, g):
        return {"k": 1, "total": total, "seen": seen, "g": g}

    runs = [
        make_run(schema, [(1, "+I", r(10, "x", 1))]),
        make_run(schema, [(2, "+I", r(5, "old", 0))]),  # older group: sum still adds (aggReversed)
        make_run(schema, [(3, "-U", r(10, "x", 1))]),  # retracts: sum subtracts, last_value -> null
    ]
    assert merged_rows(schema, runs[:2]) == [(2, "+I", r(15, "x", 1))]
    assert merged_rows(schema, runs) == [(3, "+I", r(5, None, 1))]


def test_partial_update_remove_record_on_sequence_group() -> None:
    schema = make_schema(
        columns=PU_COLUMNS + (("d", "INT"),),
        options={
            "merge-engine": "partial-update",
            "fields.b.sequence-group": "a",
            "fields.d.sequence-group": "c",
            "partial-update.remove-record-on-sequence-group": "b",
        },
    )
    base = make_run(
        schema, [(1, "+I", {**pu(1, "a", 1, "c"), "d": 1}), (2, "+I", {**pu(2, "a", 1, "c"), "d": 1})]
    )
    deletes = make_run(schema, [(3, "-D", {**pu(1, b=2), "d": None}), (4, "-D", {**pu(2), "d": 5})])
    assert merged_rows(schema, [base, deletes], drop_deletes=False) == [
        (3, "-D", {**pu(1, b=2), "d": None}),  # a -D of group b removes the row
        (4, "+I", {**pu(2, "a", 1, None), "d": 5}),  # a -D of group d only retracts group d's fields
    ]


def test_partial_update_option_checks() -> None:
    with pytest.raises(UnsupportedOperationError, match="sequence-group"):
        check_merge_supported(pu_schema(**{"fields.a.aggregate-function": "max"}))
    check_merge_supported(pu_schema(**{"fields.a.aggregate-function": "last_non_null_value"}))
    check_merge_supported(pu_schema(**{"fields.b.sequence-group": "a", "fields.a.aggregate-function": "max"}))
    with pytest.raises(UnsupportedOperationError, match="cannot both"):
        check_merge_supported(
            pu_schema(**{"ignore-delete": "true", "partial-update.remove-record-on-delete": "true"})
        )
    with pytest.raises(UnsupportedOperationError, match="cannot both"):
        check_merge_supported(
            pu_schema(**{"fields.b.sequence-group": "a", "partial-update.remove-record-on-delete": "true"})
        )
    with pytest.raises(UnsupportedOperationError, match="primary key"):
        check_merge_supported(pu_schema(**{"fields.b.sequence-group": "k"}))
    with pytest.raises(UnsupportedOperationError, match="repeatedly"):
        check_merge_supported(pu_schema(**{"fields.b.sequence-group": "a", "fields.c.sequence-group": "a"}))
    with pytest.raises(UnsupportedOperationError, match="nope"):
        check_merge_supported(pu_schema(**{"fields.nope.sequence-group": "a"}))
    with pytest.raises(UnsupportedOperationError, match="sequence group"):
        check_merge_supported(
            pu_schema(
                **{"fields.b.sequence-group": "a", "partial-update.remove-record-on-sequence-group": "c"}
            )
        )


# -- aggregation ------------------------------------------------------------------------------------------

AGG_COLUMNS = (
    ("k", "INT"),
    ("s", "BIGINT"),
    ("lo", "INT"),
    ("hi", "STRING"),
    ("lv", "STRING"),
    ("lnn", "STRING"),
    ("fv", "STRING"),
    ("fnn", "STRING"),
    ("la", "STRING"),
    ("band", "BOOLEAN"),
    ("bor", "BOOLEAN"),
    ("d", "DECIMAL(5, 2)"),
)
AGG_FUNCTIONS = {
    "s": "sum",
    "lo": "min",
    "hi": "max",
    "lv": "last_value",
    "lnn": "last_non_null_value",
    "fv": "first_value",
    "fnn": "first_non_null_value",
    "la": "listagg",
    "band": "bool_and",
    "bor": "bool_or",
    "d": "sum",
}


def agg_schema(**options: str):
    functions = {f"fields.{name}.aggregate-function": fn for name, fn in AGG_FUNCTIONS.items()}
    return make_schema(columns=AGG_COLUMNS, options={"merge-engine": "aggregation", **functions, **options})


def agg(k: int, **values: Any) -> dict[str, Any]:
    return {"k": k, **{name: values.get(name) for name, _ in AGG_COLUMNS[1:]}}


def test_aggregation_functions() -> None:
    schema = agg_schema()
    first = agg(1, s=1, lo=5, hi="b", lv="v1", lnn="n1", fv=None, fnn=None, la="x", band=True, bor=False)
    second = agg(1, s=2, lo=3, hi="a", lv=None, lnn=None, fv="f2", fnn="g2", la=" ", band=True, bor=None)
    third = agg(
        1, s=None, lo=None, hi="é", lv="v3", lnn="n3", fv="f3", fnn="g3", la="y", band=False, bor=True
    )
    first["d"], second["d"], third["d"] = Decimal("1.25"), Decimal("998.80"), None
    runs = [
        make_run(schema, [(1, "+I", first)]),
        make_run(schema, [(2, "+I", second)]),
        make_run(schema, [(3, "+I", third)]),
    ]
    expected = agg(1, s=3, lo=3, hi="é", lv="v3", lnn="n3", fv=None, fnn="g2", la="x,y", band=False, bor=True)
    expected["d"] = None  # 1.25 + 998.80 overflows DECIMAL(5, 2): Paimon's sum yields null
    assert merged_rows(schema, runs) == [(3, "+I", expected)]


def test_aggregation_lone_row_passes_unchanged() -> None:
    schema = agg_schema()
    lone = agg(7, s=5, la="a", d=Decimal("1.00"))
    assert merged_rows(schema, [make_run(schema, [(4, "-U", lone)])], drop_deletes=False) == [(4, "-U", lone)]


def test_listagg_distinct_with_whitespace_delimiter() -> None:
    """Paimon's FieldAggregatorTest scenario: tokens split on the whole delimiter, blanks skipped."""
    options = CoreOptions({"fields.f.distinct": "true", "fields.f.list-agg-delimiter": " "})
    listagg = field_aggregator(options, "f", parse_type("STRING"), "listagg")
    result = None
    for value in ["k1=v1 k2=v2", " k1=v1  k3=v3", " "]:
        result = listagg.agg(result, value)
    assert result == "k1=v1 k2=v2 k3=v3"


def test_aggregation_listagg_delimiter_and_distinct() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("tags", "STRING"), ("plain", "STRING")),
        options={
            "merge-engine": "aggregation",
            "fields.default-aggregate-function": "listagg",
            "fields.tags.list-agg-delimiter": ";",
            "fields.tags.distinct": "true",
        },
    )
    runs = [
        make_run(schema, [(1, "+I", {"k": 1, "tags": "a;b", "plain": "a"})]),
        make_run(schema, [(2, "+I", {"k": 1, "tags": "b;c;;a", "plain": "a"})]),
    ]
    assert merged_rows(schema, runs) == [(2, "+I", {"k": 1, "tags": "a;b;c", "plain": "a,a"})]


def test_aggregation_retractions() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("s", "INT"), ("lv", "STRING"), ("lnn", "STRING"), ("keep", "STRING")),
        options={
            "merge-engine": "aggregation",
            "fields.s.aggregate-function": "sum",
            "fields.lv.aggregate-function": "last_value",
            "fields.keep.aggregate-function": "max",
            "fields.keep.ignore-retract": "true",
        },
    )

    def r(s, lv, lnn, keep):
        return {"k": 1, "s": s, "lv": lv, "lnn": lnn, "keep": keep}

    runs = [
        make_run(schema, [(1, "+I", r(10, "a", "x", "m"))]),
        make_run(schema, [(2, "-U", r(3, "a", "x", "z"))]),
        make_run(schema, [(3, "-D", r(None, None, None, None))]),
    ]
    # sum subtracts, last_value forgets, last_non_null forgets a non-null retraction, ignore-retract keeps
    assert merged_rows(schema, runs) == [(3, "+I", r(7, None, None, "m"))]
    retract_first = [
        make_run(schema, [(1, "-U", r(4, "a", None, "q"))]),
        make_run(schema, [(2, "+I", r(1, None, "y", None))]),
    ]
    assert merged_rows(schema, retract_first) == [(2, "+I", r(-3, None, "y", None))]


def test_aggregation_retraction_refused_by_max() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("m", "INT")),
        options={"merge-engine": "aggregation", "fields.m.aggregate-function": "max"},
    )
    runs = [make_run(schema, [(1, "+I", {"k": 1, "m": 1})]), make_run(schema, [(2, "-U", {"k": 1, "m": 1})])]
    with pytest.raises(AggregationError, match="ignore-retract"):
        merged_rows(schema, runs)


def test_aggregation_remove_record_on_delete() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("s", "INT")),
        options={
            "merge-engine": "aggregation",
            "fields.s.aggregate-function": "sum",
            "aggregation.remove-record-on-delete": "true",
        },
    )
    runs = [
        make_run(schema, [(1, "+I", {"k": 1, "s": 5}), (2, "+I", {"k": 2, "s": 1})]),
        make_run(schema, [(3, "-D", {"k": 1, "s": 5}), (4, "+I", {"k": 2, "s": 2})]),
    ]
    assert merged_rows(schema, runs) == [(4, "+I", {"k": 2, "s": 3})]
    assert merged_rows(schema, runs, drop_deletes=False)[0] == (3, "-D", {"k": 1, "s": 5})


def test_aggregation_overflow_is_an_error() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("s", "INT")),
        options={"merge-engine": "aggregation", "fields.s.aggregate-function": "sum"},
    )
    runs = [
        make_run(schema, [(1, "+I", {"k": 1, "s": 2**31 - 1})]),
        make_run(schema, [(2, "+I", {"k": 1, "s": 1})]),
    ]
    with pytest.raises(AggregationError, match="overflow"):
        merged_rows(schema, runs)


def test_aggregation_sequence_field_takes_last_value() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("s", "INT"), ("ts", "INT")),
        options={
            "merge-engine": "aggregation",
            "fields.default-aggregate-function": "sum",
            "sequence.field": "ts",
        },
    )
    runs = [
        make_run(schema, [(1, "+I", {"k": 1, "s": 1, "ts": 9})]),
        make_run(schema, [(2, "+I", {"k": 1, "s": 2, "ts": 4})]),
    ]
    # ordered by ts: the ts=4 row first, then ts=9; ts itself is not summed
    assert merged_rows(schema, runs) == [(1, "+I", {"k": 1, "s": 3, "ts": 9})]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fields.v.aggregate-function": "count"}, "'count'.*no count"),
        ({"fields.v.aggregate-function": "product"}, "fields.v.aggregate-function='product'"),
        ({"fields.default-aggregate-function": "collect"}, "fields.v.aggregate-function='collect'"),
        ({"fields.v.aggregate-function": "sum"}, "does not support type STRING"),
        ({"fields.v.aggregate-function": "bool_or"}, "does not support type STRING"),
        (
            {"fields.v.ignore-retract": "true", "aggregation.remove-record-on-delete": "true"},
            "cannot both",
        ),
        ({"sequence.field": "v", "fields.v.aggregate-function": "max"}, "sequence field"),
        ({"fields.c.aggregate-function": "listagg"}, "STRING"),
    ],
)
def test_aggregation_unsupported_functions_fail_up_front(options: dict[str, str], message: str) -> None:
    columns = (("k", "BIGINT"), ("v", "STRING"), ("c", "VARCHAR(10)"))
    schema = make_schema(columns=columns, options={"merge-engine": "aggregation", **options})
    with pytest.raises(UnsupportedOperationError, match=message):
        check_merge_supported(schema)


# -- randomized differential tests -----------------------------------------------------------------------

RETRACT = ("-U", "-D")


def _grouped(runs_rows):
    by_key: dict[Any, list] = defaultdict(list)
    for rows in runs_rows:
        for item in rows:
            by_key[item[2]["k"]].append(item)
    for key in sorted(by_key):
        yield sorted(by_key[key], key=lambda it: (it[0], it[1] not in RETRACT))


def reference_partial_update_ignore_delete(runs_rows, drop_deletes):
    result = []
    for items in _grouped(runs_rows):
        if len(items) == 1:
            merged = items[0]
        else:
            state: dict[str, Any] = {}
            sequence, inserted = 0, False
            for seq, kind, row in items:
                if kind in RETRACT:
                    state = state or dict(row)
                    continue
                state = state or {name: None for name in row}
                state.update({name: value for name, value in row.items() if value is not None})
                sequence, inserted = seq, True
            merged = (sequence, "+I" if inserted else "-D", state)
        if not (drop_deletes and merged[1] in RETRACT):
            result.append(merged)
    return result


def reference_sum_aggregation(runs_rows, drop_deletes):
    result = []
    for items in _grouped(runs_rows):
        if len(items) == 1:
            merged = items[0]
        else:
            total, last = None, None
            for _, kind, row in items:
                v = row["v"]
                if kind in RETRACT:
                    total = (
                        (None if v is None else -v) if total is None else (total if v is None else total - v)
                    )
                    last = None if row["ts"] is not None else last
                else:
                    total = v if total is None else (total if v is None else total + v)
                    last = row["ts"] if row["ts"] is not None else last
            merged = (items[-1][0], "+I", {"k": items[-1][2]["k"], "v": total, "ts": last})
        if not (drop_deletes and merged[1] in RETRACT):
            result.append(merged)
    return result


@pytest.mark.parametrize(
    ("options", "reference"),
    [
        ({"merge-engine": "partial-update", "ignore-delete": "true"}, reference_partial_update_ignore_delete),
        ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}, reference_sum_aggregation),
    ],
    ids=["partial-update", "aggregation"],
)
def test_matches_reference(options, reference) -> None:
    schema = make_schema(columns=(("k", "INT"), ("v", "BIGINT"), ("ts", "INT")), options=options)
    rng = random.Random(11)
    for trial in range(5):
        universe = list(range(rng.choice([3, 30, 200])))
        sequence = iter(rng.sample(range(100_000), 3_000))
        runs_rows = []
        for _ in range(rng.choice([1, 2, 4, 6])):
            rows = []
            for k in rng.sample(universe, rng.randint(0, len(universe))):
                kind = rng.choice(["+I", "+I", "+U", "-U", "-D"])
                v = rng.choice([None, rng.randint(-50, 50)])
                rows.append((next(sequence), kind, {"k": k, "v": v, "ts": rng.choice([None, 1, 2])}))
            runs_rows.append(rows)
        runs = [make_run(schema, rows) for rows in runs_rows]
        for drop in (True, False):
            batch_rows = rng.choice([1, 4, 8192])
            actual = merged_rows(
                schema, runs, drop, batch_rows=batch_rows, input_batch_rows=rng.choice([1, 3, 500])
            )
            assert actual == reference(runs_rows, drop), (trial, drop, batch_rows)


# -- the columnar fast path equals the row-wise merge functions ------------------------------------------

RETRACTING_AGGREGATES = {
    "merge-engine": "aggregation",
    "fields.s.aggregate-function": "sum",
    "fields.lv.aggregate-function": "last_value",
    "fields.lnn.aggregate-function": "last_non_null_value",
    "fields.hi.aggregate-function": "max",
    "fields.hi.ignore-retract": "true",
    "fields.fv.aggregate-function": "first_value",
    "fields.fv.ignore-retract": "true",
    "fields.fnn.aggregate-function": "first_non_null_value",
    "fields.fnn.ignore-retract": "true",
    "fields.la.aggregate-function": "listagg",
    "fields.la.ignore-retract": "true",
    "fields.band.aggregate-function": "bool_and",
    "fields.band.ignore-retract": "true",
    "fields.bor.aggregate-function": "bool_or",
    "fields.lo.aggregate-function": "sum",
    "fields.lo.ignore-retract": "true",
    "fields.bor.ignore-retract": "true",
    "fields.d.aggregate-function": "last_value",
    "fields.d.ignore-retract": "true",
}
COLUMNAR_CASES = {
    "aggregation-retract": RETRACTING_AGGREGATES,
    "aggregation-remove-on-delete": {
        "merge-engine": "aggregation",
        "fields.s.aggregate-function": "sum",
        "aggregation.remove-record-on-delete": "true",
    },
    "aggregation": {
        "merge-engine": "aggregation",
        **{f"fields.{name}.aggregate-function": fn for name, fn in AGG_FUNCTIONS.items() if name != "d"},
        "fields.la.list-agg-delimiter": "|",
    },
    "partial-update": {"merge-engine": "partial-update"},
    "partial-update-ignore-delete": {"merge-engine": "partial-update", "ignore-delete": "true"},
}


def _random_agg_row(rng: random.Random, k: int) -> dict[str, Any]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.3 else value

    return agg(
        k,
        s=maybe(rng.randint(-1000, 1000)),
        lo=maybe(rng.randint(-5, 5)),
        hi=maybe(rng.choice(["a", "é", "b", "\U0001f600"])),
        lv=maybe(rng.choice(["x", "y"])),
        lnn=maybe(rng.choice(["x", "y"])),
        fv=maybe(rng.choice(["x", "y"])),
        fnn=maybe(rng.choice(["x", "y"])),
        la=maybe(rng.choice(["a", "", " ", "b c"])),
        band=maybe(rng.random() < 0.7),
        bor=maybe(rng.random() < 0.3),
        d=maybe(Decimal("1.50")),
    )


@pytest.mark.parametrize("case", sorted(COLUMNAR_CASES))
def test_columnar_path_equals_row_wise(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same random runs merged with and without the columnar fast path (retractions included
    where the engine takes them: those groups go row-wise in both)."""
    schema = make_schema(columns=AGG_COLUMNS, options=COLUMNAR_CASES[case])
    rng = random.Random(5)
    kinds = ["+I", "+U"] + (["-U", "-D"] if case != "partial-update" else [])
    if case == "aggregation":
        kinds = ["+I", "+U"]
    runs_rows = []
    sequence = iter(rng.sample(range(50_000), 5_000))
    for _ in range(5):
        keys = rng.sample(range(150), rng.randint(50, 150))
        runs_rows.append([(next(sequence), rng.choice(kinds), _random_agg_row(rng, k)) for k in keys])
    runs = [make_run(schema, rows) for rows in runs_rows]
    original = RowMergeEngine._merge_columnar
    merged_columnar = []

    def spy(self, *args):
        result = original(self, *args)
        merged_columnar.append(0 if result is None else result.num_rows)
        return result

    monkeypatch.setattr(RowMergeEngine, "_merge_columnar", spy)
    columnar = merged_rows(schema, runs, drop_deletes=False, batch_rows=32, input_batch_rows=20)
    assert sum(merged_columnar) > 25, "the fast path must have merged many keys"
    monkeypatch.setattr(
        RowMergeEngine, "_fast_groups", lambda self, kinds, starts: np.zeros(len(starts), bool)
    )
    row_wise = merged_rows(schema, runs, drop_deletes=False, batch_rows=32, input_batch_rows=20)
    assert len(columnar) > 100
    assert columnar == row_wise


# -- partial-update scenarios with known results (inputs and expectations from the scenarios of Paimon's
# PartialUpdateMergeFunctionTest, replayed through our merge function one row at a time) ----------------


def _replay(options: dict[str, str], width: int, steps: list[tuple]) -> None:
    """`steps`: ("+I"/"-U"/"-D", values...) adds a row; ("=", values...) checks the merged row so far."""
    columns = [(f"f{i}", "INT") for i in range(width)]
    schema = make_schema(
        columns=columns, primary_keys=("f0",), options={"merge-engine": "partial-update", **options}
    )
    function = row_merge_engine(schema, CoreOptions(schema.options)).function
    kinds = {"+I": 0, "-U": 1, "-D": 3}
    rows: list = []
    for step, (kind, *values) in enumerate(steps):
        if kind == "=":
            assert function.merge_rows(rows).values == values, f"step {step}"
        else:
            rows.append(MergeRow(kinds[kind], len(rows), values))


N = None


def test_paimon_scenario_sequence_groups_with_deletes() -> None:
    steps = [
        ("+I", 1, 1, 1, 1, 1, 1, 1), ("+I", 1, 2, 2, 2, 2, 2, N), ("=", 1, 2, 2, 2, 1, 1, 1),
        ("+I", 1, 3, 3, 1, 3, 3, 3), ("=", 1, 2, 2, 2, 3, 3, 3),
        ("-D", 1, 1, 1, 3, 1, 1, N), ("=", 1, N, N, 3, 3, 3, 3),
        ("-D", 1, 1, 1, 3, 1, 1, 4), ("=", 1, N, N, 3, N, N, 4),
        ("+I", 1, 4, 4, 4, 5, 5, 5), ("=", 1, 4, 4, 4, 5, 5, 5),
        ("-D", 1, 1, 1, 6, 1, 1, 6), ("=", 1, N, N, 6, N, N, 6),
    ]  # fmt: skip
    _replay({"fields.f3.sequence-group": "f1,f2", "fields.f6.sequence-group": "f4,f5"}, 7, steps)
    partial_delete = [
        ("+I", 1, 1, 1, 1, 1, 1, 1), ("+I", 1, 2, 2, 2, 2, 2, N), ("+I", 1, 3, 3, 1, 3, 3, 3),
        ("-D", 1, 1, 1, 3, 1, 1, N), ("=", 1, N, N, 3, 3, 3, 3),
        ("-D", 1, 1, 1, 3, 1, 1, 4), ("=", 1, 1, 1, 3, 1, 1, 4),
        ("+I", 1, 4, 4, 4, 5, 5, 5), ("=", 1, 4, 4, 4, 5, 5, 5),
        ("-D", 1, 1, 1, 6, 1, 1, 6), ("=", 1, 1, 1, 6, 1, 1, 6),
    ]  # fmt: skip
    _replay(
        {
            "fields.f3.sequence-group": "f1,f2",
            "fields.f6.sequence-group": "f4,f5",
            "partial-update.remove-record-on-sequence-group": "f6",
        },
        7,
        partial_delete,
    )


def test_paimon_scenario_multi_field_sequence_groups() -> None:
    options = {"fields.f3,f4.sequence-group": "f1,f2", "fields.f7,f8.sequence-group": "f5,f6"}
    _replay(options, 9, [("+I", 1, N, N, N, N, 1, 1, 1, 3), ("+I", 1, 2, 2, N, N, 2, 2, 1, 3),
                         ("=", 1, N, N, N, N, 2, 2, 1, 3)])  # fmt: skip
    steps = [
        ("+I", 1, 1, 1, 1, 1, 1, 1, 1, 3), ("+I", 1, 2, 2, 2, 2, 2, 1, 1, N),
        ("=", 1, 2, 2, 2, 2, 1, 1, 1, 3),
        ("+I", 1, 1, 3, 1, 3, 3, 3, 3, 2), ("=", 1, 2, 2, 2, 2, 3, 3, 3, 2),
        ("-D", 1, 1, 1, 3, 3, 1, 1, N, N), ("=", 1, N, N, 3, 3, 3, 3, 3, 2),
        ("-D", 1, 1, 1, 3, 1, 1, 1, 4, 4), ("=", 1, N, N, 3, 3, N, N, 4, 4),
        ("+I", 1, 4, 4, 4, 4, 5, 5, 5, 5), ("=", 1, 4, 4, 4, 4, 5, 5, 5, 5),
        ("-D", 1, 1, 1, 6, 1, 1, 1, 6, 1), ("=", 1, N, N, 6, 1, N, N, 6, 1),
    ]  # fmt: skip
    _replay(options, 9, steps)


def test_paimon_scenario_sequence_groups_with_aggregation() -> None:
    options = {
        "fields.f1.sequence-group": "f2,f3,f4",
        "fields.f7.sequence-group": "f6",
        "fields.f0.aggregate-function": "listagg",
        "fields.f2.aggregate-function": "sum",
        "fields.f4.aggregate-function": "last_value",
        "fields.f6.aggregate-function": "last_non_null_value",
        "fields.f4.ignore-retract": "true",
        "fields.f6.ignore-retract": "true",
    }
    steps = [
        ("+I", 1, 1, 1, 1, 1, 1, 1, 1), ("+I", 1, 2, 1, 2, 2, 2, 2, 0), ("=", 1, 2, 2, 2, 2, 2, 1, 1),
        ("+I", 1, 1, 1, 1, 1, 1, 2, 0), ("=", 1, 2, 3, 2, 2, 1, 1, 1),
        ("+I", 1, 1, -1, 1, 1, 2, 2, 0),
        ("+I", 1, 3, N, N, N, N, N, 2), ("=", 1, 3, 2, N, N, 2, 1, 2),
        ("+I", 1, 3, 1, 1, 1, 1, 1, 3), ("=", 1, 3, 3, 1, 1, 1, 1, 3),
        ("-U", 1, 3, 2, 1, 1, 1, 1, 3), ("=", 1, 3, 1, N, 1, 1, 1, 3),
        ("-D", 1, 3, 2, 1, 1, 1, 1, 3), ("=", 1, 3, -1, N, 1, 1, 1, 3),
        ("-D", 1, 2, 2, 1, 1, 1, 1, 3), ("=", 1, 3, -3, N, 1, 1, 1, 3),
    ]  # fmt: skip
    _replay(options, 8, steps)
    first_value = {
        "fields.f1.sequence-group": "f2,f3",
        "fields.f2.aggregate-function": "first_value",
        "fields.f3.aggregate-function": "last_value",
    }
    _replay(first_value, 4, [("+I", 1, 1, 1, 1), ("+I", 1, 2, 2, 2), ("=", 1, 2, 1, 2),
                             ("+I", 1, 0, 3, 3), ("=", 1, 2, 3, 2)])  # fmt: skip


@pytest.mark.parametrize(
    "options",
    [
        RETRACTING_AGGREGATES,
        {"merge-engine": "partial-update", "ignore-delete": "true"},
        {
            "merge-engine": "partial-update",
            "fields.lo.sequence-group": "s,hi",
            "fields.fv.sequence-group": "lv",
        },
        {"merge-engine": "deduplicate", "sequence.field": "lo", "sequence.field.sort-order": "descending"},
    ],
    ids=["aggregation", "partial-update", "sequence-groups", "deduplicate"],
)
def test_window_boundaries_do_not_change_results(options: dict[str, str]) -> None:
    """Streaming in windows of any size gives what one in-memory merge of all rows gives."""
    schema = make_schema(columns=AGG_COLUMNS, options=options)
    rng = random.Random(3)
    kinds = ["+I", "+U"] if "sequence-group" in str(options) else ["+I", "+U", "-U", "-D"]
    sequence = iter(rng.sample(range(50_000), 3_000))
    runs_rows = [
        [(next(sequence), rng.choice(kinds), _random_agg_row(rng, k)) for k in rng.sample(range(120), 80)]
        for _ in range(4)
    ]
    runs = [make_run(schema, rows) for rows in runs_rows]
    whole = merge_rows(pa.concat_tables(runs), schema, drop_deletes=False)
    expected = [
        (r["_SEQUENCE_NUMBER"], r["_VALUE_KIND"], {n: r[n] for n in schema.field_names()})
        for r in whole.to_pylist()
    ]
    kind_codes = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
    for batch_rows, input_rows in [(1, 1), (3, 7), (50, 2), (8192, 8192)]:
        streamed = merged_rows(
            schema, runs, drop_deletes=False, batch_rows=batch_rows, input_batch_rows=input_rows
        )
        assert [(seq, kind_codes[kind], row) for seq, kind, row in streamed] == expected, (
            batch_rows,
            input_rows,
        )
