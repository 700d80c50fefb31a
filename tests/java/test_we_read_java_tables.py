"""Our reader on every Java-written fixture: at every snapshot, tag and branch, the format layer's
split planning and split reading (what `jobs.read.read_table` and the compact job run on the
executors) give exactly the rows Paimon's Java reads there."""

from __future__ import annotations

import datetime as dt
import glob
import io
import os
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from paimon_format.fileio import FileIO
from paimon_format.manifest import decode_manifest
from paimon_format.manifest_files import rolling_write_raw_manifests
from paimon_format.manifest_raw import _padding_for, iter_raw_entries
from paimon_format.scan import resolve_snapshot
from paimon_format.split_read import read_split
from paimon_format.splits import plan_splits
from paimon_format.table import Table
from tests.java.oracle import Row, sort_key
from tests.java.tables import JavaTable

pytestmark = pytest.mark.java


def our_read(path: str, ref: tuple[str, str]) -> list[Row]:
    """The rows our format layer reads at one ref, spelled as the oracle spells Java's."""
    kind, name = ref
    table = Table(FileIO.for_path(path), path)
    if kind == "branch":
        table = table.for_branch(name)
    snapshot = resolve_snapshot(
        table, snapshot_id=int(name) if kind == "snapshot" else None, tag=name if kind == "tag" else None
    )
    if snapshot is None:
        return []
    schema = table.schema_by_id(snapshot.schema_id)
    batches = [
        batch
        for split in plan_splits(table, snapshot)
        for batch in read_split(table, split, read_schema=schema)
    ]
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted((_spelled(row) for row in rows), key=sort_key)


def _spelled(value: Any) -> Any:
    """pyarrow's Python values as the oracle's typed JSON decodes Java's (MAP as pairs, UTC instants)."""
    if isinstance(value, dict):
        return {k: _spelled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_spelled(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_spelled(v) for v in value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    return value


def test_we_read_every_java_table_as_java_does(java_templates):
    warehouse, fixtures = java_templates
    checked = 0
    for name, table in fixtures.items():
        table: JavaTable
        for ref, java_rows in table.reads.items():
            assert our_read(table.path(warehouse), ref) == java_rows, (name, ref)
            checked += 1
    assert checked >= 2 * len(fixtures)  # every table has several refs


def test_java_manifests_are_copied_as_bytes_and_mean_what_the_models_read(java_templates, tmp_path):
    """Manifest rewrites (compact-manifests, the commit's merge, partition drops) copy each entry's
    bytes; Paimon 1.0's layout is ours less trailing nullable `_FILE` fields, so its entries are
    copied with null bytes appended, and the copies are the entries our models read."""
    warehouse, fixtures = java_templates
    file_io = FileIO.for_path(str(tmp_path))
    names = (f"manifest-copy-{i}" for i in range(1 << 20))
    copied = 0
    for name, table in fixtures.items():
        for path in glob.glob(os.path.join(table.path(warehouse), "manifest", "manifest-*")):
            if os.path.basename(path).startswith(("manifest-list-", "index-manifest-")):
                continue
            data = file_io.read_bytes(path)
            schema_text = fastavro.block_reader(io.BytesIO(data)).metadata["avro.schema"]
            assert _padding_for(schema_text) == b"\x00" * 5, (name, path)  # not the models' fallback
            expected = decode_manifest(data, path)
            raw = list(iter_raw_entries(data, path))
            for meta in rolling_write_raw_manifests(
                file_io, str(tmp_path), lambda: next(names), raw, 1 << 30, "zstd", [], 0
            ):
                assert decode_manifest(file_io.read_bytes(str(tmp_path / meta.file_name))) == expected, path
            copied += len(raw)
    assert copied > 100
