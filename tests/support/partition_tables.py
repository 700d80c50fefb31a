"""Tables whose partitions hold one metadata-only file each, dates counted back from today, and the
partitions a table still has: what the partition-expiry tests build and compare."""

from __future__ import annotations

import datetime as dt

from paimon_format.commit import SnapshotCommit
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message


def days_ago(days: int, fmt: str = "%Y-%m-%d") -> str:
    return (dt.datetime.now() - dt.timedelta(days=days)).strftime(fmt)


def live_partitions(table: Table) -> set[tuple]:
    snapshot = table.snapshot_manager.latest()
    return {tuple(table.partition_values(e.partition)) for e in live_entries(table, snapshot)}


def metadata_table(tmp_path, partitions, columns=(("id", "BIGINT"), ("dt", "STRING")), keys=("dt",), **kw):
    """A table whose partitions hold one metadata-only file each (creation time per partition)."""
    table = make_table(str(tmp_path / "db.db" / "t"), columns=columns, partition_keys=keys)
    committer = SnapshotCommit(table)
    for index, values in enumerate(partitions):
        created = kw.get("created", {}).get(values)
        meta = data_file(f"data-{index}.parquet")
        if created is not None:
            meta.creation_time = created
        committer.append([message(table, list(values), meta)])
    return table
