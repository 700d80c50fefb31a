"""What each root of a table still references (`paimon_format.maintenance.references`; no Spark)."""

from __future__ import annotations

import uuid

from paimon_format.commit import SnapshotCommit
from paimon_format.maintenance.references import SNAPSHOT_ROOT, changelog_references, root_references
from tests.support.factories import data_file, make_table, message

U = str(uuid.uuid4())


def test_a_snapshot_handed_over_to_a_changelog_after_the_listing_still_protects(tmp_path) -> None:
    """Expiry writes changelog-<id>, then deletes snapshot-<id>: a root listed as the snapshot must
    read the changelog's needs, or remove-orphan-files would delete what the changelog reads."""
    table = make_table(str(tmp_path / "t"))
    for n in range(2):
        SnapshotCommit(table).append([message(table, ["2024-01-01"], data_file(f"data-{U}-{n}.parquet"))])
    manager = table.snapshot_manager
    listed_root = root_references(table, SNAPSHOT_ROOT, "1")
    assert listed_root is not None

    table.file_io.write_bytes(manager.changelog_path(1), table.file_io.read_bytes(manager.snapshot_path(1)))
    table.file_io.delete(manager.snapshot_path(1))

    found = root_references(table, SNAPSHOT_ROOT, "1")
    assert found is not None
    expected = changelog_references(table, manager.changelog(1))
    assert (found.files, found.manifests) == (expected.files, expected.manifests)
    snapshot = manager.changelog(1)
    assert f"manifest/{snapshot.delta_manifest_list}" in found.files

    table.file_io.delete(manager.changelog_path(1))
    assert root_references(table, SNAPSHOT_ROOT, "1") is None  # expired for good: needs nothing
