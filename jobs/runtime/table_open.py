"""Opening the configured table for a maintenance job: the one place that refuses a broken table.

Every job that works on an existing table opens it here, so a table whose metadata contradicts
itself (no schema, an unreadable latest snapshot, a snapshot naming a missing schema) ends every
job alike, with exit 2 and a one-line cause naming the file, before anything is planned or written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobs.runtime.errors import BadInputError
from paimon_format.branches import MAIN_BRANCH
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table


def open_existing_table(config: Any, wrap_io: Callable[[FileIO], FileIO] | None = None) -> Table:
    """The table of a `TableJobConfig` (warehouse, table, storage_options), checked by
    `Table.check_metadata`; a bad identifier or path is `BadInputError`. `wrap_io`: applied to the
    table's FileIO before the check (a job's per-run read memo sees the check's reads too)."""
    try:
        table = Table.open(
            config.warehouse,
            config.table,
            config.storage_options,
            getattr(config, "allow_unsafe_overwrite_commit", False),
            getattr(config, "io_parallelism", None),
        )
        if wrap_io is not None:
            table = Table(wrap_io(table.file_io), table.path, table.branch)
        table.check_metadata()
    except ValueError as error:
        raise BadInputError(str(error)) from None
    return table


def open_branch(table: Table, branch: str | None) -> Table:
    """The table's branch `branch` (None or "main": the table itself), checked as the table is; a
    branch that does not exist (no `branch/branch-<name>` with a schema) is `BadInputError`."""
    if branch is None or branch == MAIN_BRANCH:
        return table
    branch_table = table.for_branch(branch)
    if not table.branch_manager.branch_exists(branch) or branch_table.schema_manager.latest() is None:
        raise BadInputError(
            f"{branch_table.metadata_root}: branch {branch!r} does not exist "
            f"(branches: {table.branch_manager.branch_names() or 'none'})"
        )
    branch_table.check_metadata()
    return branch_table


def check_branch_name(value: str | None) -> str | None:
    """Pydantic check of a `branch:` key: a plain name (no '/', not blank)."""
    if value is not None and (not value.strip() or "/" in value):
        raise ValueError(f"{value!r} is no branch name")
    return value
