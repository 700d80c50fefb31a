"""Partitions in run records: as people write them in a spec, the first few listed, all counted."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from jobs.runtime.report import RunRecord
from paimon_format.model.partition_spec import PartitionStats
from paimon_format.table import Table

# Partitions listed one by one in a run record (all of them are counted).
RECORD_PARTITION_LIMIT = 100


def partition_label(table: Table, values: Sequence[Any]) -> dict[str, str]:
    """A partition as people write it in a spec: {key: text}, the default name for null."""
    default = table.options.partition_default_name
    label = {}
    for key, value in zip(table.schema.partition_keys, values, strict=True):
        if value is None:
            label[key] = default
        elif isinstance(value, (dt.date, dt.datetime)):
            label[key] = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
        else:
            label[key] = str(value)
    return label


def record_partitions(
    record: RunRecord, table: Table, chosen: Sequence[tuple[PartitionStats, Sequence[Any]]]
) -> None:
    """Counts of the chosen partitions, and the first RECORD_PARTITION_LIMIT of them in detail."""
    record.count("partitions", len(chosen))
    record.count("files", sum(stats.file_count for stats, _ in chosen))
    record.add_bytes("files", sum(stats.file_bytes for stats, _ in chosen))
    record.count("rows", sum(stats.row_count for stats, _ in chosen))
    record.details["partitions"] = [
        {
            "partition": partition_label(table, values),
            "files": stats.file_count,
            "bytes": stats.file_bytes,
            "rows": stats.row_count,
        }
        for stats, values in chosen[:RECORD_PARTITION_LIMIT]
    ]
    record.sample("partition_dirs", [table.partition_dir(stats.partition) for stats, _ in chosen])
