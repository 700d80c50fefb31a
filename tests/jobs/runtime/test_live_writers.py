"""A missing file while another writer committed during the run is a race (exit 3), not bad input."""

from __future__ import annotations

import datetime as dt
import os
from types import SimpleNamespace

from jobs.runtime import vanished_roots
from jobs.runtime.errors import EXIT_BAD_INPUT, EXIT_REFUSED
from jobs.runtime.live_writers import race_or_bad_input
from jobs.runtime.vanished_roots import missing_path, vanished_root
from paimon_format.errors import CorruptFileError, MissingFileError, SnapshotNotFoundError
from tests.support.table_states import IDENTIFIER, append_rows, batch, build_sample_table


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def test_a_missing_file_is_a_race_only_when_another_writer_committed_during_the_run(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=2)
    config = SimpleNamespace(warehouse=str(tmp_path), table=IDENTIFIER, storage_options=None)
    before = table.snapshot_manager.latest()
    missing = MissingFileError(f"{table.path}/manifest/{before.delta_manifest_list}")  # named by the latest

    started = iso(before.time_millis + 1)  # the run started after the last commit: nobody raced it
    assert race_or_bad_input(missing, EXIT_BAD_INPUT, "gone", config, started) == (EXIT_BAD_INPUT, "gone")

    append_rows(table, batch(100, 2))  # a writer commits while the run reads
    rival = table.snapshot_manager.latest()
    code, message = race_or_bad_input(missing, EXIT_BAD_INPUT, "gone", config, iso(rival.time_millis))
    assert code == EXIT_REFUSED
    assert message.startswith("gone -- ") and f"snapshot {rival.id} was committed" in message


def test_other_failures_keep_their_exit_code_under_a_live_writer(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=2)
    config = SimpleNamespace(warehouse=str(tmp_path), table=IDENTIFIER, storage_options=None)
    started = iso(table.snapshot_manager.latest().time_millis)
    corrupt = CorruptFileError(f"{table.path}/manifest/m-0", "truncated")
    assert race_or_bad_input(corrupt, EXIT_BAD_INPUT, "bad", config, started) == (EXIT_BAD_INPUT, "bad")
    assert race_or_bad_input(MissingFileError("x"), 1, "boom", config, started) == (1, "boom")
    no_config = race_or_bad_input(MissingFileError("x"), EXIT_BAD_INPUT, "m", None, started)
    assert no_config == (EXIT_BAD_INPUT, "m")


def _quiet_run(table) -> str:
    """A run that started after the table's last commit: nobody committed during it."""
    return iso(table.snapshot_manager.latest().time_millis + 1)


def test_a_snapshot_expired_before_its_read_is_a_race_a_gap_is_not(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=3)
    config = SimpleNamespace(warehouse=str(tmp_path), table=IDENTIFIER, storage_options=None)
    manager = table.snapshot_manager
    for snapshot_id in (1, 2):
        expired = SnapshotNotFoundError(
            f"{manager.snapshot_path(snapshot_id)}: snapshot {snapshot_id} does not exist"
        )
        assert race_or_bad_input(expired, EXIT_BAD_INPUT, "m", config, _quiet_run(table))[0] == EXIT_BAD_INPUT

    os.remove(manager.snapshot_path(1))  # a live writer's expiry took snapshot 1 after we listed it
    code, message = race_or_bad_input(
        SnapshotNotFoundError(f"{manager.snapshot_path(1)}: snapshot 1 does not exist"),
        EXIT_BAD_INPUT,
        "m",
        config,
        _quiet_run(table),
    )
    assert code == EXIT_REFUSED and "snapshot 1 was expired during the run (the earliest is now 2)" in message

    os.remove(manager.snapshot_path(3))  # a gap above the earliest is a broken table
    gap = SnapshotNotFoundError(f"{manager.snapshot_path(3)}: snapshot 3 does not exist")
    assert race_or_bad_input(gap, EXIT_BAD_INPUT, "m", config, _quiet_run(table))[0] == EXIT_BAD_INPUT


def test_a_manifest_list_of_an_expired_snapshot_is_a_race(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=3)
    config = SimpleNamespace(warehouse=str(tmp_path), table=IDENTIFIER, storage_options=None)
    first = table.snapshot_manager.snapshot(1)
    lost = f"{table.path}/manifest/{first.delta_manifest_list}"
    os.remove(lost)
    os.remove(table.snapshot_manager.snapshot_path(1))
    code, message = race_or_bad_input(MissingFileError(lost), EXIT_BAD_INPUT, "m", config, _quiet_run(table))
    assert code == EXIT_REFUSED and "named by no snapshot, tag or changelog" in message


def test_a_manifest_of_the_latest_snapshot_is_never_a_race(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=3)
    latest = table.snapshot_manager.latest()
    lost = f"{table.path}/manifest/{latest.delta_manifest_list}"
    os.remove(lost)
    waits: list[float] = []
    assert vanished_root(table, lost, wait=waits.append) is None
    assert waits == []  # no expiry deletes the latest snapshot: nothing to wait for


def test_an_expiry_in_progress_is_waited_for(tmp_path, monkeypatch) -> None:
    """Java deletes an expired snapshot's manifests before its snapshot file: a missing manifest
    whose only holders still exist is a race once they vanish within the settle time."""
    table = build_sample_table(str(tmp_path), commits=3)
    manager = table.snapshot_manager
    lost = f"{table.path}/manifest/{manager.snapshot(1).delta_manifest_list}"
    os.remove(lost)
    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 0.05)
    assert vanished_root(table, lost, wait=lambda seconds: None) is None  # snapshot 1 stays: broken

    def expiry_finishes(seconds: float) -> None:
        if manager.snapshot_exists(1):
            os.remove(manager.snapshot_path(1))

    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 30.0)
    assert "expired during the run" in vanished_root(table, lost, wait=expiry_finishes)


def test_a_deleted_tag_is_a_race(tmp_path) -> None:
    table = build_sample_table(str(tmp_path), commits=3)
    path = table.tag_manager.tag_path("nightly")
    assert vanished_root(table, path) == "tag 'nightly' was deleted during the run"
    assert missing_path(SnapshotNotFoundError(f"{path}: tag 'nightly' does not exist")) == path
