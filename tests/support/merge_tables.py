"""A small append table that Paimon's branch merge accepts, for merge-branch's tests and chaos cases.

Main: ids 0-5 (snapshot 1, tag t1), 6-11 (snapshot 2); branch b made from t1 as create-branch makes
it (its first snapshot is a copy of snapshot 1, so its history starts at 1 as Paimon requires), with
its own appends 600-602 and 660-662 (its snapshots 2 and 3); then main appends 12-17 (snapshot 3).
Every commit is an APPEND, and the table sets `branch-merge.enabled`. Written without Spark.
"""

from __future__ import annotations

from jobs.create_branch import CreateBranchRequest, create_branch
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.table_states import TABLE_OPTIONS, append_rows, batch, table_root

MERGE_OPTIONS = {**TABLE_OPTIONS, "branch-merge.enabled": "true"}
BRANCH = "b"
MAIN_IDS = list(range(18))
BRANCH_IDS = [600, 601, 602, 660, 661, 662]


def build_mergeable_table(
    warehouse: str, options: dict[str, str] | None = None, storage_options: dict | None = None
) -> Table:
    """The table of the module docstring under `warehouse` (db.t); `options` replace MERGE_OPTIONS."""
    root = table_root(warehouse)
    table = Table(FileIO.for_path(root, storage_options), root)
    schema = new_table_schema(
        [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))],
        partition_keys=["dt"],
        options=MERGE_OPTIONS if options is None else options,
    )
    table.schema_manager.create_table(schema)
    table.refresh()
    append_rows(table, batch(0, 6))
    table.tag_manager.create_tag("t1", table.snapshot_manager.snapshot(1))
    append_rows(table, batch(6, 6))
    create_branch(table, CreateBranchRequest(BRANCH, tag="t1"))
    branch = table.for_branch(BRANCH)
    append_rows(branch, batch(600, 3))
    append_rows(branch, batch(660, 3))
    append_rows(table, batch(12, 6))
    return Table(table.file_io, table.path)
