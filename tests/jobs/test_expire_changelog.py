"""expire-snapshots on tables whose changelog outlives snapshots (`changelog.num-retained.*`,
`changelog.time-retained`): Paimon's decoupled changelog retention.

Oracles: pypaimon reads every retained snapshot and tag before and after; `changelog_needs` (in
tests/support/table_states.py, shared with the chaos matrix) is written independently of the job from
Paimon's rules (a changelog of a table without changelog producer is the delta: its delta and base
lists, their manifests and the append-origin files the delta names, ADD or DELETE; with a producer:
the changelog manifest list, its manifests and the files they ADD); after an expiry nothing a
retained snapshot, tag or changelog needs is missing and nothing else is left.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from jobs.expire_snapshots import (
    STEP_CHANGELOG_DELETED,
    STEP_CHANGELOG_FILES,
    STEP_CHANGELOG_LISTS,
    STEP_CHANGELOG_WRITTEN,
    STEP_FILES,
    STEP_LISTS,
    STEP_SNAPSHOT,
    ExpiryRequest,
    expire_snapshots,
)
from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_frame import LocalSession
from paimon_format.commit import SnapshotCommit
from paimon_format.maintenance.expire import (
    ChangelogSettings,
    ExpireSettings,
    decoupled_cause,
    plan_changelog_range,
)
from paimon_format.maintenance.references import index_file_relpaths, manifest_names, snapshot_metadata_files
from paimon_format.scan.snapshot_scan import changelog_entries, index_entries, live_entries
from paimon_format.storage import crash_points
from tests.support.changelog_tables import DECOUPLED, decoupled_table
from tests.support.factories import data_file, make_table, message
from tests.support.table_states import (
    TABLE_OPTIONS,
    append_rows,
    batch,
    changelog_needs,
    fingerprint,
    listed_files,
    open_table,
    table_root,
    view,
)

FUTURE = "2100-01-01 00:00:00"  # every snapshot is older than this cutoff
NOW = 10_000_000
HINTS = {"snapshot/LATEST", "snapshot/EARLIEST", "changelog/LATEST", "changelog/EARLIEST"}


# -- when is a table decoupled (Paimon's ExpireConfig.isChangelogDecoupled) ---------------------------


@pytest.mark.parametrize(
    ("changelog", "word"),
    [
        (ChangelogSettings(3, 30, NOW, 50), "changelog.num-retained.max=30"),
        (ChangelogSettings(5, 10, NOW, 50), "changelog.num-retained.min=5"),
        (ChangelogSettings(3, 10, NOW - 7_200_000, 50), "changelog.time-retained"),
    ],
)
def test_any_longer_changelog_bound_decouples(changelog, word):
    snapshot = ExpireSettings(retain_min=3, retain_max=10, cutoff_ms=NOW, max_deletes=50)
    assert word in decoupled_cause(changelog, snapshot)


def test_equal_or_shorter_changelog_bounds_are_not_decoupled():
    snapshot = ExpireSettings(retain_min=3, retain_max=10, cutoff_ms=NOW, max_deletes=50)
    assert decoupled_cause(ChangelogSettings(3, 10, NOW, 50), snapshot) is None
    assert decoupled_cause(ChangelogSettings(1, 5, NOW + 1, 50), snapshot) is None


# -- which changelogs go (Paimon's ExpireChangelogImpl) ------------------------------------------------


def old(_changelog_id: int) -> int:
    return 1_000


def test_changelog_range_counts_from_the_latest_snapshot():
    # changelogs 1..10, snapshots 11..20: keep the newest 15 ids -> changelogs 6..10 stay
    plan = plan_changelog_range(range(1, 11), old, ChangelogSettings(15, 15, NOW, 100), 20)
    assert (plan.begin, plan.end, plan.limited_by) == (1, 6, "retain_min")


def test_the_latest_changelog_always_stays():
    plan = plan_changelog_range(range(1, 11), old, ChangelogSettings(1, 1, NOW, 100), 20)
    assert (plan.begin, plan.end, plan.limited_by) == (1, 10, "latest_changelog")


def test_changelog_age_limits_between_min_and_max():
    times = {i: (NOW - 1 if i < 4 else NOW + 1) for i in range(1, 11)}
    plan = plan_changelog_range(range(1, 11), times.__getitem__, ChangelogSettings(1, 100, NOW, 100), 20)
    assert (plan.end, plan.limited_by) == (4, "age")
    # beyond retain_max, age does not matter
    plan = plan_changelog_range(range(1, 11), times.__getitem__, ChangelogSettings(1, 12, NOW, 100), 20)
    assert plan.end == 9


def test_changelog_consumer_and_limit():
    settings = ChangelogSettings(1, 1, NOW, 100)
    assert plan_changelog_range(range(1, 11), old, settings, 20, consumer_next=4).end == 4
    assert plan_changelog_range(range(1, 11), old, ChangelogSettings(1, 1, NOW, 3), 20).end == 4
    assert plan_changelog_range([], old, settings, 20) is None


# -- tables -------------------------------------------------------------------------------------------


def set_options(table, **options: str) -> None:
    """ALTER TABLE SET: a new schema with the options changed."""
    schema = table.schema
    new = dataclasses.replace(schema, id=schema.id + 1, options={**schema.options, **options})
    assert table.schema_manager.commit_new_schema(new)
    table.refresh()


# -- an independent oracle ------------------------------------------------------------------------


def needed(table) -> set[str]:
    """Every file a retained snapshot, tag or changelog needs, plus the metadata files themselves."""
    manager = table.snapshot_manager
    files = {f"snapshot/snapshot-{i}" for i in manager.snapshot_ids()}
    files |= {f"changelog/changelog-{i}" for i in manager.changelog_ids()}
    files |= {f"schema/schema-{i}" for i in table.schema_manager.list_ids()}
    files |= {f"tag/tag-{name}" for name in table.tag_manager.tag_names()}
    for snapshot in [manager.snapshot(i) for i in manager.snapshot_ids()] + list(
        table.tag_manager.tags().values()
    ):
        files.update(snapshot_metadata_files(snapshot))
        files.update(f"manifest/{name}" for name in manifest_names(table, snapshot))
        for entry in live_entries(table, snapshot) + changelog_entries(table, snapshot):
            files.update(table.entry_relpaths(entry))
        for index_entry in index_entries(table, snapshot):
            files.update(index_file_relpaths(index_entry))
    for changelog_id in manager.changelog_ids():
        files |= changelog_needs(table, manager.changelog(changelog_id))
    return files


def pypaimon_changelogs(warehouse: str) -> tuple[int | None, int | None, dict[int, str]]:
    """pypaimon's view of the long-lived changelogs: earliest and latest id (hints, then listing) and
    the delta manifest list of each (pypaimon parses changelogs but does not read them as a stream)."""
    import pypaimon

    manager = pypaimon.CatalogFactory.create({"warehouse": warehouse}).get_table("db.t").changelog_manager()
    deltas = {changelog.id: changelog.delta_manifest_list for changelog in manager.changelogs()}
    return manager.earliest_long_lived_changelog_id(), manager.latest_long_lived_changelog_id(), deltas


def assert_exactly_needed(table) -> None:
    listed = listed_files(table)
    assert needed(table) - listed == set()  # nothing a retained reader opens is missing
    assert listed - needed(table) - HINTS == set()  # nothing only expired ones needed is left


# -- the job on a decoupled table --------------------------------------------------------------------


def test_expired_snapshots_become_changelogs_then_expire_by_changelog_retention(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    young = {
        "changelog.num-retained.min": "1",
        "changelog.num-retained.max": "30",
        "changelog.time-retained": "1d",
    }
    table = decoupled_table(warehouse, **young)  # every changelog is younger than a day: all stay
    manager = table.snapshot_manager
    snapshot_bytes = {i: Path(manager.snapshot_path(i)).read_bytes() for i in manager.snapshot_ids()}
    before = view(warehouse)
    appended_in_compacted_day = {
        path
        for i in range(1, 5)
        for path in changelog_needs(table, manager.snapshot(i))
        if "dt=2024-01-01" in path
    }
    compacted_by_5 = {
        p
        for e in live_entries(table, manager.snapshot(5))
        for p in table.entry_relpaths(e)
        if "dt=2024-01-01" in p
    }
    assert appended_in_compacted_day and compacted_by_5

    record = expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))

    assert manager.snapshot_ids() == [7, 8] and manager.changelog_ids() == [1, 2, 3, 4, 5, 6]
    assert record.counts["changelogs_written"] == 6 and record.counts["changelogs_expired"] == 0
    for i in range(1, 7):  # the snapshot's JSON, as stored
        assert Path(manager.changelog_path(i)).read_bytes() == snapshot_bytes[i]
    assert Path(manager.changelog_dir(), "LATEST").read_text() == "6"
    assert pypaimon_changelogs(warehouse) == (
        1,
        6,
        {i: manager.changelog(i).delta_manifest_list for i in range(1, 7)},
    )
    listed = listed_files(table)
    assert appended_in_compacted_day <= listed  # compacted away, but still the changelog of 1-4
    assert not compacted_by_5 & listed  # compaction output is not changelog: gone with snapshot 6
    assert_exactly_needed(table)
    after = view(warehouse)
    assert {i: after.rows_by_snapshot[i] for i in (7, 8)} == {i: before.rows_by_snapshot[i] for i in (7, 8)}
    assert after.rows_by_tag == before.rows_by_tag

    # remove-orphan-files afterwards finds nothing: the changelogs are roots with the same needs
    orphans = remove_orphan_files(spark_session, table, OrphanSettings(older_than_ms=0, force=True))
    assert orphans.counts["orphan_files"] == 0 and listed_files(table) == listed

    # a smaller changelog retention: changelogs 1-4 go (the newest 4 ids, 5-8, stay)
    set_options(table, **{"changelog.num-retained.max": "4", "changelog.num-retained.min": "4"})
    record = expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))
    assert manager.snapshot_ids() == [7, 8] and manager.changelog_ids() == [5, 6]
    assert record.counts["changelogs_expired"] == 4
    assert Path(manager.changelog_dir(), "EARLIEST").read_text() == "5"
    assert pypaimon_changelogs(warehouse)[:2] == (5, 6)
    tagged = {p for e in live_entries(table, table.tag_manager.tag("t3")) for p in table.entry_relpaths(e)}
    only_changelog = appended_in_compacted_day - tagged  # snapshot 4's appended files
    # changelog 5 (the compaction) still names them as deleted: the "before" rows of its change
    assert only_changelog and only_changelog <= listed_files(table)
    assert_exactly_needed(table)

    # smaller still: changelog 5 goes too (6, the newest, always stays) and with it those files
    set_options(table, **{"changelog.num-retained.max": "2", "changelog.num-retained.min": "2"})
    record = expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))
    assert manager.snapshot_ids() == [7, 8] and manager.changelog_ids() == [6]
    assert record.counts["changelogs_expired"] == 1 and record.counts["changelog_files_deleted"] > 0
    assert not only_changelog & listed_files(table)  # no changelog left reads them
    assert appended_in_compacted_day & tagged <= listed_files(table)
    assert_exactly_needed(table)
    after = view(warehouse)
    assert {i: after.rows_by_snapshot[i] for i in (7, 8)} == {i: before.rows_by_snapshot[i] for i in (7, 8)}
    assert after.rows_by_tag == before.rows_by_tag


def test_non_decoupled_table_writes_no_changelog(tmp_path):
    """In the driver (`LocalSession`): whether a table is decoupled is decided before any frame is
    planned, and tests/jobs/runtime/test_local_exec.py shows the driver and Spark expire alike."""
    warehouse = str(tmp_path / "wh")
    table = decoupled_table(
        warehouse, **{"changelog.num-retained.min": "1", "changelog.num-retained.max": "2"}
    )
    record = expire_snapshots(LocalSession(), table, ExpiryRequest(older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [7, 8] and table.snapshot_manager.changelog_ids() == []
    assert "changelogs_written" not in record.counts and "changelog_settings" not in record.details
    assert_exactly_needed(table)


def test_dry_run_reports_changelogs_to_write_and_to_expire(tmp_path):
    """In the driver (`LocalSession`): tests/jobs/runtime/test_local_exec.py shows that a dry run in
    the driver plans on this table what the real run on Spark then does."""
    warehouse = str(tmp_path / "wh")
    table = decoupled_table(warehouse)
    before = fingerprint(table.path)
    record = expire_snapshots(LocalSession(), table, ExpiryRequest(older_than=FUTURE), dry_run=True)
    assert fingerprint(table.path) == before
    assert record.counts["snapshots_to_expire"] == 6 and record.counts["changelogs_to_write"] == 6
    assert record.counts["changelogs_to_expire"] == 4  # changelogs 1-4 of 1-6 (min 4 ids of 8 stay)
    assert record.samples["changelogs_to_write"][0].endswith("changelog/changelog-1")
    assert record.counts["changelog_manifest_lists_to_delete"] > 0  # files: changelog 5 names them


def test_one_run_writes_and_expires_like_two(spark_session, tmp_path, crash_template):
    """DECOUPLED keeps 4 ids: changelogs 1-6 are written, 1-4 expire in the same run (the Spark run
    is `crash_template`'s uninterrupted reference, shared with the crash cases)."""
    template, _files, reference, record = crash_template
    before = view(template)
    warehouse = str(tmp_path / "wh")
    shutil.copytree(reference, warehouse)
    table = open_table(warehouse)
    assert table.snapshot_manager.changelog_ids() == [5, 6] and record.counts["changelogs_expired"] == 4
    assert_exactly_needed(table)
    after = view(warehouse)
    assert after.rows_by_tag == before.rows_by_tag
    rerun = expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))
    assert rerun.counts["snapshots_expired"] == 0 and rerun.counts["changelogs_expired"] == 0


