"""Merge-on-read of one split (see `splits`): the rows a reader of the table sees, as Arrow batches.

Append splits are their files one after the other. Primary-key splits are read section by section
in key order: a raw section (one file without retractions, or a split `splits.plan_splits` marked
raw) is the file's rows as they are; any other section's sorted runs go through
`merge.merge_sorted_runs`, which keeps one row per key and drops keys whose result is a retraction.
Deletion vectors are applied while reading each file. Memory: about one batch per open file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from paimon_format.data.prefetch import Prefetch
from paimon_format.data.reader import DEFAULT_BATCH_ROWS, output_arrow_schema, read_data_file
from paimon_format.errors import UnsupportedOperationError
from paimon_format.index.deletion_vectors import read_deletion_vectors
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.merge.sorted_runs import merge_sorted_runs
from paimon_format.merge.table_engine import check_merge_supported
from paimon_format.model.file_layout import key_fields
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.splits import Split, key_sections, sorted_runs
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyroaring import BitMap


def projected_schema(schema: TableSchema, columns: Sequence[str] | None) -> TableSchema:
    """`schema` reduced to `columns` (in that order) for raw reads; unknown names are an error."""
    if columns is None:
        return schema
    by_name = {f.name: f for f in schema.fields}
    unknown = [c for c in columns if c not in by_name]
    if unknown:
        raise UnsupportedOperationError(
            f"no column(s) {', '.join(unknown)} in the table (columns: {', '.join(by_name)})"
        )
    return dataclasses.replace(schema, fields=tuple(by_name[c] for c in columns), primary_keys=())


def read_split(
    table: Table,
    split: Split,
    read_schema: TableSchema | None = None,
    columns: Sequence[str] | None = None,
    deletion_vectors: Mapping[str, BitMap] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    prefetch: Prefetch | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of `split` in `read_schema` (default: the table's latest schema), `columns` only.

    `deletion_vectors` (data file name -> deleted positions) default to the split's own
    deletion files, read here. Batches hold at most `batch_rows` rows. `prefetch`: the task's
    read-ahead of data files (`data.reader.prefetch_data_files` over `split_files`).
    """
    read_schema = read_schema or table.schema
    output = projected_schema(read_schema, columns)
    vectors = (
        dict(deletion_vectors)
        if deletion_vectors is not None
        else read_deletion_vectors(table, split.deletion_files)
        if split.deletion_files
        else {}
    )
    if not read_schema.primary_keys or split.raw:
        return _read_files(table, split, split.files, output, vectors, batch_rows, prefetch=prefetch)
    check_merge_supported(read_schema, CoreOptions(read_schema.options))
    return _read_merged(table, split, read_schema, output, vectors, batch_rows, prefetch)


def split_files(splits: Sequence[Split]) -> Iterator[tuple[bytes, int, DataFileMeta]]:
    """(partition, bucket, file) of every data file the splits read, in about the order `read_split`
    opens them: what a task reading these splits fetches ahead."""
    for split in splits:
        for meta in split.files:
            yield split.partition, split.bucket, meta


def _read_files(
    table: Table,
    split: Split,
    files: Sequence[DataFileMeta],
    schema: TableSchema,
    vectors: Mapping[str, BitMap],
    batch_rows: int,
    system_columns: bool = False,
    prefetch: Prefetch | None = None,
) -> Iterator[pa.RecordBatch]:
    """`files` one after the other, without their deleted rows; with `system_columns` in the full
    key-value layout of `schema` (as a merge reads a sorted run), else in `schema`'s columns only."""
    for meta in files:
        yield from read_data_file(
            table,
            split.partition,
            split.bucket,
            meta,
            read_schema=schema,
            system_columns=system_columns,
            deleted_rows=vectors.get(meta.file_name),
            batch_rows=batch_rows,
            prefetch=prefetch,
        )


def _read_merged(
    table: Table,
    split: Split,
    read_schema: TableSchema,
    output: TableSchema,
    vectors: Mapping[str, BitMap],
    batch_rows: int,
    prefetch: Prefetch | None,
) -> Iterator[pa.RecordBatch]:
    key_types = [f.type for f in key_fields(read_schema)]
    options = CoreOptions(read_schema.options)
    layout = output_arrow_schema(output)
    for section in key_sections(split.files, key_types):
        if len(section) == 1 and not section[0].delete_row_count:
            yield from _read_files(table, split, section, output, vectors, batch_rows, prefetch=prefetch)
            continue
        file_runs = sorted_runs(section, key_types)
        runs = [
            _read_files(table, split, run, read_schema, vectors, batch_rows, True, prefetch)
            for run in file_runs
        ]
        # the run levels: a lookup table's merge keeps one row above level 0 per key, as Paimon's reads
        levels = [run[0].level for run in file_runs]
        merged = merge_sorted_runs(
            runs, read_schema, options, drop_deletes=True, batch_rows=batch_rows, run_levels=levels
        )
        for batch in merged:
            yield pa.RecordBatch.from_arrays([batch.column(f.name) for f in layout], schema=layout)
