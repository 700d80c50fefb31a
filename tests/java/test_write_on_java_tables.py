"""Our write job appending to every Java-written fixture table (issue 16): exit 0 and Java reads the
latest with our rows merged by the table's engine (and the changelog the table's producer owes),
every older snapshot, tag and branch as before."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

import pytest

from tests.java.helpers import assert_reads_kept, run_job
from tests.java.oracle import Row, sort_key
from tests.java.tables import DAY1, DAY2, REGIONS, JavaTable, record_reads

pytestmark = pytest.mark.java


def _by_key(rows: list[Row], key: tuple[str, ...]) -> dict[tuple, Row]:
    return {tuple(row[k] for k in key): row for row in rows}


def _pk_changelog_case() -> tuple[list[Row], str]:
    rows = [
        {"id": 3, "dt": DAY1, "region": REGIONS[1], "v": "ours", "n": 33},  # an update
        {"id": 500, "dt": DAY2, "region": REGIONS[0], "v": "first", "n": 1},  # new, twice in one write:
        {"id": 500, "dt": DAY2, "region": REGIONS[0], "v": "second", "n": 2},  # the last one wins
    ]
    return rows, "id long, dt date, region string, v string, n long"


def _dedup(before: list[Row], ours: list[Row], key: tuple[str, ...]) -> list[Row]:
    merged = _by_key(before, key)
    for row in ours:
        merged[tuple(row[k] for k in key)] = row
    return sorted(merged.values(), key=sort_key)


def _partial_update(before: list[Row], ours: list[Row]) -> list[Row]:
    merged = _by_key(before, ("k",))
    for row in ours:
        old = merged.get((row["k"],), {})
        merged[(row["k"],)] = {c: row[c] if row[c] is not None else old.get(c) for c in row}
    return sorted(merged.values(), key=sort_key)


def _aggregation(before: list[Row], ours: list[Row]) -> list[Row]:
    """sum(a), last_non_null_value(b), max(c), as the fixture declares."""
    merged = _by_key(before, ("k",))
    for row in ours:
        old = merged.get((row["k"],))
        if old is None:
            merged[(row["k"],)] = row
            continue
        merged[(row["k"],)] = {
            "k": row["k"],
            "a": None if old["a"] is None and row["a"] is None else (old["a"] or 0) + (row["a"] or 0),
            "b": row["b"] if row["b"] is not None else old["b"],
            "c": max(v for v in (old["c"], row["c"]) if v is not None),
        }
    return sorted(merged.values(), key=sort_key)


ENGINE_ROWS = [
    {"k": 1, "a": 100, "b": None, "c": 0},  # an existing key: merged by the engine
    {"k": 4, "a": None, "b": "ours", "c": 50},
    {"k": 9, "a": 5, "b": "new", "c": 7},  # a new key
]
ENGINE_COLUMNS = "k int, a long, b string, c int"


def _types_rows(ids: range) -> list[Row]:
    from tests.java.tables import type_row

    rows = []
    for i in ids:
        row = type_row(i)
        row["s_renamed"] = row.pop("s")
        row["added"] = f"ours-{i}"
        row["i32"] = 2**36 + i
        row["ts3"] = dt.datetime(2024, 1, 2, 3, 4, 5, 678000)
        rows.append(row)
    return rows


TYPES_SELECT = (
    "id, b, i8, i16, i32, i64, f32, f64, dec, dec_big, s_renamed, c, vc, bin, d, ts, ts3, "
    "cast(ltz_ntz as timestamp) as ltz, arr, m, r, added"
)
TYPES_COLUMNS = (
    "id int, b boolean, i8 tinyint, i16 smallint, i32 bigint, i64 bigint, f32 double, f64 double, "
    "dec decimal(10,2), dec_big decimal(30,5), s_renamed string, c string, vc string, bin binary, d date, "
    "ts timestamp_ntz, ts3 timestamp_ntz, ltz_ntz timestamp_ntz, arr array<int>, m map<string,bigint>, "
    "r struct<x:int,y:string>, added string"
)


def _types_frame(spark: Any, rows: list[Row]) -> Any:
    """TIMESTAMP_LTZ built in Spark by a cast from TIMESTAMP_NTZ in the session time zone (UTC)."""
    local = []
    for row in rows:
        values = dict(row)
        values["ltz_ntz"] = values.pop("ltz").astimezone(dt.timezone.utc).replace(tzinfo=None)
        values["r"] = (values["r"]["x"], values["r"]["y"])
        local.append(values)
    names = [column.split(" ")[0] for column in TYPES_COLUMNS.split(", ")]
    frame = spark.createDataFrame([tuple(r[n] for n in names) for r in local], TYPES_COLUMNS)
    return frame.selectExpr(*TYPES_SELECT.split(", "))


def _java_spelling(rows: list[Row]) -> list[Row]:
    """What Java reads back for rows given as dicts (MAP as (key, value) pairs)."""
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row.get("m"), dict):
            row["m"] = list(row["m"].items())
        out.append(row)
    return out


# every fixture but pk_dynamic (dynamic bucket), which tests/java/test_write_dynamic_bucket.py covers
CASES = [
    "pk_changelog",
    "pk_partial_update",
    "pk_aggregation",
    "types_parquet",
    "types_orc",
    "types_avro",
    "pk_lookup_dv",
    "pk_first_row",
]
# changelog-producer lookup: our rows at level 0 are compacted at once (batch reads skip level 0), and
# that compaction writes the changelog: +I for a new key, -U/+U against the row the table held
LOOKUP_DV_ROWS = [{"k": 1, "p": 1, "s": "ours", "d": 0.5}, {"k": 20, "p": 0, "s": "new", "d": 2.0}]
LOOKUP_DV_COLUMNS = "k int, p int, s string, d double"


def _lookup_changelog(before: list[Row], ours: list[Row], key: tuple[str, ...], first_row: bool) -> list:
    """The changelog Paimon's lookup compaction of our rows produces (each key written once)."""
    old = _by_key(before, key)
    changes = []
    for row in ours:
        previous = old.get(tuple(row[k] for k in key))
        if previous is None:
            changes.append(("+I", row))
        elif not first_row:
            changes += [("-U", previous), ("+U", row)]
    return sorted(changes, key=lambda p: [p[0], *sort_key(p[1])])


