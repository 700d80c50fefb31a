"""Opening the configured table for a maintenance job: the one place that refuses a broken table.

Every job that works on an existing table opens it here, so a table whose metadata contradicts
itself (no schema, an unreadable latest snapshot, a snapshot naming a missing schema) ends every
job alike, with exit 2 and a one-line cause naming the file, before anything is planned or written.
"""

from __future__ import annotations

from typing import Any

from jobs.errors import BadInputError
from paimon_format.table import Table


def open_existing_table(config: Any) -> Table:
    """The table of a `TableJobConfig` (warehouse, table, storage_options), checked by
    `Table.check_metadata`; a bad identifier or path is `BadInputError`."""
    try:
        table = Table.open(
            config.warehouse,
            config.table,
            config.storage_options,
            getattr(config, "allow_unsafe_overwrite_commit", False),
        )
        table.check_metadata()
    except ValueError as error:
        raise BadInputError(str(error)) from None
    return table
