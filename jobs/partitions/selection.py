"""Which partitions a job names: specs or a predicate, shared by drop-partition and compact.

Specs (`{dt: "2024-05-14"}`, a spec may name only some keys) or one predicate on the partition
columns (`dt < '2024-01-01' AND hr IN ('01', '02')`, the grammar of
`paimon_format.scan.partition_predicate`) become partition tests, and a manifest pruner from the
manifests' partition stats. A selection that does not fit the table is the user's input: exit 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.runtime.errors import BadInputError
from paimon_format.model.binary_row import deserialize_row
from paimon_format.model.types import DataType
from paimon_format.scan.partition_predicate import (
    PartitionColumns,
    PartitionTest,
    PredicateError,
    predicate_test,
    selects,
    spec_test,
)
from paimon_format.scan.partition_pruning import ManifestTest, any_of, predicate_pruner, spec_pruner
from paimon_format.table import Table

PartitionSpecs = Sequence[Mapping[str, Any]]


def selection_tests(
    table: Table, specs: PartitionSpecs | None, where: str | None
) -> list[tuple[str, PartitionTest]]:
    """(description, test) per spec, or one for the predicate; BadInputError when one does not fit."""
    columns = PartitionColumns.of(table.schema)
    try:
        if where is not None:
            return [(where, predicate_test(where, columns))]
        return [(str(dict(spec)), spec_test(spec, columns)) for spec in specs or []]
    except PredicateError as error:
        raise _bad_selection(table, where, error) from None


def selection_pruner(table: Table, specs: PartitionSpecs | None, where: str | None) -> ManifestTest:
    """Whether a manifest may hold a partition the selection picks, from its partition stats."""
    columns = PartitionColumns.of(table.schema)
    try:
        if where is not None:
            return predicate_pruner(where, columns)
        return any_of([spec_pruner(spec, columns) for spec in specs or []])
    except PredicateError as error:
        raise _bad_selection(table, where, error) from None


def _bad_selection(table: Table, where: str | None, error: PredicateError) -> BadInputError:
    what = f"where {where!r}" if where is not None else "partitions"
    return BadInputError(f"{table.path}: {what}: {error}")


def selected(partition: bytes, types: Sequence[DataType], tests: Sequence[PartitionTest]) -> bool:
    """Whether any test selects the partition (run on the executors, once per partition and task)."""
    values = deserialize_row(partition, types)
    return any(selects(test, values) for test in tests)