def test_produced_changelog_keeps_its_files_not_the_delta(spark_session, tmp_path):
    """changelog-producer = input: a changelog needs its changelog manifests and files only."""
    root = table_root(str(tmp_path / "wh"))
    options = {**DECOUPLED, "changelog-producer": "input", "bucket": "1"}
    table = make_table(root, primary_keys=("id", "dt"), options=options)
    commit = SnapshotCommit(table)

    def touch(*names: str) -> None:
        for name in names:
            path = Path(root) / "dt=p" / "bucket-0" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"x")

    files = {n: data_file(f"data-{n}.parquet") for n in ("a", "b", "c", "d", "e")}
    logs = {n: data_file(f"changelog-{n}.parquet") for n in ("a", "b", "c", "d", "e")}
    touch(*(f.file_name for f in [*files.values(), *logs.values()]))
    order = ["a", "b", "c", "d", "e"]
    for i, name in enumerate(order):
        deleted = [files[order[i - 1]]] if i else []
        msg = message(table, ["p"], files[name], bucket=0, total_buckets=1, deleted=deleted)
        commit.append([dataclasses.replace(msg, changelog_files=[logs[name]])])

    record = expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))  # snapshots 1-3 go

    manager = table.snapshot_manager
    assert manager.snapshot_ids() == [4, 5] and manager.changelog_ids() == [2, 3]  # 4 ids stay
    assert record.counts["changelogs_expired"] == 1
    listed = listed_files(table)
    assert {f"dt=p/bucket-0/changelog-{n}.parquet" for n in "bcde"} <= listed
    assert "dt=p/bucket-0/changelog-a.parquet" not in listed
    assert not {f"dt=p/bucket-0/data-{n}.parquet" for n in "abc"} & listed  # no delta kept
    assert not {f"manifest/{manager.changelog(i).delta_manifest_list}" for i in (2, 3)} & listed
    assert_exactly_needed(table)
    # remove-orphan-files reads these changelogs (their delta lists are gone, as after Paimon's own
    # decoupled expiry) without failing, and finds nothing to delete
    orphans = remove_orphan_files(spark_session, table, OrphanSettings(older_than_ms=0, force=True))
    assert orphans.counts["orphan_files"] == 0 and listed_files(table) == listed


