"""Manifest files: the manifest-list record of a manifest, rolling writes, and pypaimon reading what
we write."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

from paimon_format.manifest.codec import (
    read_manifest,
    write_index_manifest,
    write_manifest,
    write_manifest_list,
)
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    IndexManifestEntry,
    ManifestEntry,
    SimpleStats,
)
from paimon_format.manifest.files import manifest_file_meta, rolling_write_manifests
from paimon_format.model.binary_row import EMPTY_ROW, deserialize_row, serialize_row
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from tests.format.manifest.manifest_samples import (
    BIGINT,
    FILE_FIELDS,
    INT,
    META_FIELDS,
    STRING,
    bare_file,
    full_file,
)

# -- manifest file metadata -------------------------------------------------------------------------------


def test_partition_stats_cover_every_entry_with_nulls():
    types = [STRING, INT]
    partitions = [["b", 2], ["a", None], ["c", 1], [None, 5], ["b", 2]]
    entries = [
        ManifestEntry(
            ADD if i != 2 else DELETE,
            serialize_row(p, types),
            i,
            4,
            full_file(file_name=f"f{i}", level=i % 3, schema_id=i),
        )
        for i, p in enumerate(partitions)
    ]
    meta = manifest_file_meta("m", 10, entries, 9, types)
    assert deserialize_row(meta.partition_stats.min_values, types) == ["a", 1]
    assert deserialize_row(meta.partition_stats.max_values, types) == ["c", 5]
    assert meta.partition_stats.null_counts == [1, 1]  # per entry, not per distinct partition
    assert (meta.num_added_files, meta.num_deleted_files) == (4, 1)
    assert (meta.min_bucket, meta.max_bucket, meta.min_level, meta.max_level) == (0, 4, 0, 2)
    assert meta.schema_id == 4  # max over entries
    assert (meta.total_buckets, meta.extra_files) == (None, None)


def test_partition_stats_all_null_column_and_java_float_order():
    types = [INT, parse_type("DOUBLE")]
    entries = [
        ManifestEntry(ADD, serialize_row([None, d], types), 0, 1, full_file(file_name=str(i)))
        for i, d in enumerate([1.5, float("nan"), -0.0, 0.0])
    ]
    stats = manifest_file_meta("m", 1, entries, 0, types).partition_stats
    minimum = deserialize_row(stats.min_values, types)
    maximum = deserialize_row(stats.max_values, types)
    assert minimum[0] is None and maximum[0] is None and stats.null_counts == [4, 0]
    assert minimum[1] == 0.0 and math.copysign(1.0, minimum[1]) == -1.0  # Double.compare: -0.0 < 0.0
    assert math.isnan(maximum[1])  # NaN sorts above everything


def test_manifest_meta_row_ids_and_empty_manifests():
    with_ids = [
        ManifestEntry(ADD, EMPTY_ROW, 0, 1, full_file(first_row_id=100, row_count=10)),
        ManifestEntry(ADD, EMPTY_ROW, 0, 1, full_file(first_row_id=50, row_count=5)),
    ]
    meta = manifest_file_meta("m", 1, with_ids, 0, [])
    assert (meta.min_row_id, meta.max_row_id) == (50, 109)
    mixed = [*with_ids, ManifestEntry(ADD, EMPTY_ROW, 0, 1, full_file(first_row_id=None))]
    meta = manifest_file_meta("m", 1, mixed, 0, [])
    assert (meta.min_row_id, meta.max_row_id) == (None, None)
    empty = manifest_file_meta("m", 1, [], 7, [STRING])
    assert empty.schema_id == 7 and empty.min_bucket is None and empty.min_level is None
    assert empty.partition_stats.null_counts == [0] and deserialize_row(
        empty.partition_stats.min_values, [STRING]
    ) == [None]
    assert manifest_file_meta("m", 1, with_ids, 0, []).partition_stats == SimpleStats.empty()


# -- rolling writes ------------------------------------------------------------------------------------


def test_rolling_write_splits_at_the_target_size(tmp_path):
    file_io = FileIO.for_path(str(tmp_path))
    names = iter(f"manifest-r-{i}" for i in range(100))
    types = [STRING]
    entries = [
        ManifestEntry(
            ADD, serialize_row([f"p{i // 1000}"], types), i % 3, 3, full_file(file_name=f"data-{i}.parquet")
        )
        for i in range(3000)
    ]
    target = 16_000
    metas = rolling_write_manifests(
        file_io, str(tmp_path), lambda: next(names), entries, target, "zstd", types, 0
    )
    assert len(metas) > 1
    assert sum(m.num_added_files for m in metas) == 3000
    assert [
        e for m in metas for e in read_manifest(file_io, str(tmp_path / m.file_name), m.file_size)
    ] == entries
    for meta in metas:
        size = (tmp_path / meta.file_name).stat().st_size
        assert size == meta.file_size
        assert size < 2 * target  # rolled within about one block of the target
        assert meta == manifest_file_meta(
            meta.file_name, size, read_manifest(file_io, str(tmp_path / meta.file_name)), 0, types
        )
    assert (
        rolling_write_manifests(file_io, str(tmp_path), lambda: next(names), [], target, "zstd", types, 0)
        == []
    )


def test_rolling_write_removes_its_files_when_a_write_fails(tmp_path):
    real = FileIO.for_path(str(tmp_path))

    class FailingSecondWrite:
        """Delegates to a real FileIO; the second write fails."""

        writes = 0

        def join(self, *parts: str) -> str:
            return real.join(*parts)

        def delete(self, path: str) -> bool:
            return real.delete(path)

        def write_bytes(self, path: str, data: bytes) -> None:
            self.writes += 1
            if self.writes == 2:
                raise OSError("disk full")
            real.write_bytes(path, data)

    file_io: Any = FailingSecondWrite()
    names = iter(f"manifest-f-{i}" for i in range(10))
    entries = [ManifestEntry(ADD, EMPTY_ROW, 0, -1, full_file(file_name=f"data-{i}")) for i in range(2000)]
    with pytest.raises(OSError, match="disk full"):
        rolling_write_manifests(file_io, str(tmp_path), lambda: next(names), entries, 8_000, "zstd", [], 0)
    assert not list(tmp_path.glob("manifest-f-*"))


# -- pypaimon reads what we write ---------------------------------------------------------------------


def test_pypaimon_reads_our_manifest_manifest_list_and_index_manifest(tmp_path):
    pytest.importorskip("pypaimon")
    import pypaimon
    from pypaimon.manifest.index_manifest_file import IndexManifestFile
    from pypaimon.manifest.manifest_file_manager import ManifestFileManager
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    from tests.support.factories import make_table

    root = f"{tmp_path}/db.db/t"
    make_table(root, primary_keys=("id", "dt"), options={"bucket": "2"})
    types = [BIGINT, STRING, STRING]
    partition = serialize_row(["2024-01-01"], [STRING])
    ours = [
        ManifestEntry(
            ADD,
            partition,
            1,
            2,
            full_file(
                value_stats=SimpleStats(
                    serialize_row([1, "2024-01-01", "a"], types),
                    serialize_row([4, "2024-01-01", "z"], types),
                    [0, 0, 1],
                ),
                value_stats_cols=None,
                write_cols=None,
                first_row_id=None,
                creation_time=dt.datetime(2024, 5, 6, 7, 8, 9, 123_000),
                schema_id=0,
            ),
        ),
        ManifestEntry(
            DELETE,
            partition,
            0,
            2,
            bare_file(
                file_name="data-y-0.parquet",
                value_stats_cols=[],
                schema_id=0,
                value_stats=SimpleStats.empty(),
            ),
        ),
    ]
    file_io = FileIO.for_path(root)
    size = write_manifest(file_io, f"{root}/manifest/manifest-ours-0", ours, "zstd")
    metas = [manifest_file_meta("manifest-ours-0", size, ours, 0, [STRING])]
    list_size = write_manifest_list(file_io, f"{root}/manifest/manifest-list-ours-0", metas, "zstd")
    index = [
        IndexManifestEntry(
            ADD,
            partition,
            1,
            "DELETION_VECTORS",
            "index-ours-0",
            40,
            2,
            [{"f0": "data-x-0.parquet", "f1": 1, "f2": 30, "_CARDINALITY": 2}],
            None,
            None,
        )
    ]
    write_index_manifest(file_io, f"{root}/manifest/index-manifest-ours-0", index, "zstd")

    table = pypaimon.CatalogFactory.create({"warehouse": str(tmp_path)}).get_table("db.t")
    theirs = ManifestFileManager(table).read("manifest-ours-0", drop_stats=False, file_size=size)
    assert len(theirs) == len(ours)
    for their, our in zip(theirs, ours, strict=True):
        assert (their.kind, their.bucket, their.total_buckets) == (our.kind, our.bucket, our.total_buckets)
        assert their.partition.values == ["2024-01-01"]
        f, g = their.file, our.file
        for name in FILE_FIELDS:
            if name in ("min_key", "max_key"):
                assert getattr(f, name).values == deserialize_row(getattr(g, name), [BIGINT])
            elif name in ("key_stats", "value_stats"):
                assert list(getattr(f, name).null_counts) == getattr(g, name).null_counts
            elif name == "creation_time":
                expected = (
                    None
                    if g.creation_time is None
                    else (g.creation_time - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
                )
                assert (None if f.creation_time is None else f.creation_time.get_millisecond()) == expected
            else:
                assert getattr(f, name) == getattr(g, name), name

    (their_meta,) = ManifestListManager(table).read("manifest-list-ours-0", list_size)
    for name in META_FIELDS:
        if name == "partition_stats":
            assert their_meta.partition_stats.null_counts == metas[0].partition_stats.null_counts
            assert their_meta.partition_stats.min_values.get_field(0) == "2024-01-01"
        else:
            assert getattr(their_meta, name) == getattr(metas[0], name), name

    (their_index,) = IndexManifestFile(table).read("index-manifest-ours-0")
    assert (their_index.kind, their_index.bucket, their_index.partition.values) == (ADD, 1, ["2024-01-01"])
    meta = their_index.index_file
    assert (meta.index_type, meta.file_name, meta.file_size, meta.row_count) == (
        "DELETION_VECTORS",
        "index-ours-0",
        40,
        2,
    )
    dv = meta.dv_ranges["data-x-0.parquet"]
    assert (dv.offset, dv.length, dv.cardinality) == (1, 30, 2)
