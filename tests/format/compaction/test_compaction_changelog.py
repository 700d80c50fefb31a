"""The changelog of a whole-bucket compaction (paimon_format.compaction.changelog), on tiny in-memory
runs: hand-made cases per producer and engine, and randomized runs checked against a per-key
reference of Paimon's wrapper rules written here (LookupChangelogMergeFunctionWrapper,
FirstRowMergeFunctionWrapper, FullChangelogMergeFunctionWrapper)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from paimon_format.compaction.changelog import ChangelogSink, changelog_rule
from paimon_format.merge.sorted_runs import merge_sorted_runs
from paimon_format.model.options import CoreOptions
from tests.support.merge_runs import KIND_NAMES, make_run, make_schema

TOP = 5
COLUMNS = (("k", "INT"), ("a", "BIGINT"), ("b", "STRING"))

ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {
        "merge-engine": "aggregation",
        "fields.a.aggregate-function": "sum",
        "fields.b.aggregate-function": "last_non_null_value",
    },
    "first-row": {"merge-engine": "first-row"},
}


class _Collect:
    """Stands in for the changelog BucketWriter."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []

    def write_key_values(self, rows: pa.Table) -> None:
        self.tables.append(rows)


def row(k: int, a: Any = None, b: Any = None) -> dict[str, Any]:
    return {"k": k, "a": a, "b": b}


def compact(schema, leveled_runs, batch_rows: int = 8192, merge_single_retractions: bool = False):
    """Merge `(level, [(seq, kind, row)])` runs (oldest first) as a whole-bucket compaction does:
    (changelog as sorted (kind, seq, row) triples, merged output as {k: (seq, row)})."""
    options = CoreOptions(schema.options)
    rule = changelog_rule(schema, options, TOP)
    writer = _Collect()
    sink = ChangelogSink(rule, schema, options, writer) if rule else None
    runs = [make_run(schema, rows) for _level, rows in leveled_runs]
    merged = merge_sorted_runs(
        [[run.slice(i, batch_rows) for i in range(0, run.num_rows, batch_rows)] for run in runs],
        schema,
        options,
        drop_deletes=True,
        batch_rows=batch_rows,
        run_levels=[level for level, _rows in leveled_runs],
        on_window=sink,
        merge_single_retractions=merge_single_retractions,
    )
    names = schema.field_names()
    output = {
        r["k"]: (r["_SEQUENCE_NUMBER"], {n: r[n] for n in names}) for b in merged for r in b.to_pylist()
    }
    changelog = [
        (KIND_NAMES[r["_VALUE_KIND"]], r["_SEQUENCE_NUMBER"], {n: r[n] for n in names})
        for t in writer.tables
        for r in t.to_pylist()
    ]
    return sorted(changelog, key=_order), output


def _order(item: tuple[str, int, dict]) -> tuple:
    kind, seq, values = item
    return (values["k"], kind in ("+I", "+U"), seq)


def schema_of(engine: str, producer: str, **extra: str):
    return make_schema(columns=COLUMNS, options={**ENGINES[engine], "changelog-producer": producer, **extra})


# -- hand-made cases, each expectation the rule applied to the inputs --------------------------------------


def test_lookup_deduplicate_changes_only_keys_with_level0_rows() -> None:
    schema = schema_of("deduplicate", "lookup")
    runs = [
        (TOP, [(1, "+I", row(1, 1, "x")), (2, "+I", row(2, 2, "y")), (3, "+I", row(3, 3, "z"))]),
        (2, [(4, "+I", row(1, 10, "x2"))]),  # key 1's newest upper row: the "before"
        (0, [(5, "+I", row(1, 11, "x3")), (6, "-D", row(2)), (7, "+I", row(4, 4, "new"))]),
    ]
    changelog, output = compact(schema, runs)
    assert changelog == [
        ("-U", 4, row(1, 10, "x2")),  # before: level 2, not the older top-level row
        ("+U", 5, row(1, 11, "x3")),
        ("-D", 2, row(2, 2, "y")),
        ("+I", 7, row(4, 4, "new")),
    ]  # key 3 has no level-0 row: no changelog
    assert output == {1: (5, row(1, 11, "x3")), 3: (3, row(3, 3, "z")), 4: (7, row(4, 4, "new"))}


def test_lookup_aggregation_merges_level0_with_the_newest_upper_row_only() -> None:
    """The newest upper row already holds the older ones (Paimon's lookup compaction wrote it so):
    merging all of them would count key 1's 5 twice, in the data and in the changelog."""
    schema = schema_of("aggregation", "lookup")
    runs = [
        (TOP, [(1, "+I", row(1, 5, "a"))]),
        (1, [(2, "+I", row(1, 7, None))]),  # 5 + 2, written by a lookup compaction
        (0, [(3, "+I", row(1, 1, "b")), (4, "+I", row(2, 3, None))]),
    ]
    changelog, output = compact(schema, runs)
    assert output == {1: (3, row(1, 8, "b")), 2: (4, row(2, 3, None))}
    assert changelog == [("-U", 2, row(1, 7, None)), ("+U", 3, row(1, 8, "b")), ("+I", 4, row(2, 3, None))]


