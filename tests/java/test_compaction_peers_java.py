"""Compaction against Paimon's Java: our Hilbert curve is the one Paimon's sort compaction uses, a table
we compact along it reads the same in Java, and the Java peer of scripts/bench_compact.py (the oracle's
`compact_procedure`) compacts append and primary-key tables keeping their rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from paimon_format.compaction.curves import hilbert_index
from paimon_format.compaction.rewrite import sort_rows
from paimon_format.data.reader import read_data_file
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import java_reads, our_read, run_job
from tests.java.oracle import JavaPaimon

pytestmark = pytest.mark.java

APPEND_FIELDS = [("a", "INT"), ("b", "STRING"), ("v", "DOUBLE")]


def _open(path: str) -> Table:
    return Table(FileIO.for_path(path), path)


@pytest.mark.parametrize(("dimensions", "bits"), [(2, 3), (2, 32), (3, 21), (4, 16)])
def test_hilbert_index_is_the_curve_of_paimons_sort_compaction(java_paimon: JavaPaimon, dimensions, bits):
    """Paimon's HilbertIndexer indexes with the davidmoten curve: ours gives the same index for every
    point (an 8 x 8 grid whole, else random points over the full range of each dimension)."""
    rng = np.random.default_rng(dimensions * 100 + bits)
    if bits == 3:
        points = np.array([(x, y) for x in range(8) for y in range(8)], dtype=np.uint64)
    else:
        points = rng.integers(0, 1 << bits, size=(200, dimensions), dtype=np.uint64)
    ours = hilbert_index([points[:, d] for d in range(dimensions)], bits).tolist()
    assert ours == java_paimon.hilbert_index(points.tolist(), bits)


def _write_append(java: JavaPaimon, path: str, commits: int, options: dict[str, str]) -> None:
    java.create_table(path, APPEND_FIELDS, options={"bucket": "-1", **options})
    rng = np.random.default_rng(1)
    for commit in range(commits):
        rows = [
            {"a": int(rng.integers(0, 40)), "b": f"s{int(rng.integers(0, 40)):02d}", "v": commit + k / 10}
            for k in range(30)
        ]
        rows[0]["b"] = None
        java.write(path, rows)


def test_hilbert_compaction_reads_the_same_in_java(java_paimon: JavaPaimon, tmp_path):
    """Our compact with `order_strategy: hilbert` over (a, b) on a Java-written append table: one
    COMPACT snapshot, its file holds the rows along the curve, and Java reads every snapshot as before."""
    warehouse = str(tmp_path / "wh")
    path = f"{warehouse}/db.db/t"
    _write_append(java_paimon, path, 6, {})
    before = java_reads(java_paimon, path)
    config = {
        "warehouse": warehouse,
        "table": "db.t",
        "strategy": "full",
        "order_by": ["a", "b"],
        "order_strategy": "hilbert",
    }
    code, record = run_job(tmp_path / "job", "compact", config)
    assert code == 0, record.get("error")
    table = _open(path)
    snapshot = table.snapshot_manager.latest()
    assert snapshot.id == 7 and snapshot.commit_kind == "COMPACT"
    entries = live_entries(table, snapshot)
    assert len(entries) == 1 and record["counts"]["files_rewritten"] == 6
    entry = entries[0]
    written = pa.Table.from_batches(list(read_data_file(table, entry.partition, entry.bucket, entry.file)))
    assert (
        written.select(["a", "b"]).to_pylist()
        == sort_rows(written, ["a", "b"], "hilbert").select(["a", "b"]).to_pylist()
    )
    assert (
        written.select(["a", "b"]).to_pylist()
        != written.sort_by([("a", "ascending")]).select(["a", "b"]).to_pylist()
    )
    after = java_reads(java_paimon, path)
    assert after.pop(("snapshot", "7")) == before[("snapshot", "6")]
    assert after == before


def test_java_compact_procedure_compacts_an_unaware_append_table(java_paimon: JavaPaimon, tmp_path):
    """Paimon's coordinator packs 12 small files into tasks of `compaction.max.file-num` (6): two tasks,
    run on two threads, one commit; Java and our reader read the rows as before."""
    path = str(tmp_path / "wh" / "db.db" / "t")
    _write_append(java_paimon, path, 12, {})
    before = java_paimon.read(path)
    answer = java_paimon.compact_procedure(path, threads=2, options={"compaction.max.file-num": "6"})
    assert answer == {"snapshot_id": 13, "units": 2, "files_removed": 12, "files_added": 2}
    assert _open(path).snapshot_manager.latest().commit_kind == "COMPACT"
    assert java_paimon.read(path) == before
    assert our_read(path, ("snapshot", "13")) == before
    sums = {"a": sum(r["a"] for r in before), "v": sum(round(r["v"] * 100) for r in before)}
    assert java_paimon.count_rows(path, ["a", "v"]) == {"rows": 360, "sums": sums}  # the bench's check


def test_java_compact_procedure_fully_compacts_every_bucket(java_paimon: JavaPaimon, tmp_path):
    """A primary-key table of 2 partitions x 2 buckets written in 4 upsert commits (one delete): every
    bucket ends as one file at the top level, and the merged rows stay."""
    path = str(tmp_path / "wh" / "db.db" / "pk")
    java_paimon.create_table(
        path,
        [("k", "INT NOT NULL"), ("p", "INT NOT NULL"), ("v", "STRING")],
        partition_keys=["p"],
        primary_keys=["k", "p"],
        options={"bucket": "2"},
    )
    for step in range(4):
        java_paimon.write(path, [{"k": k, "p": k % 2, "v": f"{step}-{k}"} for k in range(step, 20, 2)])
    java_paimon.write(path, [{"k": 4, "p": 0, "_kind": "-D"}])
    before = java_paimon.read(path)
    table = _open(path)
    files = live_entries(table, table.snapshot_manager.latest())
    buckets = {(e.partition, e.bucket) for e in files}
    assert len(buckets) == 4 and len(files) > 8
    answer = java_paimon.compact_procedure(path, threads=2)
    assert answer["units"] == 4 and answer["files_added"] == 4 and answer["files_removed"] == len(files)
    entries = live_entries(table, table.snapshot_manager.latest())
    assert {(e.partition, e.bucket) for e in entries} == buckets and {e.file.level for e in entries} == {5}
    assert java_paimon.read(path) == before
    assert our_read(path, ("snapshot", str(answer["snapshot_id"]))) == before
