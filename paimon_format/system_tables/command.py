"""`python -m paimon_format system-table TABLE_PATH NAME [--snapshot N | --tag T] [--format F]`.

A system table printed without Spark: `$files` of a table at a glance, or as CSV / JSON lines for a
script. Rows are printed batch by batch as they are read (`$files`: a manifest at a time), so a
table with millions of files streams instead of being held; the text layout takes its column widths
from the header and the first batch.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from paimon_format.system_tables import SYSTEM_TABLES, system_table_batches, system_table_schema
from paimon_format.table import Table

FORMATS = ("text", "csv", "json")


def add_system_table_parser(commands: Any) -> argparse.ArgumentParser:
    """The `system-table` subcommand on `python -m paimon_format`'s subparsers."""
    parser = commands.add_parser(
        "system-table",
        help="a Paimon system table ($snapshots, $files, $partitions, ...) of a table",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("table_path", help="table directory, e.g. /data/warehouse/db.db/events")
    parser.add_argument(
        "name", help=f"one of {', '.join(SYSTEM_TABLES)} (a leading $ is fine; branch_b$files)"
    )
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--snapshot", type=int, help="snapshot id ($files, $manifests, $partitions, $buckets)"
    )
    chosen.add_argument("--tag", help="tag whose snapshot to describe (same tables)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="text (default), csv or json lines")
    return parser


def system_table_text(
    table: Table, name: str, snapshot_id: int | None = None, tag: str | None = None, fmt: str = "text"
) -> Iterator[str]:
    """The system table as chunks of text in `fmt`, one chunk per record batch (header first)."""
    schema = system_table_schema(table, name)
    batches = system_table_batches(table, name, snapshot_id, tag)
    if fmt == "json":
        for batch in batches:
            yield "".join(
                json.dumps(row, default=_json_value, ensure_ascii=False) + "\n" for row in batch.to_pylist()
            )
        return
    if fmt == "csv":
        for rows in _csv_chunks(schema, batches):
            sink = io.StringIO()
            csv.writer(sink, lineterminator="\n").writerows(rows)
            yield sink.getvalue()
        return
    yield from _aligned(schema, batches)


def _csv_chunks(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[list[list[Any]]]:
    """The header, then each batch's rows; a null is an empty field, a list its JSON."""
    yield [schema.names]
    for batch in batches:
        yield [[_csv_value(v) for v in row.values()] for row in batch.to_pylist()]


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    return value


def _aligned(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[str]:
    widths: list[int] | None = None
    rows_seen = 0
    for batch in batches:
        rows = [[_text_value(v) for v in row.values()] for row in batch.to_pylist()]
        if widths is None:
            widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(schema.names)]
            yield _line(schema.names, widths)
        rows_seen += len(rows)
        yield "".join(_line(row, widths) for row in rows)
    if widths is None:
        yield _line(schema.names, [len(n) for n in schema.names])
    yield f"({rows_seen} rows)\n"


def _line(values: list[str], widths: list[int]) -> str:
    return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip() + "\n"


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="milliseconds")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