def test_refused_options_are_bad_input(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = make_table(table_root(warehouse), options={**TABLE_OPTIONS, **DECOUPLED})
    append_rows(table, batch(0, 6))
    set_options(table, **{"changelog.num-retained.min": "9", "changelog.num-retained.max": "5"})
    before = fingerprint(table.path)
    with pytest.raises(BadInputError, match="changelog"):
        expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))
    assert fingerprint(table.path) == before


# -- crash at each step, then a rerun: the same files as an uninterrupted run -------------------------
#
# The crashed run goes in the driver (`LocalSession`): every crash point sits in driver code between
# whole deletion stages (jobs/deletion/stages.py), so it leaves the same files on storage whichever
# session planned, in a fraction of a Spark run. The rerun and the uninterrupted reference run on
# Spark, so every step's crashed state is still finished by the Spark job and compared with Spark's.


class Crash(BaseException):
    pass


@pytest.fixture(scope="module")
def crash_template(spark_session, tmp_path_factory):
    """(template warehouse, files after an uninterrupted Spark expiry of a copy, that copy, its record):
    built once, for the crash cases' reruns and test_one_run_writes_and_expires_like_two."""
    base = tmp_path_factory.mktemp("changelog-crash")
    template, reference = str(base / "template"), str(base / "reference")
    decoupled_table(template)
    shutil.copytree(template, reference)
    record = expire_snapshots(spark_session, open_table(reference), ExpiryRequest(older_than=FUTURE))
    return template, listed_files(open_table(reference)), reference, record


