"""create-tag, delete-tag and expire-tags on real tables, with pypaimon as the oracle.

The deletion template: appends, a tag on snapshot 2 and one on 3, an overwrite of one partition,
then an expiry that keeps only the newest snapshots, so the two tags alone hold the overwritten
partition's old files and their own manifest lists. Oracles: pypaimon reads every remaining
snapshot and tag with the rows it read before; `missing_needed` (nothing a reader opens is gone)
and `unreferenced` (nothing left that no root needs) are both empty after every run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main
from jobs.create_tag import CreateTagRequest, create_tag
from jobs.delete_tag import STEPS as DELETE_STEPS
from jobs.delete_tag import DeleteTagRequest, delete_tag, matching_tags
from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.expire_tags import ExpireTagsRequest, expire_tags
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_frame import LocalSession
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.model.binary_row import deserialize_row
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    listed_files,
    missing_needed,
    open_table,
    row_ids,
    table_root,
    unreferenced,
    view,
)

FUTURE = "2100-01-01 00:00:00"
DAY_MS = 86_400_000


def run_cli(argv: list[str], capsys) -> tuple[int, dict]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


# -- create-tag ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_table(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("create-tag") / "wh")
    build_sample_table(warehouse, commits=3)  # tag t2 on snapshot 2
    return warehouse


def test_create_tag_latest_by_id_and_by_time_read_by_pypaimon(small_table, tmp_path):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    table = open_table(warehouse)
    manager = table.snapshot_manager
    create_tag(table, CreateTagRequest("latest"))
    create_tag(table, CreateTagRequest("first", snapshot_id=1, time_retained="2d"))
    moment = manager.snapshot(2).time_millis
    create_tag(table, CreateTagRequest("at-2", timestamp=f"{_utc(moment)}"))

    tags = table.tag_manager.tags()
    assert {name: tag.id for name, tag in tags.items()} == {"first": 1, "at-2": 2, "t2": 2, "latest": 3}
    raw = json.loads(Path(table.tag_manager.tag_path("first")).read_text())
    assert raw["tagTimeRetained"] == 172800.0 and len(raw["tagCreateTime"]) == 7  # Paimon's Tag JSON
    assert "tagCreateTime" not in json.loads(Path(table.tag_manager.tag_path("latest")).read_text())
    assert tags["first"].tag_time_retained_ms == 2 * DAY_MS

    seen = view(warehouse)  # pypaimon reads each tag through the table (scan.tag-name)
    from tests.support.table_states import _rows_at_tag

    for name, tag in tags.items():
        assert row_ids(_rows_at_tag(warehouse, name)) == row_ids(seen.rows_by_snapshot[tag.id])


def test_create_tag_existing_name_replace_dry_run_and_defaults(small_table, tmp_path):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    table = open_table(warehouse)
    with pytest.raises(BadInputError, match="tag 't2' already exists"):
        create_tag(table, CreateTagRequest("t2", snapshot_id=3))
    before = fingerprint(warehouse)
    record = create_tag(table, CreateTagRequest("t2", snapshot_id=3, replace=True), dry_run=True)
    assert fingerprint(warehouse) == before and record.details["tag"]["replaces"] == 2
    create_tag(table, CreateTagRequest("t2", snapshot_id=3, replace=True))
    assert table.tag_manager.tag("t2").id == 3
    with pytest.raises(BadInputError, match="snapshot 9 does not exist"):
        create_tag(table, CreateTagRequest("x", snapshot_id=9))
    with pytest.raises(BadInputError, match="no retained snapshot was committed at or before"):
        create_tag(table, CreateTagRequest("x", timestamp="2001-01-01 00:00:00"))
    # the table's tag.default-time-retained is written into the tag, as Paimon does
    set_table_option(warehouse, "tag.default-time-retained", "3 h")
    table = open_table(warehouse)
    create_tag(table, CreateTagRequest("with-default"))
    assert table.tag_manager.tag("with-default").tag_time_retained_ms == 3 * 3_600_000


def test_create_tag_cli_bad_input(small_table, tmp_path, capsys):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    before = fingerprint(warehouse)
    cases = {
        "both": ({"tag": "x", "snapshot": 1, "timestamp": "1d"}, "give either snapshot or timestamp"),
        "numeric": ({"tag": "123"}, "tag name must not be a number"),
        "exists": ({"tag": "t2"}, "tag 't2' already exists"),
        "retained": ({"tag": "x", "time_retained": "soon"}, "time_retained"),
    }
    for name, (keys, expected) in cases.items():
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
        code, record = run_cli(["create-tag", "--config", str(config)], capsys)
        assert code == 2 and expected in record["error"], (name, record["error"])
    assert fingerprint(warehouse) == before


def set_table_option(warehouse: str, key: str, value: str) -> None:
    """Edit the option into the latest schema file (as an ALTER TABLE SET would, without a new id)."""
    table = open_table(warehouse)
    path = Path(table_root(warehouse)) / "schema" / f"schema-{table.schema.id}"
    schema = json.loads(path.read_text())
    schema["options"][key] = value
    path.write_text(json.dumps(schema))


def _utc(epoch_ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


# -- delete-tag and expire-tags --------------------------------------------------------------------


def overwritten_table(warehouse: str) -> None:
    """Tags t2, t3 on snapshots 2, 3; snapshot 5 overwrites dt=2024-01-01; only 6, 7 stay.

    The expiry is set-up, not under test: it runs in the driver (`LocalSession`), which
    tests/jobs/runtime/test_local_exec.py shows deletes what Spark deletes."""
    table = build_sample_table(warehouse, commits=4)
    table.tag_manager.create_tag("t3", table.snapshot_manager.snapshot(3))
    written = write_table_files(table.file_io, table.path, table.schema, batch(100, 2, days=1), 5000)
    SnapshotCommit(table).overwrite(
        [CommitMessage(p, bucket, -1, files) for p, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-01"],
    )
    append_rows(table, batch(200, 3))
    append_rows(table, batch(300, 3))
    table.tag_manager.create_tag("t6", table.snapshot_manager.snapshot(6))
    expire_snapshots(LocalSession(), table, ExpiryRequest(retain_min=2, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [6, 7]


@pytest.fixture(scope="module")
def tagged(tmp_path_factory):
    """The template warehouse, what pypaimon reads of it, and the files after deleting t2 then t3."""
    base = tmp_path_factory.mktemp("delete-tag")
    template = str(base / "template")
    overwritten_table(template)
    table = open_table(template)
    assert unreferenced(table) == set() and missing_needed(table) == set()
    return template, view(template)


def assert_readable(warehouse: str, before) -> None:
    after = view(warehouse)
    for snapshot_id, rows in after.rows_by_snapshot.items():
        assert rows == before.rows_by_snapshot[snapshot_id]
    for name, rows in after.rows_by_tag.items():
        assert rows == before.rows_by_tag[name]
    table = open_table(warehouse)
    assert missing_needed(table) == set()
    assert unreferenced(table) == set()  # everything only the deleted tags used is gone


def test_delete_tag_deletes_what_only_it_used(spark_session, tagged, tmp_path):
    template, before = tagged
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    table = open_table(warehouse)
    listed = listed_files(table)

    dry = delete_tag(spark_session, table, DeleteTagRequest(["t2"]), dry_run=True)
    assert listed_files(table) == listed and dry.counts["tags_to_delete"] == 1
    record = delete_tag(spark_session, table, DeleteTagRequest(["t2"]))
    # t3 holds every data file and manifest of t2 (nothing was deleted between 2 and 3): only t2's
    # own manifest lists go
    assert record.counts["tags_deleted"] == 1 and record.counts["files_deleted"] == 0
    assert record.counts["manifest_lists_deleted"] == 2
    assert dry.counts["manifest_lists_to_delete"] == 2 and dry.counts["files_to_delete"] == 0
    assert_readable(warehouse, before)

    # t3 (its snapshot expired) and t6 (not)
    record = delete_tag(spark_session, table, DeleteTagRequest(["t*"]))
    assert table.tag_manager.tag_names() == []
    assert record.counts["tags_deleted"] == 2
    old_partition = {p for p in listed - listed_files(table) if p.startswith("dt=2024-01-01/")}
    assert old_partition and record.counts["files_deleted"] == len(old_partition)  # the overwritten files
    assert_readable(warehouse, before)


def test_delete_tag_on_a_live_snapshot_needs_no_spark_and_unmatched_names(tagged, tmp_path):
    template, before = tagged
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    table = open_table(warehouse)

    def no_spark():
        raise AssertionError("Spark started for a tag whose snapshot still exists")

    listed = listed_files(table)
    record = delete_tag(no_spark, table, DeleteTagRequest(["t6", "nope", "x*"]))
    assert listed - listed_files(table) == {"tag/tag-t6"}
    assert record.details["unmatched"] == ["nope", "x*"]
    with pytest.raises(BadInputError, match="no tag matches 'nope'"):
        delete_tag(no_spark, table, DeleteTagRequest(["nope"], strict=True))
    assert matching_tags(["a1", "a2", "b"], ["a?", "b", "c*"]) == (["a1", "a2", "b"], ["c*"])


class _Crash(BaseException):
    pass


@pytest.fixture(scope="module")
def t3_deleted(spark_session, tagged, tmp_path_factory) -> set[str]:
    """The files after an uninterrupted delete-tag t3 on Spark: what every crashed run's rerun ends with."""
    template, _before = tagged
    reference = copy_warehouse(template, str(tmp_path_factory.mktemp("delete-tag-reference") / "wh"))
    delete_tag(spark_session, open_table(reference), DeleteTagRequest(["t3"]))
    return listed_files(open_table(reference))


