"""Builders for the merge tests: sorted runs from plain rows, and the merged output back as rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from paimon_format.merge.sorted_runs import merge_sorted_runs
from paimon_format.model.file_layout import file_arrow_schema, key_fields
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema, new_table_schema
from paimon_format.model.type_parsing import parse_type

KINDS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
KIND_NAMES = {code: name for name, code in KINDS.items()}


def make_schema(
    columns: Sequence[tuple[str, str]] = (("k", "BIGINT"), ("v", "STRING")),
    primary_keys: Sequence[str] = ("k",),
    options: dict[str, str] | None = None,
    partition_keys: Sequence[str] = (),
) -> TableSchema:
    return new_table_schema(
        [(name, parse_type(type_text)) for name, type_text in columns],
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=options or {},
    )


def sort_key(schema: TableSchema, row: dict[str, Any]) -> tuple:
    """The order of keys in a run: strings by UTF-8 bytes, as Paimon compares them."""
    return tuple(
        row[f.name].encode() if isinstance(row[f.name], str) else row[f.name] for f in key_fields(schema)
    )


def make_run(schema: TableSchema, rows: Sequence[tuple[int, str, dict[str, Any]]]) -> pa.Table:
    """One sorted run from (sequence number, kind, table row) tuples (sorted here by key)."""
    layout = file_arrow_schema(schema, CoreOptions(schema.options))
    keys = [f.name for f in key_fields(schema)]
    ordered = sorted(rows, key=lambda item: sort_key(schema, item[2]))
    records = []
    for sequence, kind, row in ordered:
        record = {f"_KEY_{k}": row[k] for k in keys}
        record["_SEQUENCE_NUMBER"] = sequence
        record["_VALUE_KIND"] = KINDS[kind]
        record.update(row)
        records.append(record)
    return pa.Table.from_pylist(records, schema=layout)


def batches_of(table: pa.Table, rows: int) -> list[pa.RecordBatch]:
    return [table.slice(start, rows).to_batches()[0] for start in range(0, table.num_rows, rows)]


def merged_rows(
    schema: TableSchema,
    runs: Sequence[pa.Table],
    drop_deletes: bool = True,
    batch_rows: int = 8192,
    input_batch_rows: int | None = None,
) -> list[tuple[int, str, dict[str, Any]]]:
    """(sequence number, kind, table row) per merged key, in output order."""
    inputs = [batches_of(run, input_batch_rows) if input_batch_rows else [run] for run in runs]
    batches = list(merge_sorted_runs(inputs, schema, drop_deletes=drop_deletes, batch_rows=batch_rows))
    names = schema.field_names()
    result = []
    for batch in batches:
        assert batch.num_rows <= batch_rows
        assert batch.schema.equals(file_arrow_schema(schema, CoreOptions(schema.options)))
        for record in batch.to_pylist():
            result.append(
                (record["_SEQUENCE_NUMBER"], KIND_NAMES[record["_VALUE_KIND"]], {n: record[n] for n in names})
            )
            for key in key_fields(schema):
                assert record[f"_KEY_{key.name}"] == record[key.name]
    return result


class PullRecorder:
    """A run as a generator of small batches that records how many rows were pulled from it."""

    def __init__(self, table: pa.Table, rows_per_batch: int) -> None:
        self.table = table
        self.rows_per_batch = rows_per_batch
        self.pulled = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for start in range(0, self.table.num_rows, self.rows_per_batch):
            batch = self.table.slice(start, self.rows_per_batch).to_batches()[0]
            self.pulled += batch.num_rows
            yield batch