@pytest.mark.parametrize(
    ("step", "skip"),
    [
        (STEP_FILES, 0),
        (STEP_CHANGELOG_WRITTEN, 2),
        (STEP_SNAPSHOT, 3),
        (STEP_CHANGELOG_FILES, 0),
        (STEP_CHANGELOG_LISTS, 0),
        (STEP_CHANGELOG_DELETED, 1),
    ],
)
def test_crash_then_rerun_ends_like_an_uninterrupted_run(
    spark_session, tmp_path, monkeypatch, crash_template, step, skip
):
    template, reference_files, _reference, _record = crash_template
    crashed = str(tmp_path / "crashed")
    shutil.copytree(template, crashed)

    def crash(reached: str) -> None:
        raise Crash(reached)

    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    monkeypatch.setenv(crash_points.SKIP_ENV, str(skip))
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(crash)
    try:
        with pytest.raises(Crash):
            expire_snapshots(LocalSession(), open_table(crashed), ExpiryRequest(older_than=FUTURE))
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.delenv(crash_points.CRASH_ENV)

    table = open_table(crashed)
    manager = table.snapshot_manager
    listed = listed_files(table)
    for snapshot_id in (7, 8):  # retained snapshots and the changelogs that stay are whole
        snapshot = manager.snapshot(snapshot_id)
        assert {f"manifest/{m}" for m in manifest_names(table, snapshot)} <= listed
        assert {p for e in live_entries(table, snapshot) for p in table.entry_relpaths(e)} <= listed
    for changelog_id in manager.changelog_ids():
        if changelog_id >= 5:
            assert changelog_needs(table, manager.changelog(changelog_id)) <= listed

    expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))  # the rerun
    assert listed_files(table) == reference_files
    assert_exactly_needed(table)


