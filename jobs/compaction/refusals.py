"""Tables the compaction refuses before anything is read (shared by compact and the write job).

The write job asks the same question before it writes into a table whose level 0 it must compact
afterwards (`jobs.writing.level0`), so a table the compaction would refuse fails before any file
is written, not after its APPEND snapshot landed.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobs.runtime.errors import BadInputError
from paimon_format.compaction.changelog import PRODUCERS_AT_COMPACTION, changelog_rule
from paimon_format.errors import PaimonFormatError
from paimon_format.merge.table_engine import check_merge_supported
from paimon_format.model.options import CoreOptions
from paimon_format.table import Table


class UnsupportedTable(BadInputError):
    """A table kind this job cannot compact correctly (exit 2, or skipped with skip_unsupported)."""


def check_supported(table: Table, order_by: Sequence[str] | None) -> None:
    """Refuse (exit 2, naming the reason) tables this job would compact wrongly."""
    schema = table.schema
    options = CoreOptions(schema.options)
    try:
        bucket = options.bucket
        producer = options.changelog_producer
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    if bucket == -2:
        raise UnsupportedTable(
            f"{table.path}: postpone-bucket tables (bucket = -2) cannot be compacted by this job"
        )
    if schema.primary_keys and producer in PRODUCERS_AT_COMPACTION:
        try:  # the changelog of the rewrite is produced as Paimon's compaction does
            changelog_rule(schema, options, 0)
        except ValueError as error:
            raise BadInputError(f"{table.path}: {error}") from None
    if options.row_tracking_enabled or options.data_evolution_enabled:
        raise UnsupportedTable(
            f"{table.path}: row tracking / data evolution tables cannot be compacted by this job"
        )
    if order_by:
        _check_order_by(table, order_by)
    if schema.primary_keys:
        try:
            check_merge_supported(schema, options)
        except PaimonFormatError as error:
            raise UnsupportedTable(f"{table.path}: {error}") from None


def _check_order_by(table: Table, order_by: Sequence[str]) -> None:
    """`order_by` applies to append tables, and names columns of the table."""
    schema = table.schema
    if schema.primary_keys:
        raise BadInputError(
            f"{table.path}: order_by applies to append tables; a primary-key table is ordered by its key"
        )
    names = set(schema.field_names())
    unknown = [column for column in order_by if column not in names]
    if unknown:
        raise BadInputError(
            f"{table.path}: order_by: no column {', '.join(map(repr, unknown))} "
            f"(columns: {', '.join(schema.field_names())})"
        )
