"""The Java oracle itself: it writes, compacts, tags, branches, expires and reads as Paimon does, and
our format layer reads the same tables (no `_VALUE_STATS_COLS` in Java 1.0's manifests)."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from paimon_format.scan.snapshot_scan import live_entries, resolve_snapshot
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.tables import PK_FIELDS, TYPE_FIELDS, type_row

pytestmark = pytest.mark.java


def test_java_round_trips_every_type_and_time_travels(java_paimon, tmp_path):
    path = str(tmp_path / "t")
    java_paimon.create_table(path, TYPE_FIELDS, options={"file.format": "orc"})
    rows = [type_row(i) for i in range(3)]
    first = java_paimon.write(path, rows)
    java_paimon.write(path, [type_row(7)])
    java_paimon.create_tag(path, "one", first)
    got = java_paimon.read(path, tag="one")
    assert [r["id"] for r in got] == [0, 1, 2]
    expected = dict(rows[1], c=rows[1]["c"].rstrip(), m=list(rows[1]["m"].items()))
    assert got[1] == expected
    assert [r["id"] for r in java_paimon.read(path)] == [0, 1, 2, 7]


def test_java_compaction_levels_deletes_and_our_reader(java_paimon, tmp_path):
    path = str(tmp_path / "pk")
    java_paimon.create_table(
        path, PK_FIELDS, ["dt"], ["id", "dt"], {"bucket": "1", "num-sorted-run.compaction-trigger": "2"}
    )
    day = dt.date(2024, 3, 1)
    java_paimon.write(path, [{"id": i, "dt": day, "region": "r", "v": "a", "n": i} for i in range(4)])
    java_paimon.write(path, [{"id": 1, "dt": day, "region": "r", "_kind": "-D"}])
    java_paimon.compact(path, full=True)
    java_paimon.write(path, [{"id": 9, "dt": day, "region": "r", "v": "z", "n": 9}])
    assert [r["id"] for r in java_paimon.read(path)] == [0, 2, 3, 9]
    table = Table(FileIO.for_path(path), path)
    entries = live_entries(table, resolve_snapshot(table))
    levels = {entry.file.level for entry in entries}
    assert 0 in levels and max(levels) > 0  # files at several levels after Java's compaction
    assert all(entry.file.value_stats_cols in (None, []) for entry in entries)
    assert all(os.path.exists(os.path.join(path, table.entry_relpaths(e)[0])) for e in entries)


def test_java_orphan_cleaning_and_expiry_answer(java_paimon, tmp_path):
    path = str(tmp_path / "o")
    java_paimon.create_table(path, [("k", "INT NOT NULL"), ("v", "STRING")], [], ["k"], {"bucket": "1"})
    for i in range(3):
        java_paimon.write(path, [{"k": i, "v": "x"}])
    orphan = os.path.join(path, "bucket-0", "data-00000000-0000-0000-0000-000000000000-0.parquet")
    with open(orphan, "wb") as handle:
        handle.write(b"not referenced")
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    assert java_paimon.remove_orphan_files(path, future, dry_run=True) == {orphan}
    assert os.path.exists(orphan)
    assert java_paimon.remove_orphan_files(path, future) == {orphan}
    assert not os.path.exists(orphan)
    assert java_paimon.expire_snapshots(path, retain_min=1, retain_max=1) == 2
    assert sorted(os.listdir(os.path.join(path, "snapshot"))) == ["EARLIEST", "LATEST", "snapshot-3"]
    assert [r["k"] for r in java_paimon.read(path)] == [0, 1, 2]


def test_a_tag_whose_changelog_java_expired_needs_no_changelog(java_templates):
    """Issue 16's bug in the format layer: the referenced set of a Java table whose tag's changelog
    list Java's expiry deleted is readable, names the tag's base and delta lists and every file
    Java reads there, and not its (gone) changelog list."""
    import json

    from paimon_format.maintenance.references import referenced_files
    from paimon_format.storage.fileio import FileIO

    warehouse, fixtures = java_templates
    path = fixtures["pk_changelog"].path(warehouse)
    with open(os.path.join(path, "tag", "tag-t2")) as handle:
        tag = json.load(handle)
    assert not os.path.exists(os.path.join(path, "manifest", tag["changelogManifestList"]))
    referenced = referenced_files(Table(FileIO.for_path(path), path))
    assert f"manifest/{tag['baseManifestList']}" in referenced
    assert f"manifest/{tag['deltaManifestList']}" in referenced
    assert f"manifest/{tag['changelogManifestList']}" not in referenced
    listed = {os.path.relpath(os.path.join(d, n), path) for d, _, names in os.walk(path) for n in names}
    assert referenced <= listed  # nothing referenced is missing


def test_java_partition_drop_and_manifest_compaction_on_our_table(java_paimon, tmp_path):
    """The Java peers the benchmarks time: Paimon's partition drop and manifest full compaction."""
    from paimon_format.commit import SnapshotCommit
    from paimon_format.scan.snapshot_scan import data_manifests
    from tests.support.factories import data_file, make_table, message

    table = make_table(str(tmp_path / "db.db" / "t"))
    committer = SnapshotCommit(table)
    for batch in range(3):
        committer.append([message(table, [p], data_file(f"data-{batch}-{p}.parquet")) for p in "abc"])
    before = {e.file.file_name: e.partition for e in live_entries(table, table.snapshot_manager.latest())}

    dropped = java_paimon.drop_partitions(table.path, [{"dt": "b"}])
    after_drop = table.snapshot_manager.snapshot(dropped)
    assert after_drop.commit_kind == "OVERWRITE"
    kept = {e.file.file_name for e in live_entries(table, after_drop)}
    assert kept == {name for name in before if "-b." not in name} and len(kept) == 6

    compacted = java_paimon.compact_manifests(table.path)
    snapshot = table.snapshot_manager.snapshot(compacted)
    assert compacted == dropped + 1 and len(data_manifests(table, snapshot)) == 1
    assert {e.file.file_name for e in live_entries(table, snapshot)} == kept
