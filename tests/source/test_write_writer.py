"""`jobs.source.writer` driven as Spark drives it, without Spark: `make_writer` (the driver's plan),
`write` once per task with Arrow batches, then `commit` or `abort`. What it writes is read back by
Paimon's Java and by pypaimon; bad input writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.runtime.errors import BadInputError
from jobs.source.location import SourceOptionError
from jobs.source.writer import SEQUENCE_STRIDE, make_writer
from paimon_format.data.bucket import hash_array
from paimon_format.errors import PaimonFormatError
from paimon_format.index.hash_index import HASH_INDEX, read_hash_index
from paimon_format.model.types import BIGINT
from paimon_format.scan.snapshot_scan import index_entries, live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.oracle import sort_key
from tests.support.broken_tables import truncated_manifest, unknown_schema_id
from tests.support.pypaimon_reads import pypaimon_rows
from tests.support.table_states import IDENTIFIER, build_sample_table, fingerprint, table_root

SPARK_SCHEMA = StructType(
    [StructField("k", LongType()), StructField("dt", StringType()), StructField("v", StringType())]
)
ARROW_SCHEMA = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


class _Task:
    """What `TaskContext.get()` answers inside a Spark task: its partition number."""

    def __init__(self, number: int) -> None:
        self.number = number

    def partitionId(self) -> int:  # noqa: N802 - Spark's name
        return self.number

    def taskAttemptId(self) -> int:  # noqa: N802 - Spark's name
        return self.number


def _batches(rows: list[tuple[Any, ...]], size: int = 2) -> Iterator[pa.RecordBatch]:
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        yield pa.RecordBatch.from_pylist(
            [dict(zip(ARROW_SCHEMA.names, row, strict=True)) for row in chunk], schema=ARROW_SCHEMA
        )


def _write(
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, str],
    tasks: list[list[tuple]],
    overwrite: bool = False,
) -> None:
    """One Spark write: the plan, each task's `write` (task i is Spark partition i), the commit."""
    writer = make_writer(options, SPARK_SCHEMA, overwrite)
    messages = []
    for number, rows in enumerate(tasks):
        monkeypatch.setattr("pyspark.TaskContext.get", lambda number=number: _Task(number))
        messages.append(writer.write(_batches(rows)))
    writer.commit(messages)


def _table(warehouse: str) -> Table:
    path = f"{warehouse}/db.db/t"
    return Table(FileIO.for_path(path), path)


def _dicts(rows: list[tuple]) -> list[dict[str, Any]]:
    return sorted((dict(zip(ARROW_SCHEMA.names, row, strict=True)) for row in rows), key=sort_key)


def _index_and_live_keys(path: str) -> tuple[dict, dict]:
    """(partition, bucket) -> hashes: of its HASH index file (one per bucket), and of the keys of its
    live data files, in the latest snapshot."""
    table = Table(FileIO.for_path(path), path)
    latest = table.snapshot_manager.latest()
    index: dict[tuple[bytes, int], set[int]] = {}
    for entry in index_entries(table, latest):
        key = (bytes(entry.partition), entry.bucket)
        assert entry.index_type == HASH_INDEX and key not in index, f"a second index file for {key}"
        index[key] = set(read_hash_index(table, entry).tolist())
    live: dict[tuple[bytes, int], set[int]] = {}
    for entry in live_entries(table, latest):
        relative = f"{table.bucket_relpath(entry.partition, entry.bucket)}/{entry.file.file_name}"
        keys = pq.ParquetFile(table.full_path(relative)).read(columns=["_KEY_k"]).column("_KEY_k")
        live.setdefault((bytes(entry.partition), entry.bucket), set()).update(
            hash_array([keys], [BIGINT()]).tolist()
        )
    return index, live


def _data_files(warehouse: str) -> list[str]:
    return [
        os.path.join(d, n)
        for d, _, names in os.walk(f"{warehouse}/db.db/t")
        for n in names
        if n.startswith("data-")
    ]