def test_lookup_partial_update() -> None:
    schema = schema_of("partial-update", "lookup")
    runs = [
        (TOP, [(1, "+I", row(1, 5, "a"))]),
        (0, [(2, "+I", row(1, None, "b"))]),
        (0, [(3, "+I", row(1, 6))]),
    ]
    changelog, output = compact(schema, runs)
    assert output == {1: (3, row(1, 6, "b"))}
    assert changelog == [("-U", 1, row(1, 5, "a")), ("+U", 3, row(1, 6, "b"))]


def test_lookup_first_row_inserts_new_keys_only() -> None:
    schema = schema_of("first-row", "lookup")
    runs = [
        (TOP, [(1, "+I", row(1, 1, "old"))]),
        (0, [(2, "+I", row(1, 2, "later")), (3, "+I", row(2, 3, "first"))]),
        (0, [(4, "+I", row(2, 4, "second"))]),
    ]
    changelog, output = compact(schema, runs)
    assert changelog == [("+I", 3, row(2, 3, "first"))]
    assert output == {1: (1, row(1, 1, "old")), 2: (3, row(2, 3, "first"))}


def test_full_compaction_diffs_against_the_top_level() -> None:
    schema = schema_of("deduplicate", "full-compaction")
    runs = [
        (TOP, [(1, "+I", row(1, 1)), (2, "+I", row(2, 2)), (3, "+I", row(3, 3))]),
        (3, [(4, "+I", row(1, 10)), (5, "+I", row(5, 5))]),  # not top: its rows are changes too
        (0, [(6, "-D", row(2)), (7, "+I", row(6, 6)), (8, "-D", row(7))]),
    ]
    changelog, output = compact(schema, runs)
    assert changelog == [
        ("-U", 1, row(1, 1)),
        ("+U", 4, row(1, 10)),
        ("-D", 2, row(2, 2)),
        ("+I", 5, row(5, 5)),  # met once, not at the top
        ("+I", 7, row(6, 6)),
    ]  # key 3: only at the top; key 7: a lone delete
    assert set(output) == {1, 3, 5, 6}


def test_row_deduplicate_drops_unchanged_updates_and_honours_ignored_fields() -> None:
    runs = [(TOP, [(1, "+I", row(1, 1, "x")), (2, "+I", row(2, 2, "y"))]), (0, [(3, "+I", row(1, 1, "x"))])]
    runs[1][1].append((4, "+I", row(2, 2, "changed")))
    plain, _ = compact(schema_of("deduplicate", "lookup"), runs)
    assert [kind for kind, _seq, _row in plain] == ["-U", "+U", "-U", "+U"]
    dedup, _ = compact(
        schema_of("deduplicate", "lookup", **{"changelog-producer.row-deduplicate": "true"}), runs
    )
    assert dedup == [("-U", 2, row(2, 2, "y")), ("+U", 4, row(2, 2, "changed"))]
    ignoring = schema_of(
        "deduplicate",
        "full-compaction",
        **{
            "changelog-producer.row-deduplicate": "true",
            "changelog-producer.row-deduplicate-ignore-fields": "b",
        },
    )
    assert compact(ignoring, runs)[0] == []


def test_no_changelog_without_a_compaction_producer() -> None:
    for producer in ("none", "input"):
        assert changelog_rule(schema_of("deduplicate", producer), CoreOptions({}), TOP) is None
    with pytest.raises(ValueError, match="no column 'nope'"):
        schema = schema_of(
            "deduplicate",
            "lookup",
            **{
                "changelog-producer.row-deduplicate": "true",
                "changelog-producer.row-deduplicate-ignore-fields": "nope",
            },
        )
        changelog_rule(schema, CoreOptions(schema.options), TOP)


# -- randomized runs against a per-key reference of the rules ----------------------------------------------


def _merge_reference(engine: str, rows: list[tuple]) -> tuple | None:
    """One key's merge result (seq, kind, row) of rows (level, seq, kind, row) in sequence order."""
    if len(rows) == 1:
        return rows[0][1:]
    if engine == "deduplicate":
        return rows[-1][1:]
    if engine == "first-row":
        return rows[0][1:]
    last = rows[-1]
    values = dict(rows[0][3])
    for _level, _seq, _kind, r in rows[1:]:
        for name in ("a", "b"):
            if engine == "aggregation" and name == "a":
                values["a"] = (
                    (values["a"] or 0) + (r["a"] or 0) if (values["a"], r["a"]) != (None, None) else None
                )
            elif r[name] is not None:
                values[name] = r[name]
    return last[1], "+I", values


