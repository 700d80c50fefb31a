"""One availableNow run of `spark.readStream.format("paimon")` with `read.changelog`, shared by the
stream tests that compare (row kind, row) pairs with Paimon Java's stream scan."""

from __future__ import annotations

from typing import Any

from tests.java.oracle import sort_key

Change = tuple[str, dict[str, Any]]


def sorted_changes(changes: list[Change]) -> list[Change]:
    """(row kind, row) pairs in the order `JavaPaimon.read_changelog` sorts them."""
    return sorted(changes, key=lambda pair: [pair[0], *sort_key(pair[1])])


def run_stream(spark: Any, path: str, checkpoint: str, **options: str) -> list[Change]:
    """One availableNow run from `checkpoint` with `read.changelog`: (rowkind, row) pairs, sorted as
    the oracle sorts them."""
    delivered: list[Change] = []

    def collect(frame: Any, _batch_id: int) -> None:
        for row in frame.collect():
            values = row.asDict()
            delivered.append((values.pop("rowkind"), values))

    reader = spark.readStream.format("paimon").option("read.changelog", "true")
    for key, value in options.items():
        reader = reader.option(key, value)
    run_available_now(reader, path, checkpoint, collect)
    return sorted_changes(delivered)


def run_available_now(reader: Any, path: str, checkpoint: str, collect: Any) -> None:
    """Load `path` with the configured stream `reader` and run it once to the end (availableNow) from
    `checkpoint`, each micro-batch handed to `collect`; a failed query fails the test."""
    query = (
        reader.load(path)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