@pytest.mark.java
@pytest.mark.parametrize(
    "create",
    [
        pytest.param({"partition": "dt"}, id="append"),
        pytest.param({"primary-key": "dt,k", "partition": "dt", "bucket": "2"}, id="fixed-bucket-pk"),
    ],
)
def test_tasks_write_one_snapshot_java_and_pypaimon_read_back(monkeypatch, java_paimon, tmp_path, create):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", **create}
    first = [(1, "a", "x"), (2, "a", "y"), (3, "b", "z")]
    second = [(4, "b", "w"), (5, "c", "u")]
    _write(monkeypatch, options, [first, second])
    table = _table(warehouse)
    assert table.snapshot_manager.latest_id() == 1  # two tasks, one commit
    expected = _dicts(first + second)
    assert java_paimon.read(table.path) == expected
    assert pypaimon_rows(warehouse, "db.t") == expected
    if (
        "primary-key" in create
    ):  # keys written again: twice within a task (the last wins), and by another task
        _write(monkeypatch, options, [[(1, "a", "old"), (1, "a", "new")], [(5, "c", "v2")]])
        expected = _dicts([(1, "a", "new"), (2, "a", "y"), (3, "b", "z"), (4, "b", "w"), (5, "c", "v2")])
        assert java_paimon.read(table.path) == expected
        assert pypaimon_rows(warehouse, "db.t") == expected


def test_tasks_number_their_rows_in_ranges_of_their_own(monkeypatch, tmp_path):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", "primary-key": "k", "bucket": "1"}
    _write(monkeypatch, options, [[(1, "a", "x")], [(1, "a", "y")], [(2, "a", "z")]])
    table = _table(warehouse)
    ranges = sorted(
        (e.file.min_sequence_number, e.file.max_sequence_number)
        for e in live_entries(table, table.snapshot_manager.latest())
    )
    assert ranges == [(0, 0), (SEQUENCE_STRIDE, SEQUENCE_STRIDE), (2 * SEQUENCE_STRIDE, 2 * SEQUENCE_STRIDE)]


@pytest.mark.parametrize(
    ("overwrite_options", "kept"),
    [
        pytest.param({}, [], id="whole-table"),
        pytest.param({"partitionOverwriteMode": "dynamic"}, [(3, "b", "z")], id="dynamic"),
        pytest.param({"overwrite-partition": "dt=b"}, [(1, "a", "x"), (2, "a", "y")], id="static"),
    ],
)
def test_overwrite(monkeypatch, tmp_path, overwrite_options, kept):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", "partition": "dt"}
    _write(monkeypatch, options, [[(1, "a", "x"), (2, "a", "y"), (3, "b", "z")]])
    new = [(7, "a", "n")] if "overwrite-partition" not in overwrite_options else [(7, "b", "n")]
    _write(monkeypatch, {**options, **overwrite_options}, [new], overwrite=True)
    assert pypaimon_rows(warehouse, "db.t") == _dicts(kept + new)


def test_overwrite_with_no_rows_empties_the_table(monkeypatch, tmp_path):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t"}
    _write(monkeypatch, options, [[(1, "a", "x")]])
    _write(monkeypatch, options, [[]], overwrite=True)
    assert _table(warehouse).snapshot_manager.latest_id() == 2
    assert pypaimon_rows(warehouse, "db.t") == []


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        pytest.param(StructType(SPARK_SCHEMA.fields[:2]), "missing columns: v", id="missing"),
        pytest.param(
            StructType([*SPARK_SCHEMA.fields, StructField("extra", LongType())]),
            "columns not in the table: extra",
            id="extra",
        ),
        pytest.param(
            StructType([StructField("k", StringType()), *SPARK_SCHEMA.fields[1:]]),
            "incompatible types: k (STRING -> table BIGINT)",
            id="wrong-type",
        ),
    ],
)
def test_a_dataframe_that_does_not_fit_the_table_is_refused_before_any_write(
    monkeypatch, tmp_path, schema, message
):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t"}
    _write(monkeypatch, options, [[(1, "a", "x")]])
    before = sorted(_data_files(warehouse))
    with pytest.raises(BadInputError, match="input does not match table db.t") as error:
        make_writer(options, schema, False)
    assert message in str(error.value)
    assert sorted(_data_files(warehouse)) == before
    assert _table(warehouse).snapshot_manager.latest_id() == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"overwrite-partition": "dt"}, "'dt' is not key=value"),
        ({"partitionOverwriteMode": "sometimes"}, "must be static or dynamic"),
        ({"snapshot-id": "1"}, "option 'snapshot-id' is for reads"),
        ({"primary-key": "k,k"}, "names a column twice"),
    ],
)
def test_bad_options_name_the_option(tmp_path, options, message):
    with pytest.raises(SourceOptionError, match=message):
        make_writer({"warehouse": str(tmp_path), "path": "db.t", **options}, SPARK_SCHEMA, True)
    assert not os.path.exists(tmp_path / "db.db")


