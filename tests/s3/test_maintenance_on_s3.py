"""The maintenance jobs against a real S3-compatible server (moto on loopback, behind the proxy).

Each job runs through the CLI (`python -m jobs <op> --config F`, in-process) on an s3:// warehouse
whose YAML carries only the endpoint in `storage_options`; credentials come from the AWS environment.
The oracle is pypaimon reading a downloaded copy of the warehouse before and after, plus the bucket's
own listing: what a job deleted is compared with what the table's retained readers need.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.maintenance.references import manifest_names, snapshot_metadata_files
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.cli_runs import run_job
from tests.support.pypaimon_reads import pypaimon_rows
from tests.support.s3_copies import download
from tests.support.table_states import (
    IDENTIFIER,
    TABLE_OPTIONS,
    append_rows,
    batch,
    build_sample_table,
    listed_files,
    missing_referenced,
    open_table,
    view,
)

pytest.importorskip("pypaimon")

HINTS = {"snapshot/LATEST", "snapshot/EARLIEST"}
FUTURE = "2100-01-01 00:00:00"  # every snapshot is older than this cutoff
TWO_DAYS_S = 2 * 24 * 3600  # older than remove-orphan-files' default older_than (1d)


def job_config(warehouse: str, options: dict, **keys) -> dict:
    return {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options, **keys}


def overwrite_rows(table: Table, data: pa.Table) -> int:
    """Replace the whole table's content with `data` as one OVERWRITE snapshot; returns its id."""
    written = write_table_files(table.file_io, table.path, table.schema, data, 10_000)
    messages = [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in written]
    return SnapshotCommit(table).overwrite(messages).id


def data_files(table: Table) -> set[str]:
    return {path for path in listed_files(table) if "/bucket-" in path}


def needed(table: Table) -> set[str]:
    """What a reader of any retained snapshot or tag opens, plus the table's own metadata files."""
    manager = table.snapshot_manager
    files = {f"snapshot/snapshot-{i}" for i in manager.snapshot_ids()}
    files |= {f"schema/schema-{i}" for i in table.schema_manager.list_ids()}
    files |= {f"tag/tag-{name}" for name in table.tag_manager.tag_names()}
    roots = [manager.snapshot(i) for i in manager.snapshot_ids()] + list(table.tag_manager.tags().values())
    for snapshot in roots:
        files.update(snapshot_metadata_files(snapshot))
        files.update(f"manifest/{name}" for name in manifest_names(table, snapshot))
        for entry in live_entries(table, snapshot):
            files.update(table.entry_relpaths(entry))
    return files


def bucket_keys(table: Table) -> set[str]:
    """Every object under the table, listed afresh (no s3fs listing cache)."""
    table.file_io.fs.invalidate_cache()
    return listed_files(table)


def plant(table: Table, relative: str) -> str:
    path = f"{table.path}/{relative}"
    table.file_io.write_bytes(path, b"left behind by a crashed writer")
    return relative


def _bucket_client(table: Table):
    import boto3

    return boto3.client("s3", endpoint_url=table.file_io.fs.endpoint_url, region_name="us-east-1")


def _key(table: Table, relative: str) -> tuple[str, str]:
    bucket, key = table.path.removeprefix("s3://").split("/", 1)
    return bucket, f"{key}/{relative}"


def put_directory_markers(table: Table, *relatives: str) -> list[str]:
    """Zero-byte "dir/" keys, as the S3 console's "Create folder" or Hadoop S3A's mkdirs leave them."""
    client = _bucket_client(table)
    for relative in relatives:
        bucket, key = _key(table, relative)
        client.put_object(Bucket=bucket, Key=key, Body=b"")
    return list(relatives)


def marker_exists(table: Table, relative: str) -> bool:
    from botocore.exceptions import ClientError

    bucket, key = _key(table, relative)
    try:
        _bucket_client(table).head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def build_named_table(warehouse: str, name: str, options: dict, commits: int) -> Table:
    """A partitioned append table `db.<name>` with `commits` snapshots (the second table of a run)."""
    root = f"{warehouse}/db.db/{name}"
    table = Table(FileIO.for_path(root, options), root)
    schema = new_table_schema(
        [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))],
        partition_keys=["dt"],
        options=TABLE_OPTIONS,
    )
    table.schema_manager.create_table(schema)
    table.refresh()
    for i in range(commits):
        append_rows(table, batch(100 * i, 4))
    return table