def _reference(engine: str, producer: str, rows: list[tuple]) -> tuple[list[tuple], tuple | None]:
    """(changelog, written row) of one key's rows (level, seq, kind, row), by Paimon's wrappers."""
    rows = sorted(rows, key=lambda r: r[1])
    upper = [r for r in rows if r[0] > 0]
    level0 = [r for r in rows if r[0] == 0]
    merged = rows
    if producer == "lookup" and engine != "first-row" and upper:  # LookupMergeFunction: newest upper only
        merged = sorted(level0 + [upper[-1]], key=lambda r: r[1])
    after = _merge_reference(engine, merged)
    after_add = after is not None and after[1] in ("+I", "+U")
    changes: list[tuple] = []
    if producer == "lookup" and engine == "first-row":
        if after_add and not upper:
            changes.append(("+I", after[0], after[2]))
    elif producer == "lookup":
        before = upper[-1] if upper else None
        if level0:
            if before is None or before[2] in ("-U", "-D"):
                if after_add:
                    changes.append(("+I", after[0], after[2]))
            elif not after_add:
                changes.append(("-D", before[1], before[3]))
            else:
                changes += [("-U", before[1], before[3]), ("+U", after[0], after[2])]
    else:
        top = [r for r in rows if r[0] == TOP]
        if not top:
            if after_add:
                changes.append(("+I", after[0], after[2]))
        elif len(rows) > 1:
            if not after_add:
                changes.append(("-D", top[0][1], top[0][3]))
            else:
                changes += [("-U", top[0][1], top[0][3]), ("+U", after[0], after[2])]
    return changes, (after[0], after[2]) if after_add else None


@pytest.mark.parametrize(
    "engine, producer",
    [(e, "lookup") for e in ENGINES] + [(e, "full-compaction") for e in ("deduplicate", "aggregation")],
)
def test_random_runs_follow_the_rules(engine: str, producer: str) -> None:
    rng = random.Random(f"{engine}-{producer}")
    schema = schema_of(engine, producer)
    for _case in range(12):
        seq = iter(range(1, 10_000))
        levels = [TOP, 3, 1, 0, 0, 0][: rng.randint(2, 6)]
        keys_by_key: dict[int, list[tuple]] = {}
        runs = []
        for level in levels:
            rows = []
            for k in rng.sample(range(20), rng.randint(1, 12)):
                kind = "-D" if engine == "deduplicate" and level == 0 and rng.random() < 0.2 else "+I"
                r = row(k, rng.choice([None, rng.randint(1, 9)]), rng.choice([None, "p", "q"]))
                if kind == "-D":
                    r = row(k)
                item = (next(seq), kind, r)
                rows.append(item)
                keys_by_key.setdefault(k, []).append((level, *item))
            runs.append((level, rows))
        changelog, output = compact(schema, runs, batch_rows=rng.choice([2, 3, 64]))
        expected_changelog, expected_output = [], {}
        for k, rows in keys_by_key.items():
            changes, written = _reference(engine, producer, rows)
            expected_changelog += changes
            if written is not None:
                expected_output[k] = written
        assert changelog == sorted(expected_changelog, key=_order)
        assert output == expected_output


def test_a_key_whose_merge_yields_nothing_gets_no_changelog() -> None:
    """first-row with ignore-delete: a key with only retractions merges into nothing; the keys around
    it keep their own changelog (the merge result is matched to its key, not to its position)."""
    schema = schema_of("first-row", "lookup", **{"ignore-delete": "true"})
    runs = [
        (0, [(1, "+I", row(1, 1)), (2, "-D", row(2)), (3, "+I", row(3, 3))]),
        (0, [(4, "-D", row(2)), (5, "+I", row(4, 4))]),
    ]
    changelog, output = compact(schema, runs)
    assert changelog == [("+I", 1, row(1, 1)), ("+I", 3, row(3, 3)), ("+I", 5, row(4, 4))]
    assert output == {1: (1, row(1, 1)), 3: (3, row(3, 3)), 4: (5, row(4, 4))}


def test_lookup_aggregation_merges_a_lone_retraction_through_the_function() -> None:
    """Paimon's lookup compaction sends every key through the merge function: a lone -D under sum
    becomes an insert of the negated value (and its +I changelog); without level-0 files, or with the
    full-compaction producer, a lone row passes unchanged (a retraction is then dropped)."""
    schema = schema_of("aggregation", "lookup")
    runs = [(TOP, [(1, "+I", row(1, 5, "a"))]), (0, [(2, "-D", row(2, 4, "x"))])]
    changelog, output = compact(schema, runs, merge_single_retractions=True)
    assert output == {1: (1, row(1, 5, "a")), 2: (2, row(2, -4, None))}
    assert changelog == [("+I", 2, row(2, -4, None))]
    changelog, output = compact(schema, runs)
    assert output == {1: (1, row(1, 5, "a"))} and changelog == []
