"""The source's planning without Spark (`jobs/source/scan.py`, what `partitions()` runs) on Paimon
Java's fixture tables: which snapshot the options name, which terms may skip what, and that the
splits left after skipping still read every row Java reads with the filter applied."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest

from jobs.source import SourceUnavailableError, register
from jobs.source.location import SourceOptionError
from jobs.source.scan import open_read, plan_read, read_options, sort_terms
from paimon_format.scan.split_read import read_split
from paimon_format.scan.value_filter import Negated, ValueTest
from tests.java.helpers import _spelled
from tests.java.oracle import sort_key

pytestmark = pytest.mark.java


def options_for(warehouse: str, name: str, **extra: str) -> dict[str, str]:
    return {
        "warehouse": warehouse,
        "path": f"db.{name}",
        **{k.replace("_", "-"): v for k, v in extra.items()},
    }


def planned_rows(plan: Any) -> list[dict]:
    opened = plan.opened
    batches = [
        batch
        for task in plan.tasks
        for split in task
        for batch in read_split(opened.table, split, read_schema=opened.schema)
    ]
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted((_spelled(row) for row in rows), key=sort_key)


def latest_rows(table: Any) -> list[dict]:
    latest = max(int(n) for kind, n in table.reads if kind == "snapshot")
    return table.reads[("snapshot", str(latest))]


@pytest.mark.parametrize(
    "name, terms, keep, skipped",
    [
        # a primary-key table whose reads merge: the key column `id` skips files, the partition terms
        # prune partitions and manifests
        (
            "pk_changelog",
            [ValueTest("id", ">", (17,)), ValueTest("dt", "=", (dt.date(2024, 1, 3),))],
            lambda r: r["id"] > 17 and r["dt"] == dt.date(2024, 1, 3),
            ("files_skipped_by_stats", "partitions_skipped"),
        ),
        # schema evolution: the first file's stats are under the column's old name `s` (same field id)
        (
            "types_parquet",
            [ValueTest("s_renamed", "starts_with", ("s-4",))],
            lambda r: r["s_renamed"] is not None and r["s_renamed"].startswith("s-4"),
            ("files_skipped_by_stats",),
        ),
    ],
)
def test_skipping_keeps_every_row_the_filter_selects(java_templates, name, terms, keep, skipped):
    warehouse, fixtures = java_templates
    opened = open_read(read_options(options_for(warehouse, name)))
    whole = plan_read(opened, sort_terms(opened, []), 2)
    pruned = plan_read(opened, sort_terms(opened, terms), 2)
    expected = [row for row in latest_rows(fixtures[name]) if keep(row)]
    assert expected and planned_rows(whole) == latest_rows(fixtures[name])
    assert [row for row in planned_rows(pruned) if keep(row)] == expected
    assert all(pruned.record[key] > 0 for key in skipped), pruned.record
    assert pruned.record["files"] < whole.record["files"]


def test_where_reads_merge_only_key_columns_skip_files(java_templates):
    """Partial update merges the versions of a key: an old version's stats say nothing about the
    newest, so a value column never skips a file there; the key column does."""
    warehouse, _ = java_templates
    opened = open_read(read_options(options_for(warehouse, "pk_partial_update")))
    on_value = sort_terms(opened, [ValueTest("a", "=", (10,))])
    on_key = sort_terms(opened, [ValueTest("k", "=", (1,)), None])
    assert on_value.files == [] and on_value.exact == set()
    assert on_key.files == [ValueTest("k", "=", (1,))] and on_key.exact == set()


def test_partition_terms_are_exact_only_with_literals_of_the_columns_type(java_templates):
    warehouse, _ = java_templates
    opened = open_read(read_options(options_for(warehouse, "pk_changelog")))
    pushed = sort_terms(
        opened,
        [
            ValueTest("dt", "=", (dt.date(2024, 1, 2),)),
            Negated(ValueTest("region", "in", ("eu/west",))),
            ValueTest("dt", "=", ("2024-01-02",)),  # text for a DATE: Spark re-applies it
            ValueTest("v", "=", ("x",)),  # a value column of a merging table: Spark alone
        ],
    )
    assert pushed.exact == {0, 1} and len(pushed.partition) == 2 and pushed.files == []


def test_time_travel_options_pick_the_snapshot_paimon_picks(java_templates):
    warehouse, _ = java_templates
    opened = open_read(read_options(options_for(warehouse, "pk_lookup_dv")))
    manager = opened.table.snapshot_manager
    second = manager.snapshot(2)
    by_millis = open_read(
        read_options(
            options_for(warehouse, "pk_lookup_dv", **{"scan.timestamp-millis": str(second.time_millis)})
        )
    )
    assert by_millis.snapshot.id == 2
    iso = dt.datetime.fromtimestamp(second.time_millis / 1000, dt.timezone.utc).isoformat()
    assert open_read(read_options(options_for(warehouse, "pk_lookup_dv", timestamp=iso))).snapshot.id == 2
    with pytest.raises(SourceOptionError, match="option 'scan.timestamp-millis': no retained snapshot"):
        open_read(read_options(options_for(warehouse, "pk_lookup_dv", **{"scan.timestamp-millis": "1"})))
    compacted = open_read(
        read_options(options_for(warehouse, "pk_changelog", **{"scan.mode": "compacted-full"}))
    )
    newer = range(compacted.snapshot.id + 1, compacted.table.snapshot_manager.latest_id() + 1)
    assert compacted.snapshot.commit_kind == "COMPACT"
    assert all(compacted.table.snapshot_manager.snapshot(i).commit_kind != "COMPACT" for i in newer)


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "say which table"),
        ({"path": "db.t"}, "option 'warehouse' is required"),
        ({"path": "/w/db.db/t", "snapshot-id": "0"}, "option 'snapshot-id' must be a positive integer"),
        ({"path": "/w/db.db/t", "scan.snapshot-id": "3", "tag": "x"}, "'scan.snapshot-id' and 'tag'"),
        ({"path": "/w/db.db/t", "timestamp": "yesterday-ish"}, "option 'timestamp'"),
        ({"path": "/w/db.db/t", "scan.mode": "incremental"}, "option 'scan.mode' = 'incremental'"),
        ({"path": "/w/db.db/t", "scan.mode": "from-snapshot"}, "needs option 'snapshot-id'"),
        ({"path": "/w/db.db/t", "scan.mode": "latest", "tag": "x"}, "option 'tag' contradicts 'scan.mode'"),
        ({"path": "/w/db.db/t", "parallelism": "-2"}, "option 'parallelism'"),
    ],
)
def test_bad_options_name_the_option(options, message):
    with pytest.raises(SourceOptionError, match=message):
        read_options(options)


def test_unknown_table_snapshot_and_tag_name_their_option(java_templates, tmp_path):
    warehouse, _ = java_templates
    with pytest.raises(SourceOptionError, match="option 'path': no Paimon table at"):
        open_read(read_options({"path": str(tmp_path / "none")}))
    with pytest.raises(SourceOptionError, match="option 'tag' = 'nope'"):
        open_read(read_options(options_for(warehouse, "pk_changelog", tag="nope")))
    with pytest.raises(SourceOptionError, match="option 'snapshot-id' = 1"):  # expired by Java
        open_read(read_options(options_for(warehouse, "pk_changelog", snapshot_id="1")))


def test_spark_35_is_refused_with_a_clear_error_and_importing_needs_no_spark():
    class Spark35:
        version = "3.5.9"

    with pytest.raises(SourceUnavailableError, match="needs Spark 4.*read_table"):
        register(Spark35())  # type: ignore[arg-type]
    # the package, its planning and its filters load without pyspark (Spark 3.5 has no datasource module)
    probe = (
        "import sys, jobs.source, jobs.source.scan, jobs.source.filters; "
        "print(any(m.startswith('pyspark') for m in sys.modules))"
    )
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        == "False\n"
    )