def test_expire_snapshots_on_s3_keeps_what_retained_snapshots_read_and_deletes_the_rest(
    spark_session, s3, tmp_path, capsys
):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=1, rows_per_commit=6, storage_options=options)  # 1: A
    only_in_1 = data_files(table)
    overwrite_rows(table, batch(100, 6))  # 2: B replaces A
    table.tag_manager.create_tag("t2", table.snapshot_manager.snapshot(2))  # the tag keeps B
    before_3 = data_files(table)
    append_rows(table, batch(200, 3))  # 3: + C
    only_in_3 = data_files(table) - before_3
    overwrite_rows(table, batch(300, 6))  # 4: D replaces B and C
    append_rows(table, batch(400, 3))  # 5
    append_rows(table, batch(500, 3))  # 6
    before = view(download(warehouse, options, tmp_path / "before"))
    listed_before = bucket_keys(table)
    assert before.latest == 6 and sorted(before.rows_by_tag) == ["t2"]

    config = job_config(warehouse, options, retain_min=2, retain_max=10, older_than=FUTURE)
    code, record = run_job(tmp_path, "expire-snapshots", config, capsys)
    assert code == 0, record["error"]
    assert record["counts"]["snapshots_expired"] == 4
    assert proxy.count("POST", "delete", status=200) >= 1  # files went in DeleteObjects batches

    after = view(download(warehouse, options, tmp_path / "after"))
    assert sorted(after.rows_by_snapshot) == [5, 6]
    for snapshot_id in (5, 6):
        assert after.rows_by_snapshot[snapshot_id] == before.rows_by_snapshot[snapshot_id]
    assert after.rows_by_tag == before.rows_by_tag  # B, read through the tag
    retained = open_table(warehouse, options)
    listed_after = bucket_keys(retained)
    deleted = listed_before - listed_after
    assert listed_after - HINTS <= listed_before  # nothing new but the hints
    assert listed_after - HINTS == (listed_before - HINTS) & needed(retained)  # only the unneeded went
    assert only_in_1 | only_in_3 <= deleted  # data only the expired snapshots read is gone
    assert {f"snapshot/snapshot-{i}" for i in range(1, 5)} <= deleted
    assert not deleted & needed(retained)


def test_remove_orphan_files_on_s3_deletes_old_orphans_only(
    spark_session, s3, age_s3_objects, tmp_path, capsys
):
    """Also with directory markers ("dir/" keys that S3 consoles and Hadoop S3A leave): not files of
    the table, so listed past and kept."""
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=2, storage_options=options)
    markers = put_directory_markers(table, "dt=2024-01-01/", "dt=2024-01-01/bucket-0/", "branch/")
    orphans = {
        plant(table, f"dt=2024-01-01/bucket-0/data-{uuid.uuid4()}-0.parquet"),
        plant(table, f"manifest/manifest-{uuid.uuid4()}-0"),
        plant(table, f"snapshot/.snapshot-3.{uuid.uuid4()}.tmp"),
    }
    listed_before = bucket_keys(table)
    # Everything already there is two days old on the server, referenced files too: only being
    # referenced keeps those. A file uploaded afterwards is young: the age filter keeps it.
    age_s3_objects([f"{table.path}/{path}" for path in listed_before], TWO_DAYS_S)
    young = plant(table, f"dt=2024-01-02/bucket-0/data-{uuid.uuid4()}-0.parquet")
    before = view(download(warehouse, options, tmp_path / "before"))

    proxy.reset()
    code, record = run_job(
        tmp_path, "remove-orphan-files", job_config(warehouse, options), capsys, "--dry-run"
    )
    assert code == 0, record["error"]
    assert record["counts"]["orphan_files"] == 3 and record["counts"]["too_young_files"] == 1
    assert proxy.count("PUT") == proxy.count("POST") == proxy.count("DELETE") == 0  # a dry run writes nothing
    assert bucket_keys(table) == listed_before | {young}

    code, record = run_job(tmp_path, "remove-orphan-files", job_config(warehouse, options), capsys)
    assert code == 0, record["error"]
    assert record["counts"]["orphan_files"] == 3 and record["counts"]["too_young_files"] == 1

    listed_after = bucket_keys(table)
    assert listed_after == (listed_before | {young}) - orphans
    assert all(marker_exists(table, marker) for marker in markers)
    assert view(download(warehouse, options, tmp_path / "after")) == before
    assert not missing_referenced(open_table(warehouse, options))


def test_remove_orphan_files_on_s3_fails_with_nothing_deleted_when_a_listing_is_denied(
    spark_session, s3, age_s3_objects, tmp_path, capsys
):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=2, storage_options=options)
    plant(table, f"dt=2024-01-01/bucket-0/data-{uuid.uuid4()}-0.parquet")
    plant(table, f"manifest/manifest-{uuid.uuid4()}-0")
    listed_before = bucket_keys(table)
    age_s3_objects([f"{table.path}/{path}" for path in listed_before], TWO_DAYS_S)
    denied_prefix = f"{table.path.removeprefix('s3://').split('/', 1)[1]}/dt=2024-01-03/"

    def deny_listing(method: str, path: str, query: str) -> bool:
        # the partition's own listing (waves) or any key range (prefix listing: a table this small is
        # one range, which holds the partition)
        listing = method == "GET" and "list-type=2" in query
        return listing and (f"prefix={denied_prefix}" in query or "start-after=" in query)

    proxy.reset(deny=deny_listing)  # one partition directory cannot be listed (403 AccessDenied)
    config = job_config(warehouse, options, lock={"dir": str(tmp_path / "locks")})  # the table's deletes
    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys)
    denied = proxy.count(status=403)
    deletes = proxy.count("POST", "delete") + proxy.count("DELETE")
    proxy.reset()
    assert denied >= 1
    error = record["error"]  # a storage failure naming what could not be listed: the directory or range
    assert code == 1 and ("dt=2024-01-03" in error or "keys after 'dt=2024-01-01/'" in error), error
    assert deletes == 0
    assert bucket_keys(table) == listed_before


