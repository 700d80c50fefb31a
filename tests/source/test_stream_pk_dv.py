"""`spark.readStream.format("paimon")` over a primary-key table with deletion vectors that Paimon Java
writes (each write an APPEND, then a lookup COMPACT that leaves deletion vectors on older files):
the first batch is the merged table with the vectors applied, later batches carry exactly the rows
Java's own stream scan reads, a restart delivers nothing twice, and a stream whose first snapshot
still holds level-0 files (a `write-only` commit) delivers their rows too, as Paimon's first plan
does (levels above 0, then that snapshot's own changes).
"""

from __future__ import annotations

import pytest

from jobs.source import register
from paimon_format.consumers import ConsumerManager
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.stream_runs import run_stream, sorted_changes

pytestmark = pytest.mark.java


def test_deletion_vector_table_streams_each_row_once(spark_session, java_paimon, tmp_path):
    register(spark_session)
    path = str(tmp_path / "t")
    checkpoint = str(tmp_path / "cp")
    fields = [("k", "BIGINT NOT NULL"), ("v", "STRING")]
    java_paimon.create_table(path, fields, [], ["k"], {"bucket": "1", "deletion-vectors.enabled": "true"})
    java_paimon.write(path, [{"k": k, "v": "a"} for k in range(6)])
    full = java_paimon.write(path, [{"k": 1, "v": "b"}])
    table = Table(FileIO.for_path(path), path)
    assert table.snapshot_manager.snapshot(full).index_manifest  # k = 1 of the first file: a vector
    first = run_stream(spark_session, path, checkpoint, **{"consumer-id": "feed"})
    assert first == [("+I", row) for row in java_paimon.read(path)]  # k = 1 once, as b
    assert ConsumerManager(table.file_io, path).consumer("feed") == full

    java_paimon.write(path, [{"k": 2, "v": "c"}, {"k": 3, "v": "a", "_kind": "-D"}])
    java_paimon.write(path, [{"k": 4, "v": "w"}], options={"write-only": "true"})  # stays at level 0
    expected = java_paimon.read_changelog(path, after=full)
    assert {kind for kind, _ in expected} == {"+I", "-D"}
    assert run_stream(spark_session, path, checkpoint) == expected
    java_paimon.write(path, [{"k": 30, "v": "z"}])  # after a restart: this row only, nothing twice
    assert run_stream(spark_session, path, checkpoint) == [("+I", {"k": 30, "v": "z"})]

    # a new stream starting at a snapshot whose level-0 file a batch read leaves out
    latest = java_paimon.write(
        path, [{"k": 40, "v": "n"}, {"k": 5, "v": "u"}], options={"write-only": "true"}
    )
    merged = java_paimon.read(path)
    assert {"k": 40, "v": "n"} not in merged  # Java's batch read of a vector table skips level 0
    fresh = str(tmp_path / "cp-fresh")
    expected = sorted_changes(
        [("+I", row) for row in merged] + java_paimon.read_changelog(path, after=latest - 1)
    )
    assert run_stream(spark_session, path, fresh) == expected
