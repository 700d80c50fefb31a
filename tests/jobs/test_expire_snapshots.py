"""expire-snapshots on local Spark: what goes, what stays, dry run, crashes and reruns.

Oracles: pypaimon reads every retained snapshot and tag before and after; `leftovers` (files no
retained snapshot or tag reads) must be empty afterwards, i.e. everything only the expired snapshots
used is gone; `missing_needed` must be empty, i.e. nothing a retained reader opens was deleted.

"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.expire_snapshots import (
    STEP_FILES,
    STEP_LISTS,
    STEP_MANIFESTS,
    STEP_PLANNED,
    STEP_SNAPSHOT,
    ExpiryRequest,
    expire_snapshots,
)
from jobs.runtime.local_frame import LocalSession
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.model.binary_row import deserialize_row
from tests.support.factories import data_file, make_table, message
from tests.support.table_states import (
    append_rows,
    batch,
    build_sample_table,
    fingerprint,
    listed_files,
    open_table,
    table_root,
    view,
)

FUTURE = "2100-01-01 00:00:00"  # every snapshot is older than this cutoff
REPO = Path(__file__).resolve().parents[2]


def needed(table, first_retained: int | None = None) -> set[str]:
    """Every file a reader of a retained snapshot or tag opens, plus the table's own metadata files.

    Live files only: a file that a retained manifest names in a DELETE entry is not needed (Paimon's
    expiry deletes it too). `first_retained`: ignore snapshots below it (half-expired after a crash).
    """
    from paimon_format.maintenance.references import (
        index_file_relpaths,
        manifest_names,
        snapshot_metadata_files,
    )
    from paimon_format.scan.snapshot_scan import changelog_entries, index_entries, live_entries

    manager = table.snapshot_manager
    ids = [i for i in manager.snapshot_ids() if first_retained is None or i >= first_retained]
    files = {f"snapshot/snapshot-{i}" for i in manager.snapshot_ids()}
    files |= {f"schema/schema-{i}" for i in table.schema_manager.list_ids()}
    files |= {f"tag/tag-{name}" for name in table.tag_manager.tag_names()}
    for snapshot in [manager.snapshot(i) for i in ids] + list(table.tag_manager.tags().values()):
        files.update(snapshot_metadata_files(snapshot))
        files.update(f"manifest/{name}" for name in manifest_names(table, snapshot))
        for entry in live_entries(table, snapshot) + changelog_entries(table, snapshot):
            files.update(table.entry_relpaths(entry))
        for index_entry in index_entries(table, snapshot):
            files.update(index_file_relpaths(index_entry))
    return files


def leftovers(table) -> set[str]:
    """Files nothing retained needs (besides the hints): must be empty after an expiry."""
    return listed_files(table) - needed(table) - {"snapshot/LATEST", "snapshot/EARLIEST"}


def missing_needed(table, first_retained: int | None = None) -> set[str]:
    return needed(table, first_retained) - listed_files(table)


# -- the seed's ADD/DELETE ordering, on metadata with real (empty) files ------------------------------


def touch(table, partition: str, *names: str) -> None:
    for name in names:
        path = Path(table.path) / f"dt={partition}" / "bucket-0" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def exists(table, partition: str, name: str) -> bool:
    return (Path(table.path) / f"dt={partition}" / "bucket-0" / name).exists()


def test_add_then_delete_goes_delete_then_add_stays_and_tags_protect(spark_session, tmp_path):
    table = make_table(str(tmp_path / "db.db" / "t"))
    commit = SnapshotCommit(table)
    a, b, c, d, keep = (data_file(f"data-{n}.parquet") for n in ("a", "b", "c", "d", "keep"))
    touch(
        table,
        "p",
        "data-a.parquet",
        "data-b.parquet",
        "data-c.parquet",
        "data-d.parquet",
        "data-keep.parquet",
    )
    commit.append([message(table, ["p"], a, b, keep)])  # 1
    commit.append([message(table, ["p"], c, d, deleted=[a])])  # 2: a added at 1, deleted at 2 -> goes
    table.tag_manager.create_tag("t2", table.snapshot_manager.snapshot(2))  # the tag keeps c and d live
    commit.append([message(table, ["p"], deleted=[b, c])])  # 3: c goes unless tagged (it is)
    commit.append([message(table, ["p"], b, deleted=[d])])  # 4: b deleted at 3, added again at 4 -> stays
    for i in range(3):
        commit.append([message(table, ["p"], data_file(f"data-x{i}.parquet"))])  # 5, 6, 7
        touch(table, "p", f"data-x{i}.parquet")

    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=2, older_than=FUTURE))

    assert record.snapshot_ids["begin"] == 1 and record.snapshot_ids["end"] == 6
    assert table.snapshot_manager.snapshot_ids() == [6, 7]
    assert not exists(table, "p", "data-a.parquet")
    assert exists(table, "p", "data-b.parquet") and exists(table, "p", "data-keep.parquet")
    assert exists(table, "p", "data-c.parquet") and exists(table, "p", "data-d.parquet")  # tag t2
    assert record.counts["files_deleted"] == 1
    assert (Path(table.path) / "snapshot" / "EARLIEST").read_text() == "6"


# -- real tables: appends, overwrite, dropped partition, tags -----------------------------------------


def busy_table(warehouse: str):
    """Appends, a tag, an overwrite of one partition and a dropped partition (overwrite with nothing)."""
    table = build_sample_table(warehouse, commits=4)  # tag t2 on snapshot 2
    committer = SnapshotCommit(table)
    written = write_table_files(table.file_io, table.path, table.schema, batch(100, 4, days=1), 5000)
    committer.overwrite(
        [CommitMessage(p, bucket, -1, files) for p, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-01"],
    )
    committer.overwrite(
        [], partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-02"]
    )
    for i in range(3):
        append_rows(table, batch(200 + 10 * i, 3))
    return table


def test_expiry_keeps_retained_snapshots_and_tags_readable_and_leaves_no_orphans(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = busy_table(warehouse)
    before = view(warehouse)
    listed_before = listed_files(table)

    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=3, older_than=FUTURE))

    after = view(warehouse)
    kept = table.snapshot_manager.snapshot_ids()
    assert kept == [7, 8, 9] and record.counts["snapshots_expired"] == 6
    assert {i: after.rows_by_snapshot[i] for i in kept} == {i: before.rows_by_snapshot[i] for i in kept}
    assert after.rows_by_tag == before.rows_by_tag
    assert missing_needed(table) == set()
    assert leftovers(table) == set()  # everything only the expired snapshots used is gone
    assert record.counts["files_deleted"] > 0 and record.counts["manifest_lists_deleted"] > 0
    deleted = listed_before - listed_files(table)
    assert "snapshot/snapshot-1" in deleted and "tag/tag-t2" not in deleted


def test_retain_max_and_age_and_limit_through_the_job(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=6)
    # default age: 1h, all are newer
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1))
    assert record.counts["snapshots_expired"] == 0 and table.snapshot_manager.snapshot_ids() == list(
        range(1, 7)
    )
    # age ignored beyond max
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, retain_max=4))
    assert table.snapshot_manager.snapshot_ids() == [3, 4, 5, 6]
    record = expire_snapshots(
        spark_session,
        table,
        ExpiryRequest(retain_min=1, older_than=FUTURE, max_deletes=2),
    )
    assert (
        table.snapshot_manager.snapshot_ids() == [5, 6] and record.snapshot_ids["limited_by"] == "max_deletes"
    )
    assert missing_needed(table) == set() and leftovers(table) == set()


def test_consumer_keeps_its_next_snapshot(spark_session, tmp_path):
    from paimon_format.consumers import ConsumerManager

    table = build_sample_table(str(tmp_path / "wh"), commits=6)
    ConsumerManager(table.file_io, table.path).reset_consumer("stream-1", 3)
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [3, 4, 5, 6]
    assert record.snapshot_ids["limited_by"] == "consumer"


def test_dry_run_deletes_nothing_and_reports_the_plan(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = busy_table(warehouse)
    before = fingerprint(table.path)
    record = expire_snapshots(
        spark_session,
        table,
        ExpiryRequest(retain_min=3, older_than=FUTURE),
        dry_run=True,
    )
    assert fingerprint(table.path) == before
    assert record.counts["snapshots_to_expire"] == 6 and record.counts["files_to_delete"] > 0
    assert record.samples["files_to_delete"] and record.samples["manifest_lists_to_delete"]
    assert "files_deleted" not in record.counts


# One sample table of each layout expires on Spark; the rest differ from them only in their data
# files' format or column types (a DATE partition), which expiry never reads: it deletes data files
# by the paths the manifests give, made by the same functions in either session, and its frames have
# the same columns whatever the table holds. So those expire in the driver (`LocalSession`), with the
# same checks.
ON_SPARK = {"append_parted", "pk_fixed", "pk_dynamic", "dropped_part", "fmt_orc"}


def test_pypaimon_written_tables(spark_session, tmp_path):
    """Append, partitioned with a tag, fixed/dynamic-bucket primary key, ORC/Avro, a dropped partition."""
    from paimon_format.table import Table
    from tests.interop.oracle import create_sample_tables, read_rows

    warehouse = str(tmp_path / "py")
    samples = create_sample_tables(warehouse)
    assert ON_SPARK < set(samples)
    expired = 0
    for name, info in samples.items():
        table = Table.open(warehouse, info.identifier)
        latest = table.snapshot_manager.latest_id()
        session = spark_session if name in ON_SPARK else LocalSession()
        record = expire_snapshots(session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
        expired += record.counts["snapshots_expired"]
        assert table.snapshot_manager.snapshot_ids() == [latest], info.name
        assert missing_needed(table) == set() and leftovers(table) == set(), info.name
        assert read_rows(warehouse, info.identifier) == info.expected[latest], info.name
        for tag, tagged_id in info.tags.items():
            assert read_rows(warehouse, info.identifier, tag=tag) == info.expected[tagged_id], info.name
    assert expired > 0


# -- crash at each step, then a rerun: the same files as an uninterrupted run -------------------------


def run_job(warehouse: str, crash_at: str | None = None, skip: int = 0) -> subprocess.CompletedProcess:
    config = Path(warehouse).parent / f"{Path(warehouse).name}.yaml"
    config.write_text(
        f"warehouse: {warehouse}\ntable: db.t\nretain_min: 3\nolder_than: '{FUTURE}'\n"
        "spark: {spark.sql.shuffle.partitions: 2}\n"
    )
    env = dict(os.environ)
    env.pop("PAIMON_CRASH_AT", None)
    if crash_at:
        env["PAIMON_CRASH_AT"] = crash_at
        env["PAIMON_CRASH_SKIP"] = str(skip)
    return subprocess.run(
        [sys.executable, "-m", "jobs", "expire-snapshots", "--config", str(config)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def crash_template(spark_session, tmp_path_factory):
    """One busy table, what pypaimon reads of it, and the files left by an uninterrupted expiry.

    Built once for every crash step: each case copies the template, so the steps share the costly
    table building, the oracle reads and the reference run.
    """
    import shutil

    base = tmp_path_factory.mktemp("expire-crash")
    template, reference = str(base / "template"), str(base / "reference")
    busy_table(template)
    expected_view = view(template)
    shutil.copytree(template, reference)
    expire_snapshots(spark_session, open_table(reference), ExpiryRequest(retain_min=3, older_than=FUTURE))
    return template, expected_view, listed_files(open_table(reference))


class _Crash(BaseException):
    pass


def crash_in_process(spark, warehouse: str, step: str, skip: int) -> None:
    """The job stops at `step` by an exception the job cannot catch: what it wrote stays as it is."""
    from paimon_format.storage import crash_points

    def crash(reached: str) -> None:
        raise _Crash(reached)

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    monkeypatch.setenv(crash_points.SKIP_ENV, str(skip))
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(crash)
    try:
        with pytest.raises(_Crash):
            expire_snapshots(spark, open_table(warehouse), ExpiryRequest(retain_min=3, older_than=FUTURE))
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("step", "skip", "killed"),
    [
        (STEP_PLANNED, 0, False),
        (STEP_FILES, 0, True),  # a real process killed (exit 137) after the file deletes
        (STEP_MANIFESTS, 0, False),
        (STEP_LISTS, 0, False),
        (STEP_SNAPSHOT, 2, True),  # and half-way through the snapshot files
    ],
)
def test_crash_then_rerun_ends_like_an_uninterrupted_run(
    spark_session, tmp_path, crash_template, step, skip, killed
):
    """Two steps kill a spark-submit-like process; the others stop in-process (the same state on
    storage, without a second JVM), planned in the driver (`LocalSession`): the crash points sit in
    driver code between whole steps, so storage is left as a Spark run leaves it, in a fraction of
    the time. Every rerun runs on Spark and must end with the uninterrupted Spark run's files."""
    import shutil

    template, expected_view, reference_files = crash_template
    crashed = str(tmp_path / "crashed")
    shutil.copytree(template, crashed)

    if killed:
        result = run_job(crashed, crash_at=step, skip=skip)
        assert result.returncode == 137, result.stderr[-2000:]
    else:
        crash_in_process(LocalSession(), crashed, step, skip)
    crashed_table = open_table(crashed)
    assert missing_needed(crashed_table, first_retained=7) == set()

    # the rerun
    expire_snapshots(spark_session, crashed_table, ExpiryRequest(retain_min=3, older_than=FUTURE))

    assert listed_files(crashed_table) == reference_files
    after = view(crashed)
    for snapshot_id, rows in after.rows_by_snapshot.items():
        assert rows == expected_view.rows_by_snapshot[snapshot_id]
    assert after.rows_by_tag == expected_view.rows_by_tag
    assert missing_needed(crashed_table) == set()


