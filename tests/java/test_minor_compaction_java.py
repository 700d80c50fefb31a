"""Differential: our `compact` with `strategy: minor` (Paimon's universal compaction picking) on the Java
fixture tables of every merge engine, with deletion vectors and with the lookup changelog producer.

Each fixture gets four more small Java commits left at level 0 (`write-only`), so its buckets hold
enough sorted runs for the universal rules to pick. Then, on copies of that table:
- our minor compaction: Java reads the same rows at every snapshot, tag and branch, and the new
  snapshot reads as the one before it; Java's next compaction over our levels (minor, then full)
  keeps the rows;
- Java's minor compaction first, ours over Java's levels: the rows stay;
- on a table whose changelog its compaction produces, the changelog Java reads from our COMPACT
  snapshot is the one Java's own compaction of the same copy produced.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter

import pytest

from paimon_format.manifest.entries import ADD
from paimon_format.scan.snapshot_scan import read_entries, read_list
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import java_reads, run_job
from tests.java.oracle import JavaPaimon, Row
from tests.java.tables import DAY1, DAY2, REGIONS

pytestmark = pytest.mark.java

WRITE_ONLY = {"write-only": "true"}
FIXTURES = ["pk_changelog", "pk_lookup_dv", "pk_first_row", "pk_partial_update", "pk_aggregation"]
CHANGELOG_AT_COMPACTION = {"pk_lookup_dv", "pk_first_row"}
# Paimon's batch reads of deletion-vector and first-row tables skip level 0: a compaction (Java's
# own too) makes the level-0 rows visible, so those tables compare with Java's compaction of a copy
SKIPS_LEVEL0 = {"pk_lookup_dv", "pk_first_row"}


def _upserts(name: str, step: int) -> list[Row]:
    """A small commit of updates (and one delete) on keys the fixture already has."""
    if name == "pk_changelog":
        rows: list[Row] = [
            {
                "id": k,
                "dt": DAY1 if k % 2 else DAY2,
                "region": REGIONS[k % 3 == 0],
                "v": f"m{step}",
                "n": step,
            }
            for k in range(3 + step, 22, 4)
        ]
        return rows + ([{**rows[0], "_kind": "-D"}] if step == 2 else [])
    if name == "pk_lookup_dv":
        rows = [{"k": k, "p": k % 2, "s": f"m{step}-{k}", "d": float(step)} for k in range(step, 8, 2)]
        return rows + ([{"k": 6, "p": 0, "_kind": "-D"}] if step == 2 else [])
    return [{"k": k, "a": step, "b": f"m{step}" if k % 2 else None, "c": step * 3} for k in range(step, 7, 2)]


def _latest(path: str) -> int:
    names = os.listdir(os.path.join(path, "snapshot"))
    return max(int(n.removeprefix("snapshot-")) for n in names if n.removeprefix("snapshot-").isdigit())


def _compact_minor(tmp_path, warehouse: str, name: str) -> dict:
    code, record = run_job(
        tmp_path / f"minor-{name}",
        "compact",
        {"warehouse": warehouse, "table": f"db.{name}", "strategy": "minor"},
    )
    assert code == 0, record.get("error")
    return record


def _added_levels(path: str, snapshot_id: int) -> Counter:
    table = Table(FileIO.for_path(path), path)
    snapshot = table.snapshot_manager.snapshot(snapshot_id)
    entries = read_entries(table, read_list(table, snapshot.delta_manifest_list))
    return Counter(e.file.level for e in entries if e.kind == ADD)


def _assert_reads(java: JavaPaimon, path: str, expected: dict, latest: list[Row]) -> None:
    now = java_reads(java, path)
    for ref, rows in expected.items():
        assert now.get(ref) == rows, f"{path} {ref}: Java reads other rows than before"
    assert java.read(path) == latest


@pytest.mark.parametrize("name", FIXTURES)
def test_minor_compaction_keeps_what_java_reads(spark_session, java_paimon, java_warehouse, tmp_path, name):
    path = os.path.join(java_warehouse, "db.db", name)
    for step in range(4):
        java_paimon.write(path, _upserts(name, step), options=WRITE_ONLY)
    base = _latest(path)
    expected = java_reads(java_paimon, path)
    theirs_first = str(tmp_path / "theirs" / "db.db" / name)
    shutil.copytree(path, theirs_first)
    javas = str(tmp_path / "javas" / "db.db" / name)
    shutil.copytree(path, javas)

    record = _compact_minor(tmp_path, java_warehouse, name)
    committed = record["snapshot_ids"]["committed"]
    assert committed == base + 1
    levels = _added_levels(path, committed)
    assert levels and 0 not in levels
    java_paimon.compact(javas, full=False)  # Java's own compaction of the same table
    latest = java_paimon.read(javas)
    if name not in SKIPS_LEVEL0:
        assert latest == expected[("snapshot", str(base))]
    _assert_reads(java_paimon, path, expected, latest)
    if name in CHANGELOG_AT_COMPACTION:  # the changelog Java's own compaction of the same copy produced
        assert _latest(javas) == base + 1
        mine = java_paimon.read_changelog(path, after=base)
        assert sorted(map(repr, mine)) == sorted(map(repr, java_paimon.read_changelog(javas, after=base)))
    # Java's next compactions over our levels
    java_paimon.compact(path, full=False)
    assert java_paimon.read(path) == latest
    java_paimon.compact(path, full=True)
    assert java_paimon.read(path) == latest

    # ours over Java's levels
    java_paimon.compact(theirs_first, full=False)
    _compact_minor(tmp_path / "second", str(tmp_path / "theirs"), name)
    assert java_paimon.read(theirs_first) == latest


def test_minor_compaction_writes_below_the_top_level_on_a_non_lookup_table(
    spark_session, java_paimon, java_warehouse, tmp_path
):
    """Partial update (no lookup): the new level-0 runs go one level below the oldest run, which stays."""
    name = "pk_partial_update"
    path = os.path.join(java_warehouse, "db.db", name)
    java_paimon.write(path, [{"k": k, "a": k, "b": f"wide-{k:04d}" * 8, "c": k} for k in range(10, 1010)])
    java_paimon.compact(path, full=True)  # one big top-level run per bucket
    for step in range(5):  # five small upserts of every bucket: five level-0 runs each
        java_paimon.write(path, [{"k": k, "a": step, "c": step} for k in range(8)], options=WRITE_ONLY)
    before = java_paimon.read(path)
    record = _compact_minor(tmp_path, java_warehouse, name)
    assert record["counts"]["buckets"] == 2
    assert set(_added_levels(path, record["snapshot_ids"]["committed"])) == {4}
    assert java_paimon.read(path) == before
