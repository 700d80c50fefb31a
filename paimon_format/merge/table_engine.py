"""The merge engine of a table: which one its options pick, and whether this module can merge it.

Above the engines (`engines`: deduplicate, first-row; `row`: partial-update, aggregation), so the
engines never import each other.
"""

from __future__ import annotations

from paimon_format.errors import UnsupportedOperationError
from paimon_format.merge.engines import Deduplicate, FirstRow
from paimon_format.merge.interface import MergeEngine, ignore_delete, option_flag
from paimon_format.merge.row import row_merge_engine
from paimon_format.merge.row_functions import check_row_merge_supported
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema


def uses_lookup_merge(options: CoreOptions) -> bool:
    """Does Paimon merge this table's rows through its `LookupMergeFunction`?

    It does where its writer looks keys up in the upper levels (`changelog-producer: lookup`,
    deletion vectors, `force-lookup`), except under first-row, whose merge is left unwrapped.
    That function merges, per key, the level-0 rows with only the newest row above level 0: a
    lookup compaction writes a key's merged value (including what it looked up below) above the
    older rows, which stay, so merging them all again would count the older ones twice.
    """
    if options.merge_engine == "first-row":
        return False
    return (
        options.changelog_producer == "lookup"
        or options.deletion_vectors_enabled
        or option_flag(options, "force-lookup")
    )


def merge_engine_for(schema: TableSchema, options: CoreOptions) -> MergeEngine:
    """The merge engine of the table's options (validated by `check_merge_supported`)."""
    check_merge_supported(schema, options)
    engine = options.merge_engine
    if engine == "deduplicate":
        return Deduplicate(ignore_delete(options))
    if engine == "first-row":
        return FirstRow(ignore_delete(options))
    return row_merge_engine(schema, options)


def check_merge_supported(schema: TableSchema, options: CoreOptions | None = None) -> None:
    """Raise `UnsupportedOperationError` naming the option when this table cannot be merged here.

    Jobs call it before any work, so a table with an unknown aggregate function or conflicting
    merge options fails with exit 2 before anything is read or written.
    """
    options = options or CoreOptions(schema.options)
    if not schema.primary_keys:
        raise UnsupportedOperationError("merging sorted runs needs a primary-key table")
    try:
        engine = options.merge_engine
    except ValueError as error:
        raise UnsupportedOperationError(str(error)) from None
    names = set(schema.field_names())
    for name in options.sequence_field:
        if name not in names:
            raise UnsupportedOperationError(f"sequence.field: {name!r} is not a column of the table")
        if options.get(f"fields.{name}.aggregate-function") is not None:
            raise UnsupportedOperationError(
                f"fields.{name}.aggregate-function: a sequence field must not be aggregated (as in Paimon)"
            )
    if option_flag(options, "sequence.snapshot-ordering"):
        raise UnsupportedOperationError("sequence.snapshot-ordering=true is not supported by this merge")
    ignore_delete(options)
    if engine == "first-row" and options.sequence_field:
        raise UnsupportedOperationError("merge-engine=first-row does not allow sequence.field (as in Paimon)")
    if engine in ("partial-update", "aggregation"):
        check_row_merge_supported(schema, options)