def test_keys_that_differ_from_the_existing_table_are_refused(monkeypatch, tmp_path):
    warehouse = str(tmp_path / "wh")
    _write(monkeypatch, {"warehouse": warehouse, "path": "db.t", "partition": "dt"}, [[(1, "a", "x")]])
    with pytest.raises(BadInputError, match=r"primary_keys \['k'\] \(table: \[\]\)"):
        make_writer({"warehouse": warehouse, "path": "db.t", "primary-key": "k"}, SPARK_SCHEMA, False)


@pytest.mark.java
def test_dynamic_bucket_tasks_agree_on_a_new_keys_bucket(monkeypatch, java_paimon, tmp_path):
    """A new key met by two tasks gets one bucket; each bucket ends with one HASH file holding
    exactly its keys; Java and pypaimon read each key once, also after Java's own assigner wrote
    on top of our index."""
    warehouse = str(tmp_path / "wh")
    options = {
        "warehouse": warehouse,
        "path": "db.t",
        "primary-key": "dt,k",
        "partition": "dt",
        "dynamic-bucket.target-row-num": "3",
        "dynamic-bucket.assigner-parallelism": "3",
    }
    first = [(k, "a", f"x{k}") for k in range(6)]
    _write(monkeypatch, options, [first[:4], first[2:]])  # keys 2, 3 in both tasks
    path = _table(warehouse).path
    second = [(k, "a", f"y{k}") for k in range(4, 10)]  # 4, 5 known, 6..9 new
    _write(monkeypatch, options, [second[:3], second[1:]])
    expected = _dicts([r for r in first if r[0] < 4] + second)
    assert java_paimon.read(path) == expected
    assert pypaimon_rows(warehouse, "db.t") == expected
    index, live = _index_and_live_keys(path)
    assert index == live  # one HASH file per bucket, its keys and only those
    assert len(index) > 1
    java_paimon.write(path, [{"k": k, "dt": "a", "v": f"j{k}"} for k in (1, 9, 11)])
    expected = _dicts(
        [(k, "a", f"j{k}" if k in (1, 9, 11) else (f"x{k}" if k < 4 else f"y{k}")) for k in [*range(10), 11]]
    )
    assert java_paimon.read(path) == expected


def test_a_failing_task_removes_its_files_and_abort_those_of_finished_tasks(monkeypatch, tmp_path):
    warehouse = str(tmp_path / "wh")
    # a tiny target file size: the failing task has flushed files before its error
    options = {"warehouse": warehouse, "path": "db.t", "partition": "dt", "target-file-size": "1 b"}
    writer = make_writer(options, SPARK_SCHEMA, False)
    finished = writer.write(_batches([(1, "a", "x"), (2, "b", "y")]))
    assert len(finished.rows) == 2 and len(_data_files(warehouse)) == 2

    def failing() -> Iterator[pa.RecordBatch]:
        yield from _batches([(3, "a", "x"), (4, "b", "y")])
        raise RuntimeError("the UDF failed on a row")

    with pytest.raises(RuntimeError, match="the UDF failed"):
        writer.write(failing())
    assert len(_data_files(warehouse)) == 2  # only the finished task's
    writer.abort([finished, None])
    assert _data_files(warehouse) == []
    assert _table(warehouse).snapshot_manager.latest_id() is None
    assert _table(warehouse).latest_schema() is None  # the table this write created is gone


def test_a_static_overwrite_refuses_rows_outside_its_partitions_and_writes_nothing(monkeypatch, tmp_path):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", "partition": "dt"}
    _write(monkeypatch, options, [[(1, "a", "x"), (2, "b", "y")]])
    before = sorted(_data_files(warehouse))
    with pytest.raises(BadInputError, match="rows in others: dt=c"):
        _write(
            monkeypatch, {**options, "overwrite-partition": "dt=a"}, [[(3, "a", "n"), (4, "c", "n")]], True
        )
    with pytest.raises(BadInputError, match=r"not partition keys: k"):
        make_writer({**options, "overwrite-partition": "k=1"}, SPARK_SCHEMA, True)
    assert sorted(_data_files(warehouse)) == before
    assert _table(warehouse).snapshot_manager.latest_id() == 1