def _source(tmp_path, frame: Any) -> dict[str, Any]:
    """The rows as one Parquet file (one file keeps their order: the last of a key wins)."""
    path = str(tmp_path / "source")
    frame.coalesce(1).write.mode("overwrite").parquet(path)
    return {"path": path}


@pytest.mark.parametrize("name", CASES)
def test_write_job_appends_to_java_table(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path, name
):
    table: JavaTable = java_templates[1][name]
    path = table.path(java_warehouse)
    latest_before = max(int(ref[1]) for ref in table.reads if ref[0] == "snapshot")
    before = table.reads[("snapshot", str(latest_before))]
    if name == "pk_changelog":
        ours, columns = _pk_changelog_case()
        frame = spark_session.createDataFrame([tuple(r.values()) for r in ours], columns)
        expected = _dedup(before, ours, ("id", "dt", "region"))
    elif name == "pk_lookup_dv":
        ours = LOOKUP_DV_ROWS
        frame = spark_session.createDataFrame([tuple(r.values()) for r in ours], LOOKUP_DV_COLUMNS)
        expected = _dedup(before, ours, ("k", "p"))
    elif name == "pk_first_row":
        ours = ENGINE_ROWS
        frame = spark_session.createDataFrame([tuple(r.values()) for r in ours], ENGINE_COLUMNS)
        kept = _by_key(before, ("k",))
        expected = sorted(before + [r for r in ours if (r["k"],) not in kept], key=sort_key)
    elif name.startswith("types_"):
        ours = _types_rows(range(50, 52))
        frame = _types_frame(spark_session, ours)
        expected = sorted(before + _java_spelling(ours), key=sort_key)
    else:
        ours = ENGINE_ROWS
        frame = spark_session.createDataFrame([tuple(r.values()) for r in ours], ENGINE_COLUMNS)
        merge = _partial_update if name == "pk_partial_update" else _aggregation
        expected = merge(before, ours)
    config = {"warehouse": java_warehouse, "table": table.identifier, "source": _source(tmp_path, frame)}
    code, record = run_job(tmp_path / "job", "write", config)
    assert code == 0, record.get("error")
    compacted = name in ("pk_lookup_dv", "pk_first_row")  # an APPEND, then the COMPACT of its buckets
    assert record["snapshot_ids"]["committed"] == latest_before + 1 + compacted
    assert java_paimon.read(path) == expected
    assert_reads_kept(java_paimon, table, java_warehouse)
    if name == "pk_changelog":
        # changelog-producer input: a streaming consumer sees every row we wrote, as it came
        changelog = java_paimon.read_changelog(path, after=latest_before)
        assert changelog == sorted((("+I", row) for row in ours), key=lambda p: [p[0], *sort_key(p[1])])
    if compacted:
        key = ("k", "p") if name == "pk_lookup_dv" else ("k",)
        changelog = java_paimon.read_changelog(path, after=latest_before)
        assert changelog == _lookup_changelog(before, ours, key, first_row=name == "pk_first_row")


