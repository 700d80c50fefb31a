"""Stream options with Paimon's semantics: `streaming-read-overwrite` (an OVERWRITE snapshot Java
commits is skipped by default and delivered as -D of the rows it replaced and +I of its new rows
when the option is true, as Paimon's own stream scan reads it) and `read.changelog` on a
table with a column named `rowkind` (refused, naming both: Paimon 1.0 reserves the name); and the levels
a full first batch reads (Paimon's first stream plan).
"""

from __future__ import annotations

import pytest

from jobs.source import register
from jobs.source.location import SourceOptionError
from jobs.source.stream_overwrite import read_overwrite_option, reads_overwrite
from jobs.source.stream_pk import full_start
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.stream_runs import run_stream

BIGINT, STRING = parse_type("BIGINT"), parse_type("STRING")


@pytest.mark.java
def test_an_overwrite_streams_only_with_streaming_read_overwrite(spark_session, java_paimon, tmp_path):
    """Java's stream scan is the oracle where the replaced files hold each key once; where they hold
    a key twice or a retraction, the expectation is released Paimon 1.0's (PR #4697: the replaced
    files are read merged, deletes dropped): the oracle's bundle (a 1.0 snapshot of September 2024)
    predates it, retracting every row of them and failing on a retraction."""
    register(spark_session)
    path = str(tmp_path / "t")
    fields = [("dt", "STRING NOT NULL"), ("k", "BIGINT NOT NULL"), ("v", "STRING")]
    java_paimon.create_table(path, fields, ["dt"], ["dt", "k"], {"bucket": "1"})
    java_paimon.write(path, [{"dt": "a", "k": 1, "v": "x"}, {"dt": "a", "k": 2, "v": "y"}])
    java_paimon.write(path, [{"dt": "b", "k": 3, "v": "z"}])
    before = java_paimon.write(path, [{"dt": "b", "k": 3, "v": "z2"}, {"dt": "b", "k": 4, "v": "w"}])
    java_paimon.write(path, [{"dt": "a", "k": 5, "v": "n"}], overwrite={"dt": "a"})
    java_paimon.write(path, [{"dt": "b", "k": 6, "v": "m"}])
    start = {"scan.mode": "from-snapshot", "scan.snapshot-id": str(before + 1)}

    skipped = java_paimon.read_changelog(path, after=before)  # Paimon's default: no overwrite
    assert skipped == [("+I", {"dt": "b", "k": 6, "v": "m"})]
    assert run_stream(spark_session, path, str(tmp_path / "cp1"), **start) == skipped
    checkpoint = str(tmp_path / "cp2")
    delivered = run_stream(spark_session, path, checkpoint, **start, **{"streaming-read-overwrite": "true"})
    java_paimon.alter_table(path, [("set_option", "streaming-read-overwrite", "true")])
    expected = java_paimon.read_changelog(path, after=before)
    assert expected == [
        ("+I", {"dt": "a", "k": 5, "v": "n"}),
        ("+I", {"dt": "b", "k": 6, "v": "m"}),
        ("-D", {"dt": "a", "k": 1, "v": "x"}),
        ("-D", {"dt": "a", "k": 2, "v": "y"}),
    ]
    assert delivered == expected

    java_paimon.write(path, [{"dt": "b", "k": 4, "v": "w", "_kind": "-D"}])
    java_paimon.write(path, [{"dt": "b", "k": 7, "v": "p"}], overwrite={"dt": "b"})
    # dt=b's files: z; z2 and w; m; w's retraction: merged, the rows to retract are z2 and m only
    assert run_stream(spark_session, path, checkpoint) == [
        ("+I", {"dt": "b", "k": 7, "v": "p"}),
        ("-D", {"dt": "b", "k": 3, "v": "z2"}),
        ("-D", {"dt": "b", "k": 4, "v": "w"}),  # the APPEND of the retraction, as written
        ("-D", {"dt": "b", "k": 6, "v": "m"}),
    ]
    schema = Table(FileIO.for_path(path), path).schema
    assert reads_overwrite(path, schema, None)  # the table's option, unless the stream says
    assert not reads_overwrite(path, schema, read_overwrite_option({"Streaming-Read-Overwrite": "false"}))


def test_streaming_read_overwrite_is_refused_where_paimon_refuses_it():
    append = new_table_schema([("k", BIGINT), ("v", STRING)])
    with pytest.raises(SourceOptionError, match="'streaming-read-overwrite' = true needs a primary-key"):
        reads_overwrite("t", append, True)
    assert not reads_overwrite("t", append, None)
    lookup = new_table_schema([("k", BIGINT)], primary_keys=["k"], options={"changelog-producer": "lookup"})
    with pytest.raises(SourceOptionError, match="'changelog-producer' = lookup"):
        reads_overwrite("t", lookup, True)
    with pytest.raises(SourceOptionError, match="'streaming-read-overwrite' must be true or false"):
        read_overwrite_option({"streaming-read-overwrite": "yes"})


def test_a_rowkind_column_refuses_read_changelog(spark_session, tmp_path):
    register(spark_session)
    root = str(tmp_path / "t")
    table = Table(FileIO.for_path(root), root)
    fields = [("k", BIGINT), ("RowKind", STRING)]  # a table from before Paimon 1.0 may have one
    table.schema_manager.create_table(new_table_schema(fields, primary_keys=["k"], options={"bucket": "1"}))
    with pytest.raises(Exception, match=r"'read.changelog' = true adds the column 'rowkind'.*'RowKind'"):
        spark_session.readStream.format("paimon").option("read.changelog", "true").load(root)
    frame = spark_session.readStream.format("paimon").load(root)
    assert frame.columns == ["k", "RowKind"]  # without the option: the table's columns


def test_a_full_start_reads_the_levels_paimons_first_stream_plan_reads():
    def rule(**options: str) -> tuple[list[bool] | None, bool]:
        schema = new_table_schema([("k", BIGINT)], primary_keys=["k"], options=options)
        levels, replays = full_start(schema)
        return (None if levels is None else [levels(level) for level in range(6)]), replays

    assert rule() == (None, False)  # deduplicate, no lookup: every level, merged
    above_zero = [False, True, True, True, True, True]
    assert rule(**{"deletion-vectors.enabled": "true"}) == (above_zero, True)  # then its own delta
    both = {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"}
    assert rule(**both) == (above_zero, False)  # the lookup changelog carries level 0's rows
    assert rule(**{"merge-engine": "first-row"}) == (above_zero, False)
    top = [False, False, True, False, False, False]  # levels 0..2: the trigger + 1
    assert rule(**{"changelog-producer": "full-compaction", "num-sorted-run.compaction-trigger": "2"}) == (
        top,
        False,
    )
