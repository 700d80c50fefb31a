"""Snapshot JSON, LATEST/EARLIEST hints, atomic snapshot creation, tags, branches, consumers, changelogs."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from paimon_format.errors import (
    CorruptFileError,
    SnapshotNotFoundError,
    StorageError,
)
from paimon_format.snapshot import Snapshot, SnapshotManager
from paimon_format.storage.fileio import FileIO
from paimon_format.tags import TagManager
from tests.format.metadata_samples import LONG_MAX, make_snapshot
from tests.support.samples import SAMPLES, needs_samples

SNAPSHOT_SAMPLES = sorted(SAMPLES.glob("snapshot.*.json")) + sorted(SAMPLES.glob("tag.*.json"))

# Key order of spec §3.
SPEC_ORDER = [
    "version", "uuid", "id", "schemaId", "baseManifestList", "baseManifestListSize", "deltaManifestList",
    "deltaManifestListSize", "changelogManifestList", "changelogManifestListSize", "indexManifest",
    "commitUser", "writerVersion", "commitIdentifier", "commitKind", "timeMillis", "logOffsets",
    "totalRecordCount", "deltaRecordCount", "changelogRecordCount", "watermark", "statistics", "properties",
    "nextRowId", "operation",
]  # fmt: skip


# -- JSON ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", SNAPSHOT_SAMPLES, ids=lambda p: p.name)
def test_sample_parses_and_round_trips(sample):
    text = sample.read_text()
    snapshot = Snapshot.from_json(text, str(sample))
    original = json.loads(text)
    assert snapshot.id == original["id"] and snapshot.commit_identifier == LONG_MAX
    assert snapshot.extra == {}
    rewritten = snapshot.to_json()
    assert json.loads(rewritten) == original
    assert Snapshot.from_json(rewritten) == snapshot
    keys = list(json.loads(rewritten))
    assert keys == sorted(keys, key=SPEC_ORDER.index)


@needs_samples
def test_sample_fields():
    snapshot = Snapshot.from_json((SAMPLES / "snapshot.pk_dynamic.2.json").read_text())
    assert snapshot.index_manifest == "index-manifest-0e6bc44d-07bb-4f26-8566-919fa1767c59"
    assert snapshot.base_manifest_list_size == 1347 and snapshot.changelog_manifest_list is None
    dropped = Snapshot.from_json((SAMPLES / "snapshot.dropped_part.4.json").read_text())
    assert dropped.commit_kind == "OVERWRITE" and dropped.delta_record_count == -3


def test_to_json_is_jacksons_layout_and_omits_nulls():
    snapshot = make_snapshot(1, uuid="u-1", properties={}, watermark=None)
    assert snapshot.to_json() == (
        "{\n"
        '  "version" : 3,\n'
        '  "uuid" : "u-1",\n'
        '  "id" : 1,\n'
        '  "schemaId" : 0,\n'
        '  "baseManifestList" : "manifest-list-x-2",\n'
        '  "deltaManifestList" : "manifest-list-x-3",\n'
        '  "commitUser" : "tester",\n'
        '  "commitIdentifier" : 9223372036854775807,\n'
        '  "commitKind" : "APPEND",\n'
        '  "timeMillis" : 1700000000001,\n'
        '  "totalRecordCount" : 10,\n'
        '  "deltaRecordCount" : 10\n'
        "}"
    )


def test_every_optional_key_round_trips_in_spec_order():
    snapshot = make_snapshot(
        7,
        base_manifest_list_size=1,
        delta_manifest_list_size=2,
        changelog_manifest_list="manifest-list-x-changelog",
        changelog_manifest_list_size=3,
        index_manifest="index-manifest-x-0",
        writer_version="paimon-jobs-0.1",
        changelog_record_count=4,
        watermark=-(2**63),
        statistics="stat-x-0",
        properties={"k": "v"},
        next_row_id=99,
        operation="WRITE",
    )
    data = json.loads(snapshot.to_json())
    assert list(data) == [k for k in SPEC_ORDER if k != "logOffsets"]
    assert Snapshot.from_json(snapshot.to_json(), "/t/snapshot/snapshot-7") == snapshot


def test_unknown_keys_are_kept_in_place():
    data = json.loads(make_snapshot(3).to_json())
    data["logOffsets"] = {}
    text = json.dumps(data)[:-1] + ', "futureKey": {"nested": [1, 2.50]}}'
    snapshot = Snapshot.from_json(text)
    assert set(snapshot.extra) == {"logOffsets", "futureKey"}
    rewritten = snapshot.to_json()
    assert json.loads(rewritten) == json.loads(text)
    keys = list(json.loads(rewritten))
    assert keys.index("logOffsets") == keys.index("timeMillis") + 1 and keys[-1] == "futureKey"
    assert '"nested" : [ 1, 2.50 ]' in rewritten  # decimal text kept as written


def test_old_snapshots_get_javas_defaults():
    data = json.loads(make_snapshot(2).to_json())
    for key in ("version", "totalRecordCount", "deltaRecordCount", "uuid"):
        del data[key]
    snapshot = Snapshot.from_json(json.dumps(data))
    assert (snapshot.version, snapshot.total_record_count, snapshot.delta_record_count) == (1, 0, 0)
    assert snapshot.uuid is None


@pytest.mark.parametrize(
    "key",
    [
        "id",
        "schemaId",
        "baseManifestList",
        "deltaManifestList",
        "commitUser",
        "commitIdentifier",
        "commitKind",
        "timeMillis",
    ],
)
def test_missing_required_key_is_corrupt(key):
    data = json.loads(make_snapshot(2).to_json())
    del data[key]
    with pytest.raises(CorruptFileError, match=f"'{key}'") as raised:
        Snapshot.from_json(json.dumps(data), "/t/snapshot/snapshot-2")
    assert raised.value.path == "/t/snapshot/snapshot-2"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "not valid JSON"),
        ('{"id": 1,', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        ("[]", "JSON object"),
    ],
)
def test_bad_json_is_corrupt(text, match):
    with pytest.raises(CorruptFileError, match=match):
        Snapshot.from_json(text, "/t/snapshot/snapshot-1")


def test_wrong_types_are_corrupt():
    for key, value in (
        ("id", "1"),
        ("commitIdentifier", 1.5),
        ("commitUser", 5),
        ("properties", []),
        ("totalRecordCount", True),
    ):
        data = json.loads(make_snapshot(1).to_json())
        data[key] = value
        with pytest.raises(CorruptFileError, match=f"'{key}'"):
            Snapshot.from_json(json.dumps(data))


def test_id_must_match_the_file_name():
    text = make_snapshot(2).to_json()
    assert Snapshot.from_json(text, "/t/snapshot/snapshot-2").id == 2
    with pytest.raises(CorruptFileError, match="file name"):
        Snapshot.from_json(text, "/t/snapshot/snapshot-3")
    with pytest.raises(CorruptFileError, match="file name"):
        Snapshot.from_json(text, "/t/changelog/changelog-5")
    assert Snapshot.from_json(text, "/t/tag/tag-3").id == 2  # a tag name is not an id


class FailingListing:
    """Wraps a FileIO whose directory listing fails (e.g. S3 throttling)."""

    def __init__(self, inner: FileIO) -> None:
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def list_dir(self, path: str):
        raise StorageError(f"{path}: listing failed (simulated)")


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def manager(file_io, table_root) -> SnapshotManager:
    return SnapshotManager(file_io, table_root)


def commit_ids(manager: SnapshotManager, *ids: int) -> None:
    for snapshot_id in ids:
        assert manager.try_commit(make_snapshot(snapshot_id))


# -- SnapshotManager -------------------------------------------------------------------------------


def test_new_table_has_no_snapshots(manager):
    assert manager.latest_id() is None and manager.earliest_id() is None
    assert manager.latest() is None and manager.earliest() is None
    assert manager.snapshot_ids() == [] and manager.changelog_ids() == []
    assert manager.snapshots_in_range(1, 10) == []


def test_paths(manager, file_io, table_root):
    assert manager.snapshot_dir() == file_io.join(table_root, "snapshot")
    assert manager.snapshot_path(4) == file_io.join(table_root, "snapshot", "snapshot-4")
    branch = SnapshotManager(file_io, table_root, branch="dev")
    assert branch.snapshot_path(1) == file_io.join(
        table_root, "branch", "branch-dev", "snapshot", "snapshot-1"
    )


def test_commit_read_and_hints(manager, file_io):
    snapshots = [make_snapshot(i) for i in (1, 2, 3)]
    for snapshot in snapshots:
        assert manager.try_commit(snapshot)
    manager.write_latest_hint(3)
    assert file_io.read_bytes(manager.latest_hint_path()) == b"3"
    assert manager.latest_id() == 3 and manager.earliest_id() == 1
    assert manager.snapshot(2) == snapshots[1] and manager.latest() == snapshots[2]
    assert file_io.read_bytes(manager.snapshot_path(1)).decode() == snapshots[0].to_json()
    assert manager.snapshot_ids() == [1, 2, 3]
    assert [s.id for s in manager.snapshots_in_range(2, 3)] == [2, 3]


def test_try_commit_never_overwrites(manager):
    first = make_snapshot(1)
    assert manager.try_commit(first) is True
    assert manager.try_commit(make_snapshot(1, commit_user="other")) is False
    assert manager.snapshot(1) == first


def test_latest_without_hint_lists(manager, file_io):
    commit_ids(manager, 1, 2, 3)
    assert not file_io.exists(manager.latest_hint_path())
    assert manager.latest_id() == 3


def test_stale_latest_hint_is_corrected_by_listing(manager):
    commit_ids(manager, 1, 2, 3, 4)
    manager.write_latest_hint(2)  # snapshot-3 exists: the hint lags
    assert manager.latest_id() == 4


def test_latest_hint_is_trusted_when_next_snapshot_is_absent(manager, file_io, table_root):
    commit_ids(manager, 1, 2, 3)
    manager.write_latest_hint(3)
    # No listing needed: a manager whose listing fails still answers.
    assert SnapshotManager(FailingListing(file_io), table_root).latest_id() == 3  # type: ignore[arg-type]


def test_latest_hint_pointing_past_the_snapshots_is_ignored(manager):
    commit_ids(manager, 1, 2)
    manager.write_latest_hint(10)
    assert manager.latest_id() == 2


@pytest.mark.parametrize("content", [b"garbage", b"", b"-1", b"1.5", b"\xff", b"0"])
def test_garbage_latest_hint_falls_back_to_listing(manager, file_io, content, caplog):
    commit_ids(manager, 1, 2, 3)
    file_io.write_bytes(manager.latest_hint_path(), content)
    with caplog.at_level(logging.WARNING, logger="paimon_format.snapshot"):
        assert manager.latest_id() == 3
    if content != b"0":
        assert "LATEST" in caplog.text


def test_hint_with_trailing_newline_is_accepted(manager, file_io):
    commit_ids(manager, 1, 2)
    file_io.write_bytes(manager.latest_hint_path(), b"2\n")
    assert manager.latest_id() == 2


def test_earliest_hint(manager, file_io):
    commit_ids(manager, 1, 2, 3, 4)
    manager.write_earliest_hint(2)
    assert file_io.read_bytes(manager.earliest_hint_path()) == b"2"
    assert manager.earliest_id() == 2  # trusted: snapshot-2 exists (snapshot-1 is there but hint wins)
    file_io.delete(manager.snapshot_path(1))
    file_io.delete(manager.snapshot_path(2))
    assert manager.earliest_id() == 3  # EARLIEST points at an expired snapshot: listing
    file_io.write_bytes(manager.earliest_hint_path(), b"nonsense")
    assert manager.earliest_id() == 3
    assert manager.earliest().id == 3


def test_listing_ignores_temp_and_hint_files(manager, file_io):
    commit_ids(manager, 1, 2)
    manager.write_latest_hint(2)
    manager.write_earliest_hint(1)
    for name in (".snapshot-3.tmp", "snapshot-3.tmp", "snapshot-x", "snapshot-"):
        file_io.write_bytes(file_io.join(manager.snapshot_dir(), name), b"{}")
    assert manager.snapshot_ids() == [1, 2]


def test_a_failed_listing_raises_instead_of_looking_empty(manager, file_io, table_root):
    commit_ids(manager, 1, 2)
    file_io.write_bytes(manager.latest_hint_path(), b"garbage")
    broken = SnapshotManager(FailingListing(file_io), table_root)  # type: ignore[arg-type]
    with pytest.raises(StorageError):
        broken.latest_id()
    with pytest.raises(StorageError):
        broken.snapshot_ids()
    with pytest.raises(StorageError):
        broken.earliest_id()
    broken_tags = TagManager(FailingListing(file_io), table_root)  # type: ignore[arg-type]
    with pytest.raises(StorageError):
        broken_tags.tag_names()


def test_missing_snapshot_names_the_path(manager):
    commit_ids(manager, 1)
    with pytest.raises(SnapshotNotFoundError) as raised:
        manager.snapshot(42)
    assert manager.snapshot_path(42) in str(raised.value)


def test_corrupt_snapshot_file(manager, file_io):
    file_io.write_bytes(manager.snapshot_path(1), b'{"version": 3, "id": ')
    with pytest.raises(CorruptFileError) as raised:
        manager.snapshot(1)
    assert raised.value.path == manager.snapshot_path(1)
    with pytest.raises(CorruptFileError):
        manager.latest()


def test_snapshots_in_range_skips_expired(manager, file_io):
    commit_ids(manager, 1, 2, 3, 4, 5)
    file_io.delete(manager.snapshot_path(1))
    assert [s.id for s in manager.snapshots_in_range(0, 3)] == [2, 3]
    assert [s.id for s in manager.snapshots_in_range(4, 100)] == [4, 5]


def race_for(manager: SnapshotManager, snapshot_id: int, writers: int = 2) -> list[bool]:
    """`writers` threads released together, each trying to create snapshot `snapshot_id`."""
    barrier = threading.Barrier(writers)
    results: list[bool] = []
    errors: list[BaseException] = []

    def attempt(user: str) -> None:
        try:
            snapshot = make_snapshot(snapshot_id, commit_user=user)
            barrier.wait()
            results.append(manager.try_commit(snapshot))
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=attempt, args=(f"writer-{n}",)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def test_racing_try_commit_has_exactly_one_winner(manager):
    for snapshot_id in range(1, 11):
        assert sorted(race_for(manager, snapshot_id)) == [False, True]
        assert manager.snapshot(snapshot_id).commit_user in ("writer-0", "writer-1")
    assert sorted(race_for(manager, 11, writers=8)).count(True) == 1


def test_changelogs(manager, file_io, table_root):
    for changelog_id in (3, 4):
        file_io.write_bytes(
            manager.changelog_path(changelog_id), make_snapshot(changelog_id).to_json().encode()
        )
    assert manager.changelog_path(3) == file_io.join(table_root, "changelog", "changelog-3")
    assert manager.changelog_ids() == [3, 4]
    assert manager.changelog(4).id == 4
    with pytest.raises(SnapshotNotFoundError, match="changelog-9"):
        manager.changelog(9)