def _commit_kind(path: str, snapshot_id: int) -> str:
    with open(os.path.join(path, "snapshot", f"snapshot-{snapshot_id}")) as handle:
        return json.load(handle)["commitKind"]


@pytest.mark.parametrize(
    "options",
    [
        {"deletion-vectors.enabled": "true", "changelog-producer": "input", "file.format": "orc"},
        {"merge-engine": "first-row"},
    ],
    ids=["deletion_vectors", "first_row"],
)
def test_write_job_compacts_what_it_wrote_where_batch_reads_skip_level0(
    spark_session, java_paimon, tmp_path, options
):
    """Batch reads skip level 0 here: the job commits an APPEND, then compacts the buckets it wrote
    (a COMPACT snapshot), as Paimon's writer does, so Java reads our rows at once."""
    warehouse = str(tmp_path / "wh")
    table = JavaTable("t", ["p"], ["k", "p"])
    path = table.path(warehouse)
    fields = [("k", "INT NOT NULL"), ("p", "INT NOT NULL"), ("v", "STRING")]
    java_paimon.create_table(path, fields, ["p"], ["k", "p"], {"bucket": "2", **options})
    java_paimon.write(path, [{"k": k, "p": k % 2, "v": f"a{k}"} for k in range(8)])
    latest = java_paimon.write(path, [{"k": k, "p": k % 2, "v": f"b{k}"} for k in range(3)])
    record_reads(java_paimon, table, warehouse)
    before = table.reads[("snapshot", str(latest))]

    ours = [{"k": 1, "p": 1, "v": "ours"}, {"k": 20, "p": 0, "v": "new"}]
    frame = spark_session.createDataFrame([tuple(r.values()) for r in ours], "k int, p int, v string")
    config = {"warehouse": warehouse, "table": table.identifier, "source": _source(tmp_path, frame)}
    code, record = run_job(tmp_path / "job", "write", config)
    assert code == 0, record.get("error")

    assert record["snapshot_ids"]["committed_ids"] == [latest + 1, latest + 2]
    assert [_commit_kind(path, latest + 1), _commit_kind(path, latest + 2)] == ["APPEND", "COMPACT"]
    assert record["details"]["compaction"]["buckets"] == 2  # the two buckets written, not the others
    if options.get("merge-engine") == "first-row":
        expected = sorted(before + [ours[1]], key=sort_key)  # an existing key keeps its first row
    else:
        expected = _dedup(before, ours, ("k", "p"))
    assert java_paimon.read(path) == expected
    assert java_paimon.read(path, snapshot_id=latest + 1) == before  # level 0: not read yet
    assert_reads_kept(java_paimon, table, warehouse)
    if options.get("changelog-producer") == "input":
        changelog = java_paimon.read_changelog(path, after=latest)
        assert changelog == sorted((("+I", row) for row in ours), key=lambda p: [p[0], *sort_key(p[1])])
