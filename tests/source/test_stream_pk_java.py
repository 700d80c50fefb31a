"""`spark.readStream.format("paimon")` over primary-key tables Paimon Java writes between micro-batches,
for each `changelog-producer`: the first batch is the merged table (+I), each later batch carries
exactly the rows, with their kinds, that Paimon's own stream scan reads from the same snapshots
(`java_paimon.read_changelog`: Java's StreamTableScan from a snapshot), and a restart from the
checkpoint delivers the next commit's rows and nothing twice.
"""

from __future__ import annotations

import pytest

from jobs.source import register
from paimon_format.consumers import ConsumerManager
from paimon_format.storage.fileio import FileIO
from tests.support.stream_runs import run_stream

pytestmark = pytest.mark.java


@pytest.mark.parametrize("producer", ["none", "lookup"])  # input: the next test
def test_java_changes_between_batches_equal_javas_stream(spark_session, java_paimon, tmp_path, producer):
    register(spark_session)
    path = str(tmp_path / "wh" / "db.db" / "t")
    checkpoint = str(tmp_path / "cp")
    fields = [("k", "BIGINT NOT NULL"), ("v", "STRING")]
    java_paimon.create_table(path, fields, [], ["k"], {"bucket": "1", "changelog-producer": producer})
    java_paimon.write(path, [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])
    full = java_paimon.write(path, [{"k": 1, "v": "a2"}])
    first = run_stream(spark_session, path, checkpoint, **{"consumer-id": "feed"})
    assert first == [("+I", row) for row in java_paimon.read(path)]  # the merged table
    assert ConsumerManager(FileIO.for_path(path), path).consumer("feed") == full  # pinned for expiry

    latest = java_paimon.write(path, [{"k": 2, "v": "b", "_kind": "-D"}, {"k": 3, "v": "c"}])
    java_paimon.write(path, [{"k": 1, "v": "a3"}])
    expected = java_paimon.read_changelog(path, after=latest - 1)
    assert {kind for kind, _ in expected} >= {"-D", "+I"}  # the stream has retractions to carry
    assert run_stream(spark_session, path, checkpoint) == expected

    java_paimon.write(path, [{"k": 4, "v": "d"}])  # after a restart: this row only, nothing twice
    assert run_stream(spark_session, path, checkpoint) == [("+I", {"k": 4, "v": "d"})]


def test_without_read_changelog_the_kinds_stay_out_and_batches_refuse_it(
    spark_session, java_paimon, tmp_path
):
    """As Paimon's Spark connector: no `rowkind` column unless asked, the retraction a plain row;
    changelog-producer input's changelog files equal Java's stream."""
    register(spark_session)
    path = str(tmp_path / "t")
    fields = [("k", "BIGINT NOT NULL"), ("v", "STRING")]
    java_paimon.create_table(path, fields, [], ["k"], {"bucket": "1", "changelog-producer": "input"})
    java_paimon.write(path, [{"k": 1, "v": "a"}])
    frame = spark_session.readStream.format("paimon").load(path)
    assert frame.columns == ["k", "v"]

    def run() -> list[tuple[int, str]]:
        delivered: list[tuple[int, str]] = []
        query = (
            frame.writeStream.foreachBatch(lambda f, _i: delivered.extend(tuple(r) for r in f.collect()))
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return delivered

    assert run() == [(1, "a")]
    latest = java_paimon.write(path, [{"k": 1, "v": "a", "_kind": "-D"}, {"k": 2, "v": "b"}])
    changelog = java_paimon.read_changelog(path, after=latest - 1)
    assert [kind for kind, _ in changelog] == ["+I", "-D"]
    # the -D row among the others, its kind dropped as Paimon's Spark rows drop it
    assert sorted(run()) == sorted(tuple(row.values()) for _, row in changelog)
    with pytest.raises(Exception, match="read.changelog"):
        spark_session.read.format("paimon").option("read.changelog", "true").load(path).collect()
    with pytest.raises(Exception, match="read.changelog"):
        spark_session.readStream.format("paimon").option("read.changelog", "yes").load(path)
