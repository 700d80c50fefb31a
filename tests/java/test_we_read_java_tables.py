"""Our reader on every Java-written fixture: at every snapshot, tag and branch, the format layer's
split planning and split reading (what `jobs.read.read_table` and the compact job run on the
executors) give exactly the rows Paimon's Java reads there."""

from __future__ import annotations

import glob
import io
import os

import fastavro
import pytest

from paimon_format.manifest.codec import decode_manifest
from paimon_format.manifest.files import rolling_write_raw_manifests
from paimon_format.manifest.raw import _padding_for, iter_raw_entries
from paimon_format.storage.fileio import FileIO
from tests.java.helpers import our_read
from tests.java.tables import JavaTable

pytestmark = pytest.mark.java


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
