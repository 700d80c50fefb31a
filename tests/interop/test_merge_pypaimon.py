"""merge_sorted_runs against pypaimon 2.1.0: the same bucket's files merged by us and by its reader.

pypaimon writes primary-key tables with several commits (one level-0 sorted run per file, upserts
and, through `rowkind.field`, deletes and update-befores); we read the bucket's data files with
pyarrow, merge them (runs oldest first) and compare with the rows pypaimon's merge-on-read returns.
Covered: every engine pypaimon can both write and read back -- deduplicate (plain, sequence.field,
ignore-delete is filtered at write time by pypaimon so it is not exercised here), partial-update
(its supported subset: no options) and aggregation (several aggregators; pypaimon cannot write
retractions there).
first-row is not comparable: pypaimon's batch scan skips level 0 for it, so reads nothing here.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_format.merge.sorted_runs import merge_sorted_runs
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.pypaimon_merge_tables import CASES, write_merge_tables

pypaimon = pytest.importorskip("pypaimon")


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, str]:
    return write_merge_tables(str(tmp_path_factory.mktemp("merge-wh")))


def _runs_oldest_first(table_path: str) -> list[tuple[int, str]]:
    table = oracle.load_table(table_path)
    splits = table.new_read_builder().new_scan().plan().splits()
    return sorted((meta.min_sequence_number, meta.file_path) for split in splits for meta in split.files)


@pytest.mark.parametrize("case", sorted(CASES))
def test_merge_matches_pypaimon_reader(tables: dict[str, str], case: str) -> None:
    path = tables[case]
    table = Table(FileIO.for_path(path), path)
    files = _runs_oldest_first(path)
    assert len(files) == 4, "one level-0 run per commit"
    runs = [pq.ParquetFile(file).iter_batches(batch_size=7) for _, file in files]
    merged = list(merge_sorted_runs(runs, table.schema, drop_deletes=True, batch_rows=16))
    names = table.schema.field_names()
    ours = pa.Table.from_batches(merged).select(names).to_pylist() if merged else []
    expected = oracle.read_rows(path)
    assert len(expected) > 20
    assert oracle.sort_rows(ours) == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_our_scan_reader_and_merge_match_pypaimon(tables: dict[str, str], case: str) -> None:
    """The whole format-layer read path without pypaimon: live files from our manifest scan, rows
    from `read.read_data_file` (full key-value layout), runs ordered by sequence, merged."""
    from paimon_format.data.reader import read_data_file
    from paimon_format.scan.snapshot_scan import live_entries

    path = tables[case]
    table = Table(FileIO.for_path(path), path)
    entries = sorted(
        live_entries(table, table.snapshot_manager.latest()), key=lambda e: e.file.min_sequence_number
    )
    assert len(entries) == 4
    runs = [
        read_data_file(table, e.partition, e.bucket, e.file, system_columns=True, batch_rows=5)
        for e in entries
    ]
    merged = list(merge_sorted_runs(runs, table.schema, drop_deletes=True, batch_rows=8))
    ours = pa.Table.from_batches(merged).select(table.schema.field_names()).to_pylist()
    assert oracle.sort_rows(ours) == oracle.read_rows(path)
