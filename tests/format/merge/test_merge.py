"""merge_sorted_runs: window merge order, deduplicate and first-row engines, streaming bounds.

Hand-made runs with known results, plus randomized differential tests against `reference_merge`,
an obviously-correct dict-based merge written here from Paimon's rules (sort each key's rows by
sequence.field, _SEQUENCE_NUMBER, retract-before-add; a key met once passes unchanged).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pytest

from paimon_format.errors import InvalidTableStateError, UnsupportedOperationError
from paimon_format.merge.interface import MergeFunctionError
from paimon_format.merge.sorted_runs import merge_rows, merge_sorted_runs
from paimon_format.merge.table_engine import check_merge_supported
from tests.support.merge_runs import PullRecorder, make_run, make_schema, merged_rows, sort_key

RETRACT = ("-U", "-D")


def row(k: Any, v: Any = None, **more: Any) -> dict[str, Any]:
    return {"k": k, "v": v, **more}


# -- deduplicate ---------------------------------------------------------------------------------------


def test_deduplicate_last_sequence_wins_across_runs() -> None:
    schema = make_schema()
    old = make_run(schema, [(1, "+I", row(1, "a1")), (2, "+I", row(2, "b1")), (3, "+I", row(5, "e1"))])
    mid = make_run(schema, [(10, "+I", row(2, "b2")), (11, "+I", row(3, "c2"))])
    new = make_run(schema, [(20, "+I", row(1, "a3")), (21, "+U", row(3, "c3")), (22, "+I", row(4, "d3"))])
    assert merged_rows(schema, [old, mid, new]) == [
        (20, "+I", row(1, "a3")),
        (10, "+I", row(2, "b2")),
        (21, "+U", row(3, "c3")),
        (22, "+I", row(4, "d3")),
        (3, "+I", row(5, "e1")),
    ]


def test_deduplicate_sequence_number_not_run_order_decides() -> None:
    """Runs are oldest first by convention, but the sequence number is what orders rows."""
    schema = make_schema()
    first = make_run(schema, [(9, "+I", row(1, "newer"))])
    second = make_run(schema, [(4, "+I", row(1, "older"))])
    assert merged_rows(schema, [first, second]) == [(9, "+I", row(1, "newer"))]


def test_deduplicate_retraction_dropped_or_kept() -> None:
    schema = make_schema()
    base = make_run(schema, [(1, "+I", row(1, "a")), (2, "+I", row(2, "b"))])
    deletes = make_run(schema, [(5, "-D", row(1, "a")), (6, "-U", row(3, "c"))])
    assert merged_rows(schema, [base, deletes]) == [(2, "+I", row(2, "b"))]
    assert merged_rows(schema, [base, deletes], drop_deletes=False) == [
        (5, "-D", row(1, "a")),
        (2, "+I", row(2, "b")),
        (6, "-U", row(3, "c")),
    ]


def test_deduplicate_insert_after_delete_resurrects() -> None:
    schema = make_schema()
    runs = [
        make_run(schema, [(1, "+I", row(1, "a"))]),
        make_run(schema, [(2, "-D", row(1, "a"))]),
        make_run(schema, [(3, "+I", row(1, "again"))]),
    ]
    assert merged_rows(schema, runs) == [(3, "+I", row(1, "again"))]


def test_deduplicate_ignore_delete() -> None:
    schema = make_schema(options={"ignore-delete": "true"})
    base = make_run(schema, [(1, "+I", row(1, "a")), (2, "-D", row(2, "b")), (3, "-D", row(3, "c"))])
    deletes = make_run(schema, [(5, "-D", row(1, "a")), (6, "-U", row(3, "c"))])
    # key 1: the delete is skipped; key 2: a lone row passes unchanged (dropped as a retraction at the
    # top level); key 3: only retractions -> Paimon's merge function yields nothing, even when kept
    assert merged_rows(schema, [base, deletes]) == [(1, "+I", row(1, "a"))]
    assert merged_rows(schema, [base, deletes], drop_deletes=False) == [
        (1, "+I", row(1, "a")),
        (2, "-D", row(2, "b")),
    ]


def test_deduplicate_ignore_delete_fallback_key() -> None:
    schema = make_schema(options={"deduplicate.ignore-delete": "true"})
    runs = [make_run(schema, [(1, "+I", row(1, "a"))]), make_run(schema, [(2, "-D", row(1, "a"))])]
    assert merged_rows(schema, runs) == [(1, "+I", row(1, "a"))]


def test_equal_sequence_retract_sorts_before_add() -> None:
    schema = make_schema()
    runs = [make_run(schema, [(7, "+U", row(1, "add"))]), make_run(schema, [(7, "-U", row(1, "retract"))])]
    assert merged_rows(schema, runs, drop_deletes=False) == [(7, "+U", row(1, "add"))]


@pytest.mark.parametrize(
    ("order", "expected"),
    [("ascending", (1, "+I", row(1, "ts9", ts=9))), ("descending", (2, "+I", row(1, "null", ts=None)))],
)
def test_sequence_field_orders_before_sequence_number(order: str, expected: tuple) -> None:
    """Null sequence fields sort first in both directions (Java's comparator: nulls first)."""
    schema = make_schema(
        columns=(("k", "INT"), ("v", "STRING"), ("ts", "BIGINT")),
        options={"sequence.field": "ts", "sequence.field.sort-order": order},
    )
    runs = [
        make_run(schema, [(1, "+I", row(1, "ts9", ts=9))]),
        make_run(schema, [(2, "+I", row(1, "null", ts=None))]),
        make_run(schema, [(3, "+I", row(1, "ts5", ts=5))]),
    ]
    if order == "descending":
        expected = (3, "+I", row(1, "ts5", ts=5))  # descending: the smallest non-null value is "newest"
    assert merged_rows(schema, runs) == [expected]


def test_string_keys_ordered_by_utf8_bytes() -> None:
    """U+FFFF < U+1F600 in UTF-8 (and code points), but not in UTF-16: Paimon compares bytes."""
    schema = make_schema(columns=(("k", "STRING"), ("v", "STRING")))
    keys = ["a", "z", "é", "\uffff", "\U0001f600", "ab", ""]
    runs = [
        make_run(schema, [(i, "+I", row(k, "old")) for i, k in enumerate(keys)]),
        make_run(schema, [(100 + i, "+I", row(k, "new")) for i, k in enumerate(keys[::2])]),
    ]
    result = merged_rows(schema, runs, batch_rows=2, input_batch_rows=2)
    assert [r[2]["k"] for r in result] == sorted(keys, key=lambda k: k.encode())
    assert {r[2]["k"]: r[2]["v"] for r in result} == {k: "new" if k in keys[::2] else "old" for k in keys}


def test_composite_key_and_partition_columns() -> None:
    schema = make_schema(
        columns=(("dt", "STRING"), ("a", "INT"), ("b", "STRING"), ("v", "STRING")),
        primary_keys=("dt", "a", "b"),
        partition_keys=("dt",),
    )
    runs = [
        make_run(
            schema,
            [
                (1, "+I", {"dt": "d", "a": 1, "b": "x", "v": "1"}),
                (2, "+I", {"dt": "d", "a": 2, "b": "a", "v": "2"}),
            ],
        ),
        make_run(
            schema,
            [
                (3, "+I", {"dt": "d", "a": 1, "b": "x", "v": "3"}),
                (4, "+I", {"dt": "d", "a": 1, "b": "y", "v": "4"}),
            ],
        ),
    ]
    result = merged_rows(schema, runs)
    assert [(r[2]["a"], r[2]["b"], r[2]["v"]) for r in result] == [
        (1, "x", "3"),
        (1, "y", "4"),
        (2, "a", "2"),
    ]


def test_empty_runs_and_no_runs() -> None:
    schema = make_schema()
    empty = make_run(schema, [])
    assert merged_rows(schema, []) == []
    assert merged_rows(schema, [empty, empty]) == []
    one = make_run(schema, [(1, "+I", row(1, "a"))])
    assert merged_rows(schema, [empty, one]) == [(1, "+I", row(1, "a"))]
    assert list(merge_sorted_runs([[], iter(())], schema, drop_deletes=False)) == []


def test_input_schema_metadata_and_column_order_are_tolerated() -> None:
    schema = make_schema()
    run = make_run(schema, [(1, "+I", row(1, "a")), (2, "+I", row(2, "b"))])
    plain = pa.table({name: run.column(name) for name in reversed(run.column_names)})
    result = list(merge_sorted_runs([[plain]], schema, drop_deletes=True))
    assert pa.concat_tables([pa.Table.from_batches([b]) for b in result]).equals(run)


# -- first-row -------------------------------------------------------------------------------------------


def test_first_row_keeps_lowest_sequence() -> None:
    schema = make_schema(options={"merge-engine": "first-row"})
    runs = [
        make_run(schema, [(5, "+I", row(1, "later")), (6, "+I", row(2, "only"))]),
        make_run(schema, [(2, "+I", row(1, "first")), (9, "+I", row(3, "x"))]),
        make_run(schema, [(10, "+I", row(3, "y"))]),
    ]
    assert merged_rows(schema, runs) == [
        (2, "+I", row(1, "first")),
        (6, "+I", row(2, "only")),
        (9, "+I", row(3, "x")),
    ]


def test_first_row_refuses_retraction_unless_ignored() -> None:
    schema = make_schema(options={"merge-engine": "first-row"})
    runs = [make_run(schema, [(1, "+I", row(1, "a"))]), make_run(schema, [(2, "-D", row(1, "a"))])]
    with pytest.raises(MergeFunctionError, match="ignore-delete"):
        merged_rows(schema, runs)
    lone = [make_run(schema, [(2, "-D", row(1, "a"))])]
    assert merged_rows(schema, lone, drop_deletes=False) == [(2, "-D", row(1, "a"))]
    ignoring = make_schema(options={"merge-engine": "first-row", "first-row.ignore-delete": "true"})
    runs = [
        make_run(ignoring, [(1, "-D", row(1, "a")), (3, "-U", row(2, "b")), (4, "-D", row(3, "c"))]),
        make_run(ignoring, [(2, "+I", row(1, "b")), (5, "-D", row(3, "c"))]),
    ]
    assert merged_rows(ignoring, runs, drop_deletes=False) == [(2, "+I", row(1, "b")), (3, "-U", row(2, "b"))]


def test_check_merge_supported_rejects_bad_options() -> None:
    with pytest.raises(UnsupportedOperationError, match="first-row"):
        check_merge_supported(
            make_schema(
                columns=(("k", "INT"), ("v", "STRING"), ("ts", "INT")),
                options={"merge-engine": "first-row", "sequence.field": "ts"},
            )
        )
    with pytest.raises(UnsupportedOperationError, match="ignore-delete"):
        check_merge_supported(make_schema(options={"ignore-delete": "maybe"}))
    with pytest.raises(UnsupportedOperationError, match="primary-key"):
        check_merge_supported(make_schema(primary_keys=()))


# -- streaming -------------------------------------------------------------------------------------------


def test_runs_are_pulled_lazily() -> None:
    """The first output batch needs ~batch_rows rows per run, not whole runs."""
    schema = make_schema()
    batch_rows = 64
    recorders = []
    for r in range(4):
        run = make_run(schema, [(r * 10_000 + i, "+I", row(i * 4 + r % 3, f"r{r}")) for i in range(2_000)])
        recorders.append(PullRecorder(run, rows_per_batch=10))
    stream = merge_sorted_runs(recorders, schema, drop_deletes=True, batch_rows=batch_rows)
    first = next(stream)
    assert 0 < first.num_rows <= batch_rows
    assert all(rec.pulled <= 4 * batch_rows for rec in recorders), [rec.pulled for rec in recorders]
    rest = sum(b.num_rows for b in stream)
    assert all(rec.pulled == 2_000 for rec in recorders)
    expected_keys = {i * 4 + r % 3 for r in range(4) for i in range(2_000)}
    assert first.num_rows + rest == len(expected_keys)


def test_disjoint_runs_stay_bounded() -> None:
    """A run entirely above the others is not read ahead while the lower run is merged."""
    schema = make_schema()
    low = PullRecorder(make_run(schema, [(i, "+I", row(i, "low")) for i in range(1_000)]), 7)
    high = PullRecorder(make_run(schema, [(5_000 + i, "+I", row(10_000 + i, "hi")) for i in range(1_000)]), 7)
    stream = merge_sorted_runs([low, high], schema, drop_deletes=True, batch_rows=50)
    for _ in range(5):
        batch = next(stream)
        assert batch.column("v").to_pylist() == ["low"] * batch.num_rows
    assert high.pulled <= 50 + 7
    assert sum(b.num_rows for b in stream) == 2_000 - 5 * 50


# -- randomized differential tests -----------------------------------------------------------------------


def _order_value(value: Any, descending: bool) -> tuple:
    if value is None:
        return (0, 0)
    return (1, -value if descending else value)


def reference_merge(schema, runs_rows, drop_deletes: bool) -> list[tuple[int, str, dict[str, Any]]]:
    """Dict-based merge by Paimon's rules for deduplicate and first-row."""
    options = schema.options
    engine = options.get("merge-engine", "deduplicate")
    ignore = options.get("ignore-delete") == "true"
    seq_fields = [f for f in options.get("sequence.field", "").split(",") if f]
    descending = options.get("sequence.field.sort-order") == "descending"
    by_key: dict[tuple, list] = defaultdict(list)
    for rows in runs_rows:
        for item in rows:
            by_key[sort_key(schema, item[2])].append(item)
    result = []
    for key in sorted(by_key):
        items = by_key[key]
        items.sort(
            key=lambda it: (
                [_order_value(it[2][f], descending) for f in seq_fields] if engine != "first-row" else [],
                it[0],
                it[1] not in RETRACT,
            )
        )
        if len(items) == 1:
            winner = items[0]
        else:
            if engine == "first-row" and not ignore and any(it[1] in RETRACT for it in items):
                raise AssertionError("reference: first-row met a retraction")
            candidates = [it for it in items if not (ignore and it[1] in RETRACT)]
            if not candidates:
                continue
            winner = candidates[0] if engine == "first-row" else candidates[-1]
        if drop_deletes and winner[1] in RETRACT:
            continue
        result.append(winner)
    return result


def _random_key(rng: random.Random, kind: str, i: int) -> dict[str, Any]:
    if kind == "int":
        return {"k": i}
    if kind == "string":
        return {"k": "".join(rng.choice("aZé\U0001f600\uffff0") for _ in range(i % 4)) + str(i)}
    return {"k": i % 7, "s": str(i // 7)}


KEY_SCHEMAS = {
    "int": ((("k", "BIGINT"), ("v", "INT"), ("ts", "INT")), ("k",)),
    "string": ((("k", "STRING"), ("v", "INT"), ("ts", "INT")), ("k",)),
    "composite": ((("k", "INT"), ("s", "STRING"), ("v", "INT"), ("ts", "INT")), ("k", "s")),
}

ENGINE_OPTIONS = [
    {},
    {"ignore-delete": "true"},
    {"sequence.field": "ts"},
    {"sequence.field": "ts", "sequence.field.sort-order": "descending"},
    {"merge-engine": "first-row", "ignore-delete": "true"},
]


@pytest.mark.parametrize("key_kind", sorted(KEY_SCHEMAS))
@pytest.mark.parametrize(
    "options", ENGINE_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default"
)
def test_matches_reference(key_kind: str, options: dict[str, str]) -> None:
    columns, keys = KEY_SCHEMAS[key_kind]
    schema = make_schema(columns=columns, primary_keys=keys, options=options)
    rng = random.Random(hash((key_kind, tuple(sorted(options.items())))) & 0xFFFF)
    for trial in range(4):
        num_runs = rng.choice([1, 2, 3, 7])
        universe = [_random_key(rng, key_kind, i) for i in range(rng.choice([5, 40, 300]))]
        sequence = iter(rng.sample(range(100_000), 5_000))
        runs_rows = []
        for _ in range(num_runs):
            chosen = rng.sample(universe, rng.randint(0, len(universe)))
            rows = []
            for key in chosen:
                kind = rng.choice(["+I", "+I", "+U", "-U", "-D"])
                ts = rng.choice([None, 1, 2, 3])
                rows.append((next(sequence), kind, {**key, "v": rng.randint(0, 9), "ts": ts}))
            runs_rows.append(rows)
        runs = [make_run(schema, rows) for rows in runs_rows]
        for drop in (True, False):
            expected = reference_merge(schema, runs_rows, drop)
            batch_rows = rng.choice([1, 5, 16, 8192]) if len(universe) < 100 else rng.choice([16, 8192])
            input_rows = rng.choice([1, 2, 5, 1000])
            actual = merged_rows(schema, runs, drop, batch_rows=batch_rows, input_batch_rows=input_rows)
            assert actual == expected, (trial, drop, batch_rows, input_rows)


def test_thin_mode_keys_come_from_value_columns() -> None:
    schema = make_schema(options={"data-file.thin-mode": "true"})
    layout_names = ["_SEQUENCE_NUMBER", "_VALUE_KIND", "k", "v"]
    runs = [
        pa.table({"_SEQUENCE_NUMBER": [1, 2], "_VALUE_KIND": [0, 0], "k": [1, 2], "v": ["a", "b"]}),
        pa.table({"_SEQUENCE_NUMBER": [3], "_VALUE_KIND": [0], "k": [2], "v": ["c"]}),
    ]
    runs = [run.cast(pa.schema([(n, run.schema.field(n).type) for n in layout_names])) for run in runs]
    out = pa.Table.from_batches(list(merge_sorted_runs([[r] for r in runs], schema, drop_deletes=True)))
    assert out.column_names == layout_names
    assert out.select(["k", "v", "_SEQUENCE_NUMBER"]).to_pylist() == [
        {"k": 1, "v": "a", "_SEQUENCE_NUMBER": 1},
        {"k": 2, "v": "c", "_SEQUENCE_NUMBER": 3},
    ]


def test_nullable_primary_key_groups_nulls_together() -> None:
    schema = make_schema(
        columns=(("k", "INT"), ("s", "STRING"), ("v", "STRING")),
        primary_keys=("k", "s"),
        options={"primary-key.nullable": "true"},
    )
    layout = pa.schema(
        [("_KEY_k", pa.int32()), ("_KEY_s", pa.string()), ("_SEQUENCE_NUMBER", pa.int64()),
         ("_VALUE_KIND", pa.int8()), ("k", pa.int32()), ("s", pa.string()), ("v", pa.string())]
    )  # fmt: skip

    def run(rows):
        return [pa.Table.from_pylist(
            [{"_KEY_k": k, "_KEY_s": s, "_SEQUENCE_NUMBER": q, "_VALUE_KIND": 0, "k": k, "s": s, "v": v}
             for q, k, s, v in rows], schema=layout)]  # fmt: skip

    runs = [run([(1, None, None, "a"), (2, 1, None, "b")]), run([(3, None, None, "c"), (4, 1, "x", "d")])]
    out = pa.Table.from_batches(list(merge_sorted_runs(runs, schema, drop_deletes=True, batch_rows=1)))
    assert out.select(["k", "s", "v"]).to_pylist() == [
        {"k": None, "s": None, "v": "c"},
        {"k": 1, "s": None, "v": "b"},
        {"k": 1, "s": "x", "v": "d"},
    ]


def test_merge_rows_of_one_unsorted_buffer() -> None:
    """merge_rows (the writer's buffer merge) equals merging the same rows as one-row runs."""
    schema = make_schema(options={"ignore-delete": "true"})
    items = [(5, "+I", row(3, "c")), (1, "+I", row(1, "a")), (7, "-D", row(1, "a")), (2, "+I", row(3, "d"))]
    one_table = pa.concat_tables([make_run(schema, [item]) for item in items])
    merged = merge_rows(one_table, schema, drop_deletes=False)
    expected = merged_rows(schema, [make_run(schema, [item]) for item in items], drop_deletes=False)
    assert [(r["_SEQUENCE_NUMBER"], r["v"]) for r in merged.to_pylist()] == [(1, "a"), (5, "c")]
    assert [(seq, r["v"]) for seq, _, r in expected] == [(1, "a"), (5, "c")]


@pytest.mark.parametrize("bad_keys", [[1, 3, 2], [1, 2, 2]], ids=["unsorted", "repeated"])
def test_a_run_out_of_key_order_is_refused(bad_keys: list[int]) -> None:
    """Also across batch boundaries (input batches of one row)."""
    schema = make_schema()
    good = make_run(schema, [(10 + i, "+I", row(k, "x")) for i, k in enumerate([1, 2, 3])])
    bad = good.set_column(0, "_KEY_k", pa.array(bad_keys, pa.int64()))
    with pytest.raises(InvalidTableStateError, match="run 1 .* not sorted"):
        merged_rows(schema, [good, bad], input_batch_rows=1)


def test_a_run_missing_a_layout_column_is_refused() -> None:
    schema = make_schema()
    run = make_run(schema, [(1, "+I", row(1, "a"))]).drop_columns(["v"])
    with pytest.raises(InvalidTableStateError, match="no column 'v'"):
        merged_rows(schema, [run])