@pytest.mark.parametrize(
    "step", [DELETE_STEPS.tags_deleted, DELETE_STEPS.files, DELETE_STEPS.manifests, DELETE_STEPS.lists]
)
def test_delete_tag_crash_then_rerun_ends_like_an_uninterrupted_run(
    spark_session, tagged, t3_deleted, tmp_path, step
):
    """Paimon's order, the tag file first; its JSON is parked in tag-deletion/ just before, so a rerun
    (of any tag deletion, here one naming the gone tag again) finishes the files, which
    remove-orphan-files could not: the retained manifests still name some of them in DELETE entries.

    The crashed run plans in the driver (`LocalSession`): its crash points sit in driver code between
    whole steps, so storage is left as a Spark run leaves it, in a fraction of the time; the rerun
    runs on Spark and must end with the uninterrupted Spark run's files (`t3_deleted`)."""
    from paimon_format.storage import crash_points

    template, before = tagged
    crashed = copy_warehouse(template, str(tmp_path / "crashed"))
    table = open_table(crashed)

    def crash(reached: str) -> None:
        raise _Crash(reached)

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(crash)
    try:
        with pytest.raises(_Crash):
            delete_tag(LocalSession(), table, DeleteTagRequest(["t3"]))
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()

    assert missing_needed(table) == set()  # every remaining root still reads
    assert "tag/tag-t3" not in listed_files(table) and table.tag_manager.pending_deletion_names()
    rerun = delete_tag(spark_session, table, DeleteTagRequest(["t3"]))
    assert rerun.details["unmatched"] == ["t3"] and rerun.counts["unfinished_deletions_finished"] == 1
    assert listed_files(table) == t3_deleted
    assert_readable(crashed, before)