def test_a_table_the_options_cannot_create_is_a_clear_error_and_nothing_is_created(tmp_path):
    options = {"warehouse": str(tmp_path), "path": "db.t", "primary-key": "id"}
    with pytest.raises(BadInputError, match="cannot create table db.t: .*id"):
        make_writer(options, SPARK_SCHEMA, False)
    assert not os.path.exists(tmp_path / "db.db" / "t")


def test_tables_whose_reads_skip_level0_are_refused_and_not_created(tmp_path):
    options = {
        "warehouse": str(tmp_path),
        "path": "db.t",
        "primary-key": "k",
        "bucket": "1",
        "deletion-vectors.enabled": "true",
    }
    with pytest.raises(BadInputError, match="skip level 0 .* write job"):
        make_writer(options, SPARK_SCHEMA, False)
    assert _table(str(tmp_path)).latest_schema() is None


@pytest.mark.java
def test_a_dynamic_partition_overwrite_of_a_dynamic_bucket_table_replaces_its_index(
    monkeypatch, java_paimon, tmp_path
):
    warehouse = str(tmp_path / "wh")
    options = {
        "warehouse": warehouse,
        "path": "db.t",
        "primary-key": "dt,k",
        "partition": "dt",
        "dynamic-bucket.target-row-num": "2",
        "dynamic-bucket.assigner-parallelism": "2",
    }
    _write(monkeypatch, options, [[(k, "a", "x") for k in range(6)], [(k, "b", "x") for k in range(3)]])
    new = [(k, "a", "n") for k in range(4, 9)]
    _write(monkeypatch, {**options, "partitionOverwriteMode": "dynamic"}, [new[:3], new[2:]], overwrite=True)
    path = _table(warehouse).path
    expected = _dicts(new + [(k, "b", "x") for k in range(3)])
    assert java_paimon.read(path) == expected
    assert pypaimon_rows(warehouse, "db.t") == expected
    index, live = _index_and_live_keys(path)
    assert index == live  # partition a's old hashes (keys 0..3) are gone with its files


@pytest.mark.parametrize("breaker", [truncated_manifest, unknown_schema_id], ids=lambda b: b.__name__)
def test_a_broken_table_is_refused_naming_the_file_and_nothing_changes(tmp_path, breaker):
    """The bad-input corpus's broken tables: the plan (before any task runs) fails naming what is
    broken, and not one byte of the table changes."""
    warehouse = str(tmp_path / "wh")
    build_sample_table(warehouse)
    named = breaker(warehouse, {})
    before = fingerprint(table_root(warehouse))
    schema = StructType([StructField("id", LongType()), *SPARK_SCHEMA.fields[1:]])
    with pytest.raises((PaimonFormatError, BadInputError), match=named):
        make_writer({"warehouse": warehouse, "path": IDENTIFIER}, schema, False)
    assert fingerprint(table_root(warehouse)) == before


def test_abort_after_a_commit_that_landed_and_then_raised_keeps_everything(monkeypatch, tmp_path):
    """Spark calls `abort` whenever `commit` raises, in a worker of its own (the writer unpickled
    again). A commit that raised after its snapshot landed must leave that snapshot's files and the
    table it created: abort finds the snapshot by the write's commit user and removes nothing."""
    import pickle

    from jobs.runtime.report import RunRecord

    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", "partition": "dt"}
    writer = make_writer(options, SPARK_SCHEMA, False)
    rows = [(1, "a", "x"), (2, "b", "y")]
    monkeypatch.setattr("pyspark.TaskContext.get", lambda: _Task(0))
    message = writer.write(_batches(rows))

    def landed_then_failed(self, snapshot_id):
        raise OSError("the run record could not be written")

    with monkeypatch.context() as patched:
        patched.setattr(RunRecord, "committed", landed_then_failed)
        with pytest.raises(OSError, match="run record"):
            writer.commit([message])
    pickle.loads(pickle.dumps(writer)).abort([message])
    assert _table(warehouse).snapshot_manager.latest_id() == 1
    assert len(_data_files(warehouse)) == 2
    assert pypaimon_rows(warehouse, "db.t") == _dicts(rows)
