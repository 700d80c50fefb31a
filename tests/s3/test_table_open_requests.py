"""A table is opened once per run (issue #26): on S3, counted by key through the proxy, a job reads
each schema file, snapshot and manifest list once per process, and executor tasks read no schema
(the pickled handle carries the driver's). Only what a commit's safety needs is read again: the
commit lists `schema/` and reads the LATEST hint and the latest snapshot afresh."""

from __future__ import annotations

import pickle
from collections import Counter

from jobs.read import read_table
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.snapshot_scan import data_manifests, resolve_snapshot
from paimon_format.table import Table
from tests.s3.proxy import ThrottlingProxy
from tests.support.cli_runs import run_job
from tests.support.factories import data_file
from tests.support.table_states import IDENTIFIER, build_sample_table


def metadata_reads(proxy: ThrottlingProxy) -> Counter[str]:
    """GETs of metadata files and LISTs of metadata directories, by what they name (the key from
    `schema/`, `snapshot/` or `manifest/` on; a LIST as `LIST <prefix>`)."""
    counts: Counter[str] = Counter()
    for request in proxy.requests:
        if request.kind == "GET":
            for folder in ("/schema/", "/snapshot/", "/manifest/"):
                if folder in request.path:
                    counts[folder.strip("/") + "/" + request.path.rsplit("/", 1)[1]] += 1
        elif request.kind == "LIST":
            for folder in ("schema", "snapshot", "manifest"):
                if f"%2F{folder}%2F" in request.query or f"/{folder}/" in request.query:
                    counts[f"LIST {folder}/"] += 1
    return counts


def beyond(counts: Counter[str], allowed: dict[str, int]) -> dict[str, int]:
    """Keys read more often than allowed (1 unless `allowed` names the key)."""
    return {key: n for key, n in counts.items() if n > allowed.get(key, 1)}


def test_read_table_compact_and_write_read_each_metadata_file_once(spark_session, s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=2, storage_options=options)  # snapshot 2 is the latest

    proxy.reset()
    assert read_table(spark_session, warehouse, IDENTIFIER, storage_options=options).count() == 12
    reads = metadata_reads(proxy)
    assert reads["schema/schema-0"] == 1 and reads["LIST schema/"] == 1  # not once per executor task
    assert reads["snapshot/LATEST"] == 1 and reads["snapshot/snapshot-2"] == 1
    assert beyond(reads, {}) == {}, reads

    proxy.reset()
    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options, "strategy": "full"}
    code, record = run_job(tmp_path, "compact", config, capsys)
    assert code == 0 and record["snapshot_ids"]["committed"] == 3, record
    reads = metadata_reads(proxy)
    # the open check and the plan share one read; the commit reads the hint, the latest snapshot
    # and the schema listing again (its safety), and no schema file or manifest list a second time
    fresh_for_commit = {"snapshot/LATEST": 2, "snapshot/snapshot-2": 2, "LIST schema/": 2}
    assert reads["schema/schema-0"] == 1
    assert {key: reads[key] for key in fresh_for_commit} == fresh_for_commit
    assert beyond(reads, fresh_for_commit) == {}, reads

    proxy.reset()  # a write into the existing table: its plan, executor tasks, commit
    rows = spark_session.createDataFrame([(100, "2024-01-01", "x")], "id long, dt string, v string")
    write_dataframe(rows, WriteSettings(warehouse, IDENTIFIER, storage_options=options))
    reads = metadata_reads(proxy)
    fresh_for_commit = {"snapshot/LATEST": 2, "snapshot/snapshot-3": 2, "LIST schema/": 2}
    assert reads["schema/schema-0"] == 1
    assert {key: reads[key] for key in fresh_for_commit} == fresh_for_commit
    assert beyond(reads, fresh_for_commit) == {}, reads


def test_a_pickled_handle_carries_the_schema_and_a_commit_rereads_only_what_it_must(s3):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    creator = Table.open(warehouse, "db.t", options)
    creator.schema_manager.create_table(
        new_table_schema([("id", parse_type("BIGINT")), ("dt", parse_type("STRING"))], partition_keys=["dt"])
    )
    day = serialize_row(["2024-01-01"], creator.partition_types)
    for n in range(2):
        SnapshotCommit(creator).append([CommitMessage(day, 0, -1, [data_file(f"data-{n}.parquet")])])

    proxy.reset()
    table = Table.open(warehouse, "db.t", options)
    table.check_metadata()
    latest = resolve_snapshot(table)
    assert latest is not None and latest.id == 2
    assert len(data_manifests(table, latest)) == 2
    opened = len(proxy.requests)

    copy = pickle.loads(pickle.dumps(table))  # what an executor task gets
    assert copy.schema.id == 0 and copy.schema_by_id(0) is not None
    assert copy.partition_dir(day) == "dt=2024-01-01"
    assert len(proxy.requests) == opened  # the task read no schema

    SnapshotCommit(table).append([CommitMessage(day, 0, -1, [data_file("data-2.parquet")])])
    reads = metadata_reads(proxy)
    fresh_for_commit = {"snapshot/LATEST": 2, "snapshot/snapshot-2": 2, "LIST schema/": 2}
    assert {key: reads[key] for key in fresh_for_commit} == fresh_for_commit
    assert reads["schema/schema-0"] == 1
    assert beyond(reads, fresh_for_commit) == {}, reads  # the commit's base: the plan's lists
    assert table.snapshot_manager.latest() is not None and table.snapshot_manager.latest().id == 3
