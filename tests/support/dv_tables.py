"""Test helper: give a table deletion vectors by committing an index manifest (our commit cannot yet).

The new snapshot keeps every data manifest of the latest one in its base list, has an empty delta,
and names an index manifest with the latest's index entries plus the given ones, as a Paimon
commit that only changes deletion vectors does.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping

from pyroaring import BitMap

from paimon_format.index.deletion_vectors import write_index_file
from paimon_format.manifest.codec import write_index_manifest, write_manifest_list
from paimon_format.manifest.entries import IndexManifestEntry
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.snapshot_scan import data_manifests, index_entries, live_entries
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table
from tests.support.table_states import IDENTIFIER, append_rows, batch


def commit_index_entries(table: Table, entries: list[IndexManifestEntry]) -> Snapshot:
    latest = table.snapshot_manager.latest()
    assert latest is not None, "commit data first"
    file_io = table.file_io
    base, delta, index = (
        f"{kind}-{uuid.uuid4()}-0" for kind in ("manifest-list", "manifest-list", "index-manifest")
    )
    base_size = write_manifest_list(file_io, table.manifest_path(base), data_manifests(table, latest))
    delta_size = write_manifest_list(file_io, table.manifest_path(delta), [])
    write_index_manifest(file_io, table.manifest_path(index), index_entries(table, latest) + entries)
    snapshot = dataclasses.replace(
        latest,
        id=latest.id + 1,
        base_manifest_list=base,
        base_manifest_list_size=base_size,
        delta_manifest_list=delta,
        delta_manifest_list_size=delta_size,
        changelog_manifest_list=None,
        changelog_manifest_list_size=None,
        index_manifest=index,
        commit_kind="APPEND",
        delta_record_count=0,
        time_millis=int(time.time() * 1000),
        uuid=str(uuid.uuid4()),
    )
    assert table.snapshot_manager.try_commit(snapshot)
    table.snapshot_manager.write_latest_hint(snapshot.id)
    return snapshot


def delete_rows(table: Table, partition: bytes, bucket: int, vectors: Mapping[str, BitMap]) -> Snapshot:
    """Commit one new deletion-vector index file for (partition, bucket) holding `vectors`."""
    return commit_index_entries(table, [write_index_file(table, partition, bucket, vectors)])


def three_snapshots_with_a_vector(warehouse: str) -> Table:
    """A partitioned deletion-vector table of three snapshots: two appends of 4 rows, then an index
    commit deleting the first file's row 0 (so snapshot 3 has an index manifest; 2 has a manifest
    of its own; 1 has a delta list): each kind of metadata file the lenient readers must note."""
    table = Table.open(warehouse, IDENTIFIER)
    columns = [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))]
    options = {"deletion-vectors.enabled": "true"}
    table.schema_manager.create_table(new_table_schema(columns, partition_keys=["dt"], options=options))
    table.refresh()
    append_rows(table, batch(0, 4, days=1))
    append_rows(table, batch(4, 4, days=1))
    entry = live_entries(table, table.snapshot_manager.snapshot(1))[0]
    commit_index_entries(
        table, [write_index_file(table, entry.partition, 0, {entry.file.file_name: BitMap([0])})]
    )
    return table