def test_expire_tags_by_retention_older_than_and_num_retained_max(spark_session, tagged, tmp_path):
    template, before = tagged
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    table = open_table(warehouse)
    manager = table.tag_manager
    for name, snapshot_id in (("2024-01-01", 6), ("2024-01-02", 6), ("2024-01-03", 7)):
        manager.create_tag(name, table.snapshot_manager.snapshot(snapshot_id))
    manager.create_tag("short", manager.tag("t2"), time_retained_ms=DAY_MS)

    now_ms = int(Path(manager.tag_path("t6")).stat().st_mtime * 1000)
    record = expire_tags(spark_session, table, now_ms=now_ms + 2 * DAY_MS)  # its day has passed
    assert sorted(record.details["expired_because"]) == ["short"]
    assert "short" not in manager.tag_names() and "t2" in manager.tag_names()
    assert record.counts["files_to_delete"] == 0  # t2 holds all of it

    # automatic tags (daily, with dashes) beyond 2: the oldest by snapshot id then name goes
    record = expire_tags(spark_session, table, ExpireTagsRequest(num_retained_max=2), now_ms=now_ms)
    assert list(record.details["expired_because"]) == ["2024-01-01"]
    # every tag
    record = expire_tags(spark_session, table, ExpireTagsRequest(older_than=FUTURE), now_ms=now_ms)
    assert manager.tag_names() == []
    assert record.counts["files_deleted"] > 0  # t2's overwritten files
    assert_readable(warehouse, before)


