"""Rewriting one compaction bin: its files read, merged or concatenated, written as new files.

Runs inside one Spark task per bin (and in plain Python in tests). The inputs stay untouched: the
new files are only referenced once the driver commits the COMPACT snapshot, and until then they
are unreferenced files that `abort` (or, after a crash, remove-orphan-files) deletes.

Append bins: the files are read in sequence order (deletion vectors applied by the reader) and
written again at level 0 with file source COMPACT; the output's sequence numbers start at the
first input's, as Paimon's append compaction numbers them, so a fixed bucket keeps its order.
`order_by` sorts the bin's rows by columns first (`order`), or along a Z-order curve (`zorder`) or a
Hilbert curve (`hilbert`) over the columns' ranks, to cluster the data for file pruning.

Primary-key bins: the bin's sorted runs are merged by key with the table's merge engine
(`paimon_format.merge.sorted_runs`) and the merged rows are written with their original sequence
numbers and value kinds, rolled at the target size, at the bin's output level: the top level
`num-levels - 1` for a full compaction, the level its runs belong to for a minor one
(`universal.Placement`). Retractions are dropped only where the placement allows it (no older
row of the key can remain below the output); otherwise they are written again so they still
cancel what they retract. On tables whose changelog Paimon produces while it compacts
(`changelog-producer` lookup / full-compaction) the same merge also yields the changelog of the
rewrite (`paimon_format.compaction.changelog`), written into changelog files alongside; the
full-compaction producer only when the output is the top level, as Paimon's rewriter.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.compaction.changelog import CHANGELOG_FILE_SOURCE, ChangelogSink, changelog_rule
from paimon_format.compaction.curves import hilbert_values, zorder_values
from paimon_format.compaction.universal import Placement
from paimon_format.data.conform import conform
from paimon_format.data.prefetch import Prefetch
from paimon_format.data.reader import read_data_file
from paimon_format.data.uploads import Uploads
from paimon_format.data.writer import BucketWriter
from paimon_format.index.deletion_vectors import DeletionFile, read_deletion_vectors
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.merge.sorted_runs import merge_sorted_runs
from paimon_format.merge.table_engine import uses_lookup_merge
from paimon_format.model.file_layout import file_arrow_schema, key_fields
from paimon_format.model.options import CoreOptions
from paimon_format.scan.splits import sorted_runs
from paimon_format.table import Table

COMPACT_FILE_SOURCE = 1

# order_strategy -> one uint64 per row along that curve (`order` is a plain multi-column sort)
CURVES = {"zorder": zorder_values, "hilbert": hilbert_values}


@dataclass(frozen=True)
class RewriteSpec:
    """What every bin of one run shares (small and picklable, shipped to the executors)."""

    target_file_size: int
    top_level: int
    order_by: tuple[str, ...] = ()
    order_strategy: str = "order"
    batch_rows: int = 8192


@dataclass
class BinOutput:
    """What one bin's rewrite wrote: the new data files, and the changelog files of the rewrite
    (empty unless the table's changelog producer works at compaction)."""

    files: list[DataFileMeta]
    changelog_files: list[DataFileMeta]


def rewrite_bin(
    table: Table,
    partition: bytes,
    bucket: int,
    files: Sequence[DataFileMeta],
    spec: RewriteSpec,
    deletion_files: Mapping[str, DeletionFile] | None = None,
    prefetch: Prefetch | None = None,
    uploads: Uploads | None = None,
    placement: Placement | None = None,
) -> BinOutput:
    """Write the bin's rows into new files and return their metadata; nothing is committed here.

    `deletion_files` (data file name -> its deletion vector) are applied: deleted rows are not
    written again, so the new files need no deletion vectors. `prefetch`: the task's read-ahead
    (`data.reader.prefetch_data_files` over `read_order`): next inputs in flight while one decodes.
    `uploads`: the task's background uploads (`data.uploads`): the files returned may still be
    uploading until its `wait`, which the task calls before its results leave it. `placement`: a
    primary-key bin's output level and whether it drops retractions (None: the top level, dropped).
    On any failure the files written so far (data and changelog) are deleted, then it is raised.
    """
    schema = table.schema
    options = CoreOptions(schema.options)
    primary_key = bool(schema.primary_keys)
    ordered = read_order(files)
    deleted = read_deletion_vectors(table, deletion_files) if deletion_files else {}
    placement = placement or Placement(spec.top_level, True)
    writer, sink = _bin_writers(table, partition, bucket, ordered, spec, options, uploads, placement)
    try:
        if primary_key:
            layout = file_arrow_schema(schema, options)
            merged = _merged_key_values(
                table,
                partition,
                bucket,
                ordered,
                options,
                spec,
                deleted,
                sink,
                prefetch,
                placement.drop_deletes,
            )
            for batch in merged:
                rows = pa.Table.from_batches([batch])
                writer.write_key_values(rows.select(layout.names).cast(layout))
        elif spec.order_by:
            batches = list(_append_batches(table, partition, bucket, ordered, spec, deleted, prefetch))
            rows = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None
            if rows is None:
                return BinOutput(writer.close(), [])
            writer.write(conform(sort_rows(rows, spec.order_by, spec.order_strategy), schema))
        else:
            for batch in _append_batches(table, partition, bucket, ordered, spec, deleted, prefetch):
                writer.write(conform(pa.Table.from_batches([batch]), schema))
        outputs = writer.close()
        return BinOutput(outputs, sink.close() if sink is not None else [])
    except BaseException:
        try:
            writer.abort()
        finally:
            if sink is not None:
                sink.abort()
        raise


def _bin_writers(
    table: Table,
    partition: bytes,
    bucket: int,
    ordered: Sequence[DataFileMeta],
    spec: RewriteSpec,
    options: CoreOptions,
    uploads: Uploads | None,
    placement: Placement,
) -> tuple[BucketWriter, ChangelogSink | None]:
    """The bin's data writer, and its changelog sink on tables whose changelog compaction produces
    (the full-compaction producer: only a compaction into the top level)."""
    schema = table.schema
    primary_key = bool(schema.primary_keys)
    writer = BucketWriter(
        table.file_io,
        table.path,
        schema,
        table.partition_values(partition),
        bucket,
        ordered[0].min_sequence_number if ordered else 0,
        options,
        level=placement.output_level if primary_key else 0,
        file_source=COMPACT_FILE_SOURCE,
        target_file_size=spec.target_file_size,
        uploads=uploads,
    )
    rule = changelog_rule(schema, options, spec.top_level) if primary_key else None
    if rule is not None and rule.producer == "full-compaction" and placement.output_level < spec.top_level:
        rule = None
    if rule is None:
        return writer, None
    changelog_writer = BucketWriter(
        table.file_io,
        table.path,
        schema,
        table.partition_values(partition),
        bucket,
        0,
        options,
        level=placement.output_level,
        file_source=CHANGELOG_FILE_SOURCE,
        target_file_size=spec.target_file_size,
        file_prefix=options.changelog_file_prefix,
        uploads=uploads,
    )
    return writer, ChangelogSink(rule, schema, options, changelog_writer)


def read_order(files: Sequence[DataFileMeta]) -> list[DataFileMeta]:
    """A bin's inputs in the order its rewrite reads them first: by sequence number (the order an
    append bin is written in; a primary-key merge opens every run's first file at once)."""
    return sorted(files, key=lambda f: (f.min_sequence_number, f.file_name))


def _append_batches(
    table: Table,
    partition: bytes,
    bucket: int,
    files: Sequence[DataFileMeta],
    spec: RewriteSpec,
    deleted: Mapping[str, Any],
    prefetch: Prefetch | None,
) -> Iterator[pa.RecordBatch]:
    for meta in files:
        yield from read_data_file(
            table,
            partition,
            bucket,
            meta,
            deleted_rows=deleted.get(meta.file_name),
            batch_rows=spec.batch_rows,
            prefetch=prefetch,
        )


def _merged_key_values(
    table: Table,
    partition: bytes,
    bucket: int,
    files: Sequence[DataFileMeta],
    options: CoreOptions,
    spec: RewriteSpec,
    deleted: Mapping[str, Any],
    sink: ChangelogSink | None = None,
    prefetch: Prefetch | None = None,
    drop_deletes: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The bin's rows merged by key, retractions dropped when `drop_deletes`; the run levels go to
    the merge (a lookup table's merge keeps one row above level 0 per key) and each window to `sink`."""

    def run_batches(run: Sequence[DataFileMeta]) -> Iterator[pa.RecordBatch]:
        return itertools.chain.from_iterable(
            read_data_file(
                table,
                partition,
                bucket,
                meta,
                system_columns=True,
                deleted_rows=deleted.get(meta.file_name),
                batch_rows=spec.batch_rows,
                prefetch=prefetch,
            )
            for meta in run
        )

    key_types = [field.type for field in key_fields(table.schema)]
    file_runs = sorted_runs(list(files), key_types)
    yield from merge_sorted_runs(
        [run_batches(run) for run in file_runs],
        table.schema,
        options,
        drop_deletes=drop_deletes,
        batch_rows=spec.batch_rows,
        run_levels=[run[0].level for run in file_runs],
        on_window=sink,
        merge_single_retractions=lookup_compaction(options) and any(f.level == 0 for f in files),
    )


def lookup_compaction(options: CoreOptions) -> bool:
    """Does Paimon compact this table with its lookup rewriter, whose merge wrapper sends every key
    through the merge function when the compaction holds level-0 files? It does when its writer
    looks keys up (lookup producer, deletion vectors, first-row, force-lookup), unless the changelog
    producer is full-compaction (whose wrapper passes a lone row through)."""
    if options.changelog_producer == "full-compaction":
        return False
    return options.merge_engine == "first-row" or uses_lookup_merge(options)


# -- ordering append rows ------------------------------------------------------------------------


def sort_rows(rows: pa.Table, columns: Sequence[str], strategy: str) -> pa.Table:
    """The rows ordered by `columns` (nulls last), or along a Z-order or Hilbert curve over them
    (`paimon_format.compaction.curves`)."""
    if rows.num_rows <= 1:
        return rows
    if strategy in CURVES:
        return rows.take(np.argsort(CURVES[strategy](rows, columns), kind="stable"))
    return rows.take(
        pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in columns], null_placement="at_end")
    )