def test_drop_partition_on_s3_is_gone_at_the_new_snapshot_and_readable_before(
    spark_session, s3, tmp_path, capsys
):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=2, storage_options=options)
    before = view(download(warehouse, options, tmp_path / "before"))

    config = job_config(warehouse, options, partitions=[{"dt": "2024-01-01"}])
    code, record = run_job(tmp_path, "drop-partition", config, capsys)
    assert code == 0, record["error"]
    assert record["snapshot_ids"]["committed"] == 3 and record["snapshot_ids"]["committed_ids"] == [3]

    after = view(download(warehouse, options, tmp_path / "after"))
    kept = [row for row in before.rows_by_snapshot[2] if row["dt"] != "2024-01-01"]
    assert after.latest == 3 and after.rows_by_snapshot[3] == kept
    assert len(kept) < len(before.rows_by_snapshot[2])
    assert {i: after.rows_by_snapshot[i] for i in (1, 2)} == {i: before.rows_by_snapshot[i] for i in (1, 2)}
    assert after.rows_by_tag == before.rows_by_tag


def test_expire_partitions_on_s3_drops_old_partitions_at_a_new_snapshot(spark_session, s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=1, storage_options=options)  # 2024-01-01 .. 03
    today = dt.date.today().isoformat()
    append_rows(
        table,
        pa.table({"id": pa.array([90, 91], pa.int64()), "dt": [today, today], "v": ["v90", "v91"]}),
    )
    before = view(download(warehouse, options, tmp_path / "before"))

    config = job_config(warehouse, options, expiration_time="7d", timestamp_formatter="yyyy-MM-dd")
    code, record = run_job(tmp_path, "expire-partitions", config, capsys)
    assert code == 0, record["error"]
    assert (
        record["snapshot_ids"]["committed"] == 3
        and record["snapshot_ids"]["committed_ids"] == [3]
        and record["counts"]["partitions"] == 3
    )

    after = view(download(warehouse, options, tmp_path / "after"))
    assert after.latest == 3 and after.rows_by_snapshot[3] == [
        r for r in before.latest_rows if r["dt"] == today
    ]
    assert {i: after.rows_by_snapshot[i] for i in (1, 2)} == before.rows_by_snapshot


def test_maintain_on_s3_two_tables_in_one_run_under_a_lock_in_the_bucket(
    spark_session, s3, age_s3_objects, tmp_path, capsys
):
    """remove-orphan-files on both tables in one maintain run (the cheapest operation that lists and
    deletes on S3; expire-snapshots on S3 has its own test), each table under its lock in the bucket."""
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    tables = {
        "db.t": build_sample_table(warehouse, commits=3, storage_options=options),
        "db.u": build_named_table(warehouse, "u", options, commits=3),
    }
    orphans = {name: plant(table, f"manifest/manifest-{uuid.uuid4()}-0") for name, table in tables.items()}
    listed_before = {name: bucket_keys(table) for name, table in tables.items()}
    for table, listed in zip(tables.values(), listed_before.values(), strict=True):
        age_s3_objects([f"{table.path}/{path}" for path in listed], TWO_DAYS_S)
    local_before = download(warehouse, options, tmp_path / "before")
    before_t = view(local_before)
    before_u = {i: pypaimon_rows(local_before, "db.u", i) for i in (1, 2, 3)}

    config = {
        "warehouse": warehouse,
        "storage_options": options,
        "tables": ["db.*"],
        "strict": True,
        "defaults": {"remove_orphan_files": {"older_than": "1d"}},
    }
    proxy.reset()
    code, record = run_job(tmp_path, "maintain", config, capsys)
    assert code == 0, record.get("error")
    outcomes = record["details"]["tables"]
    assert {name: outcome["status"] for name, outcome in outcomes.items()} == dict.fromkeys(tables, "done")

    lock_dir = f"{warehouse.removeprefix('s3://').split('/', 1)[1]}/_maintenance/locks"
    for name in tables:
        key = f"{lock_dir}/{name}.lock"
        created = [r for r in proxy.requests if r.conditional and r.path.endswith(key) and r.status == 200]
        assert len(created) == 1, name  # taken with create-if-absent, in the bucket
        assert any(r.method == "DELETE" and r.path.endswith(key) for r in proxy.requests), name
    file_io = FileIO.for_path(warehouse, options)
    file_io.fs.invalidate_cache()
    assert not any(file_io.exists(f"{warehouse}/_maintenance/locks/{name}.lock") for name in tables)

    for name in tables:
        reopened = Table.open(warehouse, name, options)
        assert bucket_keys(reopened) == listed_before[name] - {orphans[name]}, name
        assert not missing_referenced(reopened), name
    local_after = download(warehouse, options, tmp_path / "after")
    assert view(local_after) == before_t
    assert {i: pypaimon_rows(local_after, "db.u", i) for i in (1, 2, 3)} == before_u
    assert len(before_u[3]) == 12
