"""The columns both write paths share: helper columns added to the input rows, and the result rows.

Every write task answers one row per file it wrote (`WRITTEN_FILE_SCHEMA`): the driver builds the
commit from those rows only, never from the data. The fixed-bucket path and the dynamic-bucket path
(`jobs.writing.dynamic_bucket`, which adds an `index` column) write the same rows.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from paimon_format.data.writer import BucketOutput
from paimon_format.table import Table

# The input order of a row (primary-key tables): "last write wins" among rows of one key.
ORDER_COLUMN = "__paimon_order"
# The Paimon bucket of a row, so the shuffle can send a whole bucket to one task.
BUCKET_COLUMN = "__paimon_bucket"

# One row per file a write task wrote (the write job's result rows, fixed or dynamic buckets)
WRITTEN_FILE_SCHEMA = pa.schema(
    [
        ("partition", pa.binary()),
        ("bucket", pa.int32()),
        ("meta", pa.binary()),
        ("rows", pa.int64()),
        ("size", pa.int64()),
        ("path", pa.string()),
        ("changelog", pa.bool_()),
    ]
)
WRITTEN_FILE_DDL = (  # the same columns for Spark
    "partition binary, bucket int, meta binary, rows long, size long, path string, changelog boolean"
)
# The result rows as the driver collects them: Spark Rows or dicts, with WRITTEN_FILE_SCHEMA's columns.
WrittenRows = list[Any]


def written_file_rows(table: Table, outputs: Iterable[BucketOutput]) -> list[dict[str, Any]]:
    """One result row per data file and changelog file of the buckets a task wrote."""
    rows = []
    for out in outputs:
        files = [(meta, False) for meta in out.files] + [(meta, True) for meta in out.changelog_files]
        for meta, changelog in files:
            rows.append(
                {
                    "partition": out.partition,
                    "bucket": out.bucket,
                    "meta": pickle.dumps(meta),
                    "rows": meta.row_count,
                    "size": meta.file_size,
                    "path": f"{table.bucket_relpath(out.partition, out.bucket)}/{meta.file_name}",
                    "changelog": changelog,
                }
            )
    return rows
