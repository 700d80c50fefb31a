"""A primary-key bin rewritten at its placement (`universal.Placement`): the output level, whether
retractions stay, and the full-compaction producer's changelog only at the top level."""

from __future__ import annotations

import pyarrow as pa
import pytest

from paimon_format.compaction.rewrite import RewriteSpec, rewrite_bin
from paimon_format.compaction.universal import Placement
from paimon_format.data.reader import read_data_file
from paimon_format.data.writer import write_table_files
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.model.file_layout import VALUE_KIND
from paimon_format.table import Table
from tests.support.factories import make_table

SPEC = RewriteSpec(target_file_size=1 << 30, top_level=5)


def _level0_bucket(tmp_path) -> tuple[Table, bytes, list[DataFileMeta]]:
    """Two level-0 files of one bucket: three keys, then an update of key 1 and a delete of key 2."""
    table = make_table(
        str(tmp_path / "t"),
        partition_keys=(),
        primary_keys=("id",),
        options={"bucket": "1", "changelog-producer": "full-compaction"},
    )
    files: list[DataFileMeta] = []
    batches = [
        pa.table({"id": pa.array([1, 2, 3], pa.int64()), "dt": ["d"] * 3, "v": ["a", "b", "c"]}),
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "dt": ["d"] * 2,
                "v": ["a2", "b"],
                "_VALUE_KIND": pa.array([0, 3], pa.int8()),
            }
        ),
    ]
    partitions = set()
    for index, data in enumerate(batches):
        for partition, _bucket, metas in write_table_files(
            table.file_io, table.path, table.schema, data, index * 10
        ):
            partitions.add(partition)
            files.extend(metas)
    (partition,) = partitions
    return table, partition, files


def _kinds(table: Table, partition: bytes, metas: list[DataFileMeta]) -> dict[int, int]:
    rows = [
        row
        for meta in metas
        for batch in read_data_file(table, partition, 0, meta, system_columns=True)
        for row in batch.to_pylist()
    ]
    return {row["_KEY_id"]: row[VALUE_KIND] for row in rows}


@pytest.mark.parametrize(
    ("placement", "kinds", "changelog"),
    [
        (Placement(4, False), {1: 0, 2: 3, 3: 0}, False),  # below the top: the -D of key 2 stays
        (Placement(5, True), {1: 0, 3: 0}, True),  # the top level: dropped; the changelog is written
        (None, {1: 0, 3: 0}, True),  # no placement (strategy full): the top level
    ],
)
def test_a_bin_is_written_at_its_placement(tmp_path, placement, kinds, changelog) -> None:
    table, partition, files = _level0_bucket(tmp_path)
    output = rewrite_bin(table, partition, 0, files, SPEC, placement=placement)
    level = placement.output_level if placement else SPEC.top_level
    assert output.files and all(meta.level == level and meta.file_source == 1 for meta in output.files)
    assert _kinds(table, partition, output.files) == kinds
    assert bool(output.changelog_files) == changelog
