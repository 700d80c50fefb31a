"""`spark.readStream.format("paimon")` over an append table Paimon Java writes and compacts between
micro-batches: every row Java committed exactly once, none again after Java's compaction; and Paimon's
own streaming reader, given our consumer, resumes where our stream's consumer says.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.source import register
from paimon_format.consumers import ConsumerManager
from paimon_format.storage.fileio import FileIO
from tests.support.stream_runs import run_available_now

pytestmark = pytest.mark.java


def run_stream(spark: Any, path: str, checkpoint: str) -> list[int]:
    """One availableNow run from `checkpoint` with consumer `feed`: the `k` values it delivered."""
    delivered: list[int] = []

    def collect(frame: Any, _batch_id: int) -> None:
        delivered.extend(row["k"] for row in frame.select("k").collect())

    reader = spark.readStream.format("paimon").option("consumer-id", "feed")
    run_available_now(reader, path, checkpoint, collect)
    return delivered


def test_java_appends_and_compaction_between_batches(spark_session, java_paimon, tmp_path):
    register(spark_session)
    path = str(tmp_path / "wh" / "db.db" / "t")
    checkpoint = str(tmp_path / "cp")
    fields = [("dt", "STRING NOT NULL"), ("k", "BIGINT NOT NULL")]
    java_paimon.create_table(path, fields, ["dt"], options={"bucket": "1", "bucket-key": "k"})
    java_paimon.write(path, [{"dt": "a", "k": 1}, {"dt": "b", "k": 2}])
    java_paimon.write(path, [{"dt": "a", "k": 3}])  # snapshot 2
    assert sorted(run_stream(spark_session, path, checkpoint)) == [1, 2, 3]

    java_paimon.write(path, [{"dt": "a", "k": 4}])
    java_paimon.write(path, [{"dt": "b", "k": 5}, {"dt": "c", "k": 6}])  # snapshot 4
    assert sorted(run_stream(spark_session, path, checkpoint)) == [4, 5, 6]

    compacted = java_paimon.compact(path)  # the same rows in new files
    latest = java_paimon.write(path, [{"dt": "c", "k": 7}])
    assert latest == compacted + 1
    assert sorted(run_stream(spark_session, path, checkpoint)) == [7]
    assert run_stream(spark_session, path, checkpoint) == []  # records the consumer past `latest`

    consumers = ConsumerManager(FileIO.for_path(path), path)
    assert consumers.consumer("feed") == latest + 1
    java_paimon.write(path, [{"dt": "a", "k": 8}])
    resumed = java_paimon.stream_consumer(path, "feed")  # Paimon's reader, from our consumer
    assert resumed == {"rows": 1, "next": latest + 2}  # only the row written after our stream