def test_expire_tags_default_time_retained_and_cli_dry_run(spark_session, tagged, tmp_path, capsys):
    """A tag without its own retention expires by the table's tag.default-time-retained counted from
    the tag file's time; the CLI dry run reports it and changes nothing."""
    template, _ = tagged
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    set_table_option(warehouse, "tag.default-time-retained", "1 ms")
    before = fingerprint(warehouse)
    config = tmp_path / "expire-tags.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER}))
    code, record = run_cli(["expire-tags", "--config", str(config), "--dry-run"], capsys)
    assert code == 0, record["error"]
    assert sorted(record["details"]["expired_because"]) == ["t2", "t3", "t6"]
    assert record["counts"]["files_to_delete"] > 0 and record["dry_run"] is True
    assert fingerprint(warehouse) == before


# -- automatic tags and maintain ---------------------------------------------------------------------


def _commit_times(warehouse: str, local_times: list[str]) -> None:
    """Set the snapshots' commit times (local, as Paimon's process time reads them)."""
    import datetime as dt

    from paimon_format.snapshot import Snapshot

    table = open_table(warehouse)
    for snapshot_id, text in enumerate(local_times, start=1):
        path = Path(table.snapshot_manager.snapshot_path(snapshot_id))
        snapshot = Snapshot.from_json(path.read_text())
        snapshot.time_millis = int(dt.datetime.fromisoformat(text).timestamp() * 1000)
        path.write_text(snapshot.to_json())


def test_automatic_tags_by_process_time_then_maintain_expires_beyond_the_maximum(
    spark_session, small_table, tmp_path, capsys
):
    """Paimon's TagAutoCreation replayed: the first snapshot at or after a day's end (plus the delay)
    is tagged with that day; maintain creates the missing tags, then expires the oldest automatic
    one beyond tag.num-retained-max; pypaimon reads the tags."""
    from jobs.create_tag import create_automatic_tags

    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    append_rows(open_table(warehouse), batch(40, 3))  # snapshot 4
    _commit_times(warehouse, ["2024-01-01 10:00", "2024-01-01 23:00", "2024-01-02 00:30", "2024-01-03 05:00"])
    set_table_option(warehouse, "tag.automatic-creation", "process-time")
    table = open_table(warehouse)
    dry = create_automatic_tags(table, dry_run=True)
    assert dry.details["automatic_tags"] == {"2023-12-31": 1, "2024-01-01": 3, "2024-01-02": 4}
    assert table.tag_manager.tag_names() == ["t2"]

    set_table_option(warehouse, "tag.num-retained-max", "2")
    config = tmp_path / "maintain.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "warehouse": warehouse,
                "tables": [IDENTIFIER],
                "defaults": {"create_tag": {"automatic": True}, "expire_tags": {}},
            }
        )
    )
    code, record = run_cli(["maintain", "--config", str(config)], capsys)
    assert code == 0, record["error"]
    table = open_table(warehouse)
    assert {n: t.id for n, t in table.tag_manager.tags().items()} == {
        "t2": 2,
        "2024-01-01": 3,
        "2024-01-02": 4,
    }
    assert create_automatic_tags(table).counts["tags_to_create"] == 0  # nothing missing after the newest
    seen = view(warehouse)
    assert seen.rows_by_tag["2024-01-02"] == seen.rows_by_snapshot[4]

    set_table_option(warehouse, "tag.creation-delay", "1 h")  # 00:30 is within the delay: day 1 waits
    from paimon_format.maintenance.tag_periods import missing_automatic_tags

    for name in ("2024-01-01", "2024-01-02"):
        table.tag_manager.delete_tag(name)
    assert [(n, s.id) for n, s, _ in missing_automatic_tags(open_table(warehouse))] == [
        ("2023-12-31", 1),
        ("2024-01-02", 4),
    ]