def test_a_decoupled_rerun_after_a_crashed_coupled_run_expires_without_the_lost_changelogs(
    spark_session, tmp_path, monkeypatch, crash_template
):
    """A run with snapshot retention equal to the changelog's (not decoupled) crashes after deleting
    the manifest lists of snapshots 1-4; the next run is decoupled. Those the tag does not hold cannot
    become changelogs any more: they expire without one (reported) instead of failing every rerun."""
    template = crash_template[0]
    crashed = str(tmp_path / "crashed")
    shutil.copytree(template, crashed)

    def crash(reached: str) -> None:
        raise Crash(reached)

    monkeypatch.setenv(crash_points.CRASH_ENV, STEP_LISTS)
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(crash)
    try:
        with pytest.raises(Crash):
            expire_snapshots(
                LocalSession(),
                open_table(crashed),
                ExpiryRequest(retain_min=4, retain_max=4, older_than=FUTURE),
            )
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.delenv(crash_points.CRASH_ENV)
    table = open_table(crashed)
    assert table.snapshot_manager.snapshot_ids()[:1] == [1] and not table.snapshot_manager.changelog_ids()
    listed_after_crash = listed_files(table)
    lost_to_the_crashed_run = listed_files(open_table(template)) - listed_after_crash

    # the dry run in the driver (its plan is the real run's, test_local_exec); the real run on Spark
    dry = expire_snapshots(LocalSession(), table, ExpiryRequest(older_than=FUTURE), dry_run=True)
    assert dry.counts["changelogs_to_write"] == 3 and dry.counts["changelogs_not_writable"] == 3
    assert listed_files(table) == listed_after_crash

    record = expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))  # decoupled now

    manager = table.snapshot_manager
    assert record.counts["changelogs_not_writable"] == 3  # 1, 2 and 4: tag t3 kept snapshot 3's lists
    assert manager.snapshot_ids() == [7, 8] and manager.changelog_ids() == [5, 6]
    listed = listed_files(table)
    # the coupled run had already deleted what compaction 5 removed; nothing else is missing or extra
    assert needed(table) - listed <= lost_to_the_crashed_run
    assert listed - needed(table) - HINTS == set()


