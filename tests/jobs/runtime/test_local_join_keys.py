"""The in-process frame's `xxhash64` join key: equal values get equal keys, whatever their chunking;
and its `when` chains, which compaction planning in the driver nets ADD and DELETE entries with.

remove-orphan-files joins the listing and the referenced set on this key in a local run; a key that
differed for equal paths would make a referenced file look like an orphan.
"""

from __future__ import annotations

import pyarrow as pa

from jobs.runtime.local_frame import LocalSession, functions_for


def test_equal_paths_get_equal_keys_across_chunks_and_nulls_stay_null():
    session = LocalSession()
    F = functions_for(session)
    listed = session.createDataFrame([("a/x",), ("b/y",), (None,), ("c/z",)], "path string")
    chunked = pa.table({"path": pa.chunked_array([["c/z"], ["a/x", None]])})
    referenced = session.createDataFrame(chunked)
    keys = [row["k"] for row in listed.select(F.xxhash64("path").alias("k")).collect()]
    assert keys[2] is None and len({keys[0], keys[1], keys[3]}) == 3
    assert all(isinstance(key, int) for i, key in enumerate(keys) if i != 2)
    other = [row["k"] for row in referenced.select(F.xxhash64("path").alias("k")).collect()]
    assert other == [keys[3], keys[0], None]
    unreferenced = listed.withColumn("key", F.xxhash64("path")).join(
        referenced.select(F.xxhash64("path").alias("key")), "key", "left_anti"
    )
    assert [row["path"] for row in unreferenced.collect()] == ["b/y", None]  # a null key matches nothing


def test_numbers_are_keyed_by_their_text():
    session = LocalSession()
    F = functions_for(session)
    numbers = session.createDataFrame([(1,), (2,), (1,)], "n long")
    keys = [row["k"] for row in numbers.select(F.xxhash64("n").alias("k")).collect()]
    assert keys[0] == keys[2] != keys[1]


def test_chained_whens_pick_the_first_condition_that_holds_as_spark_does():
    session = LocalSession()
    F = functions_for(session)
    kinds = session.createDataFrame([(0,), (1,), (2,), (None,)], "kind int")
    net = F.when(F.col("kind") == 0, 1).when(F.col("kind") >= 0, -1).otherwise(1000)
    assert [row["net"] for row in kinds.select(net.alias("net")).collect()] == [1, -1, -1, 1000]