def test_cli_dry_run_emits_a_record(tmp_path):
    warehouse = str(tmp_path / "wh")
    build_sample_table(warehouse, commits=5)
    before = fingerprint(table_root(warehouse))
    config = tmp_path / "c.yaml"
    config.write_text(f"warehouse: {warehouse}\ntable: db.t\nretain_min: 2\nolder_than: '{FUTURE}'\n")
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "expire-snapshots", "--config", str(config), "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads(result.stdout[result.stdout.index("{") :])
    assert record["counts"]["snapshots_to_expire"] == 3
    assert fingerprint(table_root(warehouse)) == before


# -- branches: each by its own options, shared files kept ----------------------------------------------


def test_branch_expiry_keeps_main_and_shared_files(spark_session, tmp_path, capsys):
    """A branch made by pypaimon from tag t2, three commits on it (our committer); expiring the branch
    with its own snapshot.num-retained options leaves main untouched and readable, the branch's
    latest readable by pypaimon, and deletes only files no root of either needs."""
    import json

    import pypaimon
    import yaml

    from jobs.__main__ import main
    from tests.support.pypaimon_reads import pypaimon_rows
    from tests.support.table_states import IDENTIFIER, row_ids
    from tests.support.table_states import missing_needed as missing_needed_on_any_branch

    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=4)  # tag t2
    pypaimon.CatalogFactory.create({"warehouse": warehouse}).create_branch(IDENTIFIER, "b", "t2")
    branch = table.for_branch("b")
    schema_path = Path(branch.metadata_root) / "schema" / f"schema-{branch.schema.id}"
    schema = json.loads(schema_path.read_text())
    schema["options"].update({"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    schema_path.write_text(json.dumps(schema))
    branch = table.for_branch("b")
    append_rows(branch, batch(699, 3))  # 699 and 711 go to dt=2024-01-01: only this branch has them
    append_rows(branch, batch(710, 2))
    written = write_table_files(branch.file_io, branch.path, branch.schema, batch(800, 1, days=1), 9000)
    SnapshotCommit(branch).overwrite(  # replaces dt=2024-01-01: main's files there and 699's
        [CommitMessage(p, bucket, -1, files) for p, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, branch.partition_types) == ["2024-01-01"],
    )
    main_before = view(warehouse)
    branch_rows = pypaimon_rows(warehouse, f"{IDENTIFIER}$branch_b")
    assert not {699, 711} & set(row_ids(branch_rows)) and {700, 701, 710, 800} <= set(row_ids(branch_rows))
    branch_ids = branch.snapshot_manager.snapshot_ids()

    config = tmp_path / "branch.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "branch": "b"}))
    assert main(["expire-snapshots", "--config", str(config)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert branch.snapshot_manager.snapshot_ids() == [branch_ids[-1]]  # the branch's own retain_min 1
    assert record["counts"]["snapshots_expired"] == len(branch_ids) - 1
    assert table.snapshot_manager.snapshot_ids() == [1, 2, 3, 4]  # main untouched
    after = view(warehouse)
    assert after.rows_by_snapshot == main_before.rows_by_snapshot
    assert after.rows_by_tag == main_before.rows_by_tag
    assert pypaimon_rows(warehouse, f"{IDENTIFIER}$branch_b") == branch_rows
    assert missing_needed_on_any_branch(table) == set()
    assert record["counts"]["files_deleted"] == 2  # 699's and 711's; main's old dt=2024-01-01 files stay
    assert record["counts"]["manifest_lists_deleted"] > 0

    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "branch": "nope"}))
    assert main(["expire-snapshots", "--config", str(config)]) == 2
    assert "branch 'nope' does not exist" in json.loads(capsys.readouterr().out)["error"]


# -- the delta-chain fast path: retained base manifests kept by name, not read -------------------------


def test_chain_fast_path_reads_no_base_manifest_and_keeps_what_tags_branches_and_later_deltas_need(
    spark_session, tmp_path
):
    """Retained snapshots of the expired branch (and their tags) have their base manifests kept by
    name, not read; an older tag, a branch and a later delta re-adding a file still protect it."""
    import pypaimon

    from tests.support.table_states import missing_needed as missing_needed_on_any_branch

    warehouse = tmp_path / "wh"
    table = make_table(str(warehouse / "db.db" / "t"))
    commit = SnapshotCommit(table)
    a, b, c, r, x1, x2 = (data_file(f"data-{n}.parquet") for n in ("a", "b", "c", "r", "x1", "x2"))
    touch(table, "p", *(f"data-{n}.parquet" for n in ("a", "b", "c", "r", "x1", "x2")))
    commit.append([message(table, ["p"], a)])  # 1
    table.tag_manager.create_tag("t1", table.snapshot_manager.snapshot(1))  # older than any end: read in full
    commit.append([message(table, ["p"], x1, b, c, r)])  # 2

    # No data file to delete: the retained side reads no manifest at all, every retained one stays.
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [2]
    assert record.details["retained_side"]["retained_manifests_read"] == 0
    # snapshot 2 appends only: of the range's deltas only the first retained one's (2's own) is read
    assert record.details["retained_side"]["expiring_deltas_read"] == 1
    assert record.counts["manifest_lists_deleted"] == 0  # the tag t1 holds snapshot 1's lists
    assert missing_needed_on_any_branch(table) == set()

    commit.append([message(table, ["p"], deleted=[a, r, c])])  # 3: a stays live in t1, r comes back at 6
    table.tag_manager.create_tag("tb", table.snapshot_manager.snapshot(3))
    pypaimon.CatalogFactory.create({"warehouse": str(warehouse)}).create_branch("db.t", "br", "tb")
    table.tag_manager.delete_tag("tb")  # b is live only in the branch now
    commit.append([message(table, ["p"], deleted=[b])])  # 4
    commit.append([message(table, ["p"], x2)])  # 5 = end: the first retained snapshot
    table.tag_manager.create_tag("t5", table.snapshot_manager.snapshot(5))  # on a retained one: by name
    commit.append([message(table, ["p"], r)])  # 6: re-adds r, which the expiring delta of 3 deleted

    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=2, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [5, 6]
    assert missing_needed_on_any_branch(table) == set()  # retained manifests, t1's a, the branch's b, r
    # c: deleted by an expiring delta, live in no tag, branch or retained snapshot
    assert [n for n in "abcr" if not exists(table, "p", f"data-{n}.parquet")] == ["c"]
    assert record.counts["files_deleted"] == 1
    assert record.counts["manifest_lists_deleted"] > 0
    # read: t1's manifest (snapshot 1's delta), the branch's (deltas of 1-3), snapshot 6's delta;
    # not the deltas of 4 and 5, which only snapshots 5 and 6 and the tag t5 name in their base lists
    assert record.details["retained_side"]["retained_manifests_read"] == 4
    assert record.details["retained_side"]["expiring_deltas_read"] == 3  # of snapshots 3, 4 and 5