def test_tag_periods_formats():
    from paimon_format.maintenance.tag_periods import TagPeriod

    hourly = TagPeriod.of({"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes"})
    import datetime as dt

    assert hourly.time_to_tag(dt.datetime(2024, 5, 14, 7)) == "20240514 07"
    assert hourly.tag_to_time("20240514 07") == dt.datetime(2024, 5, 14, 7)
    assert not hourly.is_auto_tag("2024-05-14 07") and not hourly.is_auto_tag("20240230 07")
    daily = TagPeriod.of({})
    assert daily.is_auto_tag("2024-05-14") and not daily.is_auto_tag("2024-5-14")
    with pytest.raises(ValueError, match="tag.creation-period"):
        TagPeriod.of({"tag.creation-period": "two-hours"})


@pytest.mark.parametrize("operation", ["create-tag", "delete-tag", "expire-tags", "rollback"])
def test_the_example_configs_load(operation):
    from jobs.runtime.config import load_config
    from jobs.runtime.registry import load

    path = Path(__file__).resolve().parents[2] / "conf" / f"{operation}.yaml"
    config = load_config(str(path), [], load(operation).CONFIG_MODEL)
    assert config.table == "db.events"


# -- tags on a branch ------------------------------------------------------------------------------


def test_tags_on_a_branch_live_under_it_and_hold_its_files(spark_session, tmp_path, capsys):
    """create-tag / delete-tag with branch: b work on branch/branch-b/tag/; while the branch's tag
    holds its snapshot 3, expiring the branch keeps the file only that snapshot had (which the
    branch's overwrite replaced); deleting the tag then deletes it. Main is never touched."""
    from paimon_format.scan.snapshot_scan import live_entries
    from tests.support.table_states import branch_from_t2

    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=4)  # tag t2 on snapshot 2
    branch = branch_from_t2(table)  # snapshots 2 (t2), 3 (600-602), 4 (overwrite dt=2024-01-01), 5
    main_before = view(warehouse)
    held = {e.file.file_name for e in live_entries(branch, branch.snapshot_manager.snapshot(3))}
    only_snapshot_3 = held - {
        e.file.file_name for e in live_entries(branch, branch.snapshot_manager.latest())
    }
    only_snapshot_3 -= {e.file.file_name for e in live_entries(table, table.snapshot_manager.latest())}
    assert len(only_snapshot_3) == 1  # 600-602's file in dt=2024-01-01
    base = {"warehouse": warehouse, "table": IDENTIFIER, "branch": "b"}
    config = tmp_path / "job.yaml"

    def run(operation: str, **keys) -> tuple[int, dict]:
        config.write_text(yaml.safe_dump({**base, **keys}))
        return run_cli([operation, "--config", str(config)], capsys)

    code, record = run("create-tag", tag="bt3", snapshot=3)
    assert code == 0, record.get("error")
    assert Path(branch.tag_manager.tag_path("bt3")).is_file() and "bt3" not in table.tag_manager.tag_names()
    assert branch.tag_manager.tag("bt3").id == 3
    code, record = run("expire-snapshots", retain_min=1, retain_max=1, older_than="0s")
    assert code == 0, record.get("error")
    assert branch.snapshot_manager.snapshot_ids() == [5]
    assert {e.file.file_name for e in live_entries(branch, branch.tag_manager.tag("bt3"))} == held
    assert not missing_needed(table), "the branch's tag lost a file to the branch's expiry"

    code, record = run("delete-tag", tags=["bt3"], strict=True)
    assert code == 0, record.get("error")
    assert record["counts"]["tags_deleted"] == 1 and record["counts"]["files_deleted"] == 1
    assert not Path(branch.tag_manager.tag_path("bt3")).exists()
    assert not missing_needed(table) and not unreferenced(table)
    assert view(warehouse).rows_by_snapshot == main_before.rows_by_snapshot
    assert view(warehouse).rows_by_tag == main_before.rows_by_tag

    code, record = run("delete-tag", tags=["t2"], branch="nope")
    assert code == 2 and "branch 'nope' does not exist" in record["error"]