def test_a_retained_snapshot_keeps_what_its_future_changelog_needs(spark_session, tmp_path):
    """Snapshot 5 (kept) compacts away files that snapshots 1-3 appended; 1-3 expire as snapshots
    and, in the same run, as changelogs (5 ids stay: 4-8). Those files are live nowhere, yet
    changelog 5, which snapshot 5 becomes when it expires, names them. They stay."""
    warehouse = str(tmp_path / "wh")
    keep_four = {"snapshot.num-retained.min": "4", "snapshot.num-retained.max": "4"}
    longer = {"changelog.num-retained.min": "5", "changelog.num-retained.max": "5"}
    table = decoupled_table(warehouse, **keep_four, **longer)
    table.tag_manager.delete_tag("t3")  # the tag would hold snapshot 3's files anyway
    manager = table.snapshot_manager
    future_needs = {i: changelog_needs(table, manager.snapshot(i)) for i in range(5, 9)}

    expire_snapshots(spark_session, table, ExpiryRequest(older_than=FUTURE))

    assert manager.snapshot_ids() == [5, 6, 7, 8] and manager.changelog_ids() == [4]
    listed = listed_files(table)
    for snapshot_id, needs in future_needs.items():
        assert needs <= listed, (snapshot_id, sorted(needs - listed))
    assert needed(table) <= listed
    assert listed - needed(table) - set().union(*future_needs.values()) - HINTS == set()
