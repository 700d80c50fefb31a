"""The partial-update and aggregation merge functions: a key's row built field by field.

These follow Paimon's `PartialUpdateMergeFunction` and `AggregateMergeFunction` row by row, in
Python; `row.py` runs them over a window, only for keys that occur more than once in it: a key met
once is passed through unchanged (`ReducerMergeFunctionWrapper`), and its row is never converted to
Python values.

Partial-update: non-null fields overwrite in sequence order; with `fields.<g>.sequence-group=<f,..>`
the fields of a group are updated only by rows whose group sequence field(s) are not older than
the row built so far (nulls oldest), and group fields may aggregate. Retractions: skipped with
`ignore-delete`; with `partial-update.remove-record-on-delete` a -D makes the key's result a -D; with
sequence groups a retraction clears (or retracts the aggregates of) its group's fields, and a -D on a
group of `partial-update.remove-record-on-sequence-group` removes the row; otherwise an error.

Aggregation: each field folds with `fields.<f>.aggregate-function` (default
`fields.default-aggregate-function`, else last_non_null_value; key columns take the newest value,
`sequence.field` columns last_value); -U/-D retract; with `aggregation.remove-record-on-delete`
a -D makes the result a -D. The result carries the newest row's sequence number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from paimon_format.errors import UnsupportedOperationError
from paimon_format.merge.aggregates import (
    PRIMARY_KEY,
    FieldAggregator,
    aggregate_function_name,
    check_aggregator,
    field_aggregator,
)
from paimon_format.merge.interface import MergeFunctionError, ignore_delete, option_flag
from paimon_format.model.file_layout import RETRACT_KINDS
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema

INSERT, DELETE = 0, 3
"""`_VALUE_KIND` codes of +I and -D."""
_SEQUENCE_GROUP_SUFFIX = ".sequence-group"


@dataclass(frozen=True)
class MergeRow:
    """One row as the merge functions see it: its value kind, sequence number and field values."""

    kind: int
    sequence: int
    values: list[Any]


def _init_row(values: Sequence[Any], names: Sequence[str], nullables: Sequence[bool]) -> list[Any]:
    for name, value, nullable in zip(names, values, nullables, strict=True):
        if value is None and not nullable:
            raise MergeFunctionError(f"field {name} can not be null")
    return list(values)


# -- options -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SequenceGroups:
    """`fields.<seq fields>.sequence-group=<protected fields>`: `group_of` maps each field index
    (protected or sequence field) to its group's sequence field indexes; `by_sequence_field` maps
    each sequence field's name to its index (what remove-record-on-sequence-group names)."""

    group_of: dict[int, tuple[int, ...]]
    by_sequence_field: dict[str, int]

    @property
    def enabled(self) -> bool:
        return bool(self.group_of)


def sequence_groups(schema: TableSchema, options: CoreOptions) -> SequenceGroups:
    names = schema.field_names()
    group_of: dict[int, tuple[int, ...]] = {}
    by_field: dict[str, int] = {}

    def index(name: str, option: str) -> int:
        if name not in names:
            raise UnsupportedOperationError(f"{option}: field {name!r} is not a column of the table")
        return names.index(name)

    for key in sorted(options):
        if not (key.startswith("fields.") and key.endswith(_SEQUENCE_GROUP_SUFFIX)):
            continue
        sequence_names = key[len("fields.") : -len(_SEQUENCE_GROUP_SUFFIX)].split(",")
        sequence = tuple(index(n, key) for n in sequence_names)
        protected = [index(n, key) for n in options[key].split(",")]
        for field_index in protected + list(sequence):
            field_name = names[field_index]
            if field_name in schema.primary_keys:
                raise UnsupportedOperationError(
                    f"{key}: primary key field {field_name!r} cannot be in a sequence-group"
                )
        for field_index in protected:
            if field_index in group_of:
                raise UnsupportedOperationError(
                    f"{key}: field {names[field_index]!r} is defined repeatedly by multiple groups"
                )
            group_of[field_index] = sequence
        for field_index in sequence:
            group_of[field_index] = sequence
            by_field[names[field_index]] = field_index
    return SequenceGroups(group_of, by_field)


def _partial_update_aggregators(
    schema: TableSchema, options: CoreOptions, groups: SequenceGroups
) -> dict[int, FieldAggregator]:
    sequence_fields = {i for seq in groups.group_of.values() for i in seq}
    result: dict[int, FieldAggregator] = {}
    for i, f in enumerate(schema.fields):
        if i in sequence_fields:
            continue
        if f.name in schema.primary_keys:
            result[i] = field_aggregator(options, f.name, f.type, PRIMARY_KEY)
            continue
        function = aggregate_function_name(options, f.name)
        if function is None:
            continue
        if function != "last_non_null_value" and i not in groups.group_of:
            raise UnsupportedOperationError(
                f"merge-engine=partial-update: field {f.name!r} has aggregate function {function!r} "
                "but no sequence-group (Paimon requires one for aggregation functions)"
            )
        result[i] = field_aggregator(options, f.name, f.type, function)
    return result


def _aggregation_aggregators(schema: TableSchema, options: CoreOptions) -> list[FieldAggregator]:
    sequence_fields = set(options.sequence_field)
    result = []
    for f in schema.fields:
        if f.name in sequence_fields:
            function = "last_value"
        elif f.name in schema.primary_keys:
            function = PRIMARY_KEY
        else:
            function = aggregate_function_name(options, f.name) or "last_non_null_value"
        result.append(field_aggregator(options, f.name, f.type, function))
    return result


def check_row_merge_supported(schema: TableSchema, options: CoreOptions) -> None:
    """Up-front checks of the partial-update / aggregation options (Paimon's factory checks)."""
    if options.merge_engine == "aggregation":
        aggregators = _aggregation_aggregators(schema, options)
        if option_flag(options, "aggregation.remove-record-on-delete"):
            for aggregator in aggregators:
                if aggregator.ignore_retract:
                    raise UnsupportedOperationError(
                        "aggregation.remove-record-on-delete and "
                        f"fields.{aggregator.name}.ignore-retract cannot both be enabled"
                    )
        return
    for f in schema.fields:  # an unknown function fails even where partial-update would not use it
        function = aggregate_function_name(options, f.name)
        if function is not None and f.name not in schema.primary_keys:
            check_aggregator(f.name, f.type, function)
    _partial_update_from(schema, options)


# -- partial-update ------------------------------------------------------------------------------------


@dataclass
class PartialUpdate:
    names: list[str]
    nullables: list[bool]
    ignore_delete: bool
    remove_record_on_delete: bool
    groups: SequenceGroups
    aggregators: dict[int, FieldAggregator]
    partial_delete: frozenset[int]

    def merge_rows(self, rows: Sequence[MergeRow]) -> MergeRow:
        for aggregator in self.aggregators.values():
            aggregator.reset()
        n = len(self.names)
        state = [None] * n
        meet_insert = not_null_filled = current_delete = False
        latest_sequence = 0
        for item in rows:
            current_delete = False
            if item.kind in RETRACT_KINDS:
                if not not_null_filled:
                    state = _init_row(item.values, self.names, self.nullables)
                    not_null_filled = True
                if self.ignore_delete:
                    continue
                latest_sequence = item.sequence
                if self.groups.enabled:
                    state, current_delete = self._retract_with_groups(state, item)
                    continue
                if self.remove_record_on_delete:
                    if item.kind == DELETE:
                        current_delete = True
                        state = _init_row(item.values, self.names, self.nullables)
                    continue
                raise MergeFunctionError(
                    "merge-engine=partial-update cannot merge delete records: configure ignore-delete, "
                    "partial-update.remove-record-on-delete, or sequence-groups "
                    f"(a retraction with _SEQUENCE_NUMBER {item.sequence})"
                )
            latest_sequence = item.sequence
            if self.groups.enabled:
                self._update_with_groups(state, item.values)
            else:
                for i, value in enumerate(item.values):
                    if value is not None:
                        state[i] = value
                    elif not self.nullables[i]:
                        raise MergeFunctionError(f"field {self.names[i]} can not be null")
            meet_insert = not_null_filled = True
        kind = DELETE if current_delete or not meet_insert else INSERT
        return MergeRow(kind, latest_sequence, state)

    def _compare_group(self, sequence: tuple[int, ...], values: Sequence[Any], state: Sequence[Any]) -> int:
        """Paimon's group comparator: field by field, nulls smallest."""
        for i in sequence:
            a, b = values[i], state[i]
            if a is None and b is None:
                continue
            if a is None:
                return -1
            if b is None:
                return 1
            if a != b:
                return -1 if a < b else 1
        return 0

    def _update_with_groups(self, state: list[Any], values: Sequence[Any]) -> None:
        processed = [False] * len(self.names)
        for i in range(len(self.names)):
            sequence = self.groups.group_of.get(i)
            aggregator = self.aggregators.get(i)
            accumulator = state[i]
            if sequence is None:
                if aggregator is not None:
                    state[i] = aggregator.agg(accumulator, values[i])
                elif values[i] is not None:
                    state[i] = values[i]
                continue
            if processed[i]:
                continue
            if all(values[s] is None for s in sequence):
                for s in sequence:
                    processed[s] = True
                continue
            if self._compare_group(sequence, values, state) >= 0:
                if i in sequence:
                    for s in sequence:
                        state[s] = values[s]
                        processed[s] = True
                    continue
                state[i] = values[i] if aggregator is None else aggregator.agg(accumulator, values[i])
            elif aggregator is not None:
                state[i] = aggregator.agg_reversed(accumulator, values[i])

    def _retract_with_groups(self, state: list[Any], item: MergeRow) -> tuple[list[Any], bool]:
        values = item.values
        processed = [False] * len(self.names)
        updated: set[int] = set()
        for i in range(len(self.names)):
            sequence = self.groups.group_of.get(i)
            if sequence is None or processed[i]:
                continue
            aggregator = self.aggregators.get(i)
            if all(values[s] is None for s in sequence):
                for s in sequence:
                    processed[s] = True
                continue
            if self._compare_group(sequence, values, state) >= 0:
                if i in sequence:
                    for s in sequence:
                        if s not in updated:
                            if item.kind == DELETE and s in self.partial_delete:
                                return _init_row(values, self.names, self.nullables), True
                            state[s] = values[s]
                            updated.add(s)
                        processed[s] = True
                elif aggregator is None:
                    state[i] = None
                else:
                    state[i] = aggregator.retract(state[i], values[i])
            elif aggregator is not None:
                state[i] = aggregator.retract(state[i], values[i])
        return state, False


def _partial_update_from(schema: TableSchema, options: CoreOptions) -> PartialUpdate:
    ignore = ignore_delete(options)
    remove_on_delete = option_flag(options, "partial-update.remove-record-on-delete")
    remove_on_group = options.get("partial-update.remove-record-on-sequence-group")
    groups = sequence_groups(schema, options)
    aggregators = _partial_update_aggregators(schema, options, groups)
    if remove_on_delete and ignore:
        raise UnsupportedOperationError(
            "ignore-delete and partial-update.remove-record-on-delete cannot both be enabled"
        )
    if remove_on_group is not None and ignore:
        raise UnsupportedOperationError(
            "ignore-delete and partial-update.remove-record-on-sequence-group cannot both be enabled"
        )
    if remove_on_delete and groups.enabled:
        raise UnsupportedOperationError(
            "sequence-group and partial-update.remove-record-on-delete cannot both be enabled"
        )
    partial_delete: set[int] = set()
    if remove_on_group is not None:
        for name in remove_on_group.split(","):
            if name not in groups.by_sequence_field:
                raise UnsupportedOperationError(
                    f"partial-update.remove-record-on-sequence-group: field {name!r} must be the "
                    "sequence field of a sequence group"
                )
            partial_delete.add(groups.by_sequence_field[name])
    return PartialUpdate(
        names=schema.field_names(),
        nullables=[f.type.nullable for f in schema.fields],
        ignore_delete=ignore,
        remove_record_on_delete=remove_on_delete,
        groups=groups,
        aggregators=aggregators,
        partial_delete=frozenset(partial_delete),
    )


# -- aggregation ---------------------------------------------------------------------------------------


@dataclass
class Aggregation:
    names: list[str]
    nullables: list[bool]
    aggregators: list[FieldAggregator]
    remove_record_on_delete: bool

    def merge_rows(self, rows: Sequence[MergeRow]) -> MergeRow:
        for aggregator in self.aggregators:
            aggregator.reset()
        state: list[Any] = [None] * len(self.names)
        current_delete = False
        latest = rows[-1]
        for item in rows:
            current_delete = self.remove_record_on_delete and item.kind == DELETE
            if current_delete:
                state = _init_row(item.values, self.names, self.nullables)
                continue
            if item.kind in RETRACT_KINDS:
                state = [
                    a.retract(s, v) for a, s, v in zip(self.aggregators, state, item.values, strict=True)
                ]
            else:
                state = [a.agg(s, v) for a, s, v in zip(self.aggregators, state, item.values, strict=True)]
        return MergeRow(DELETE if current_delete else INSERT, latest.sequence, state)


def row_merge_function(schema: TableSchema, options: CoreOptions) -> PartialUpdate | Aggregation:
    """The partial-update or aggregation merge function of the table's options."""
    if options.merge_engine == "aggregation":
        return Aggregation(
            names=schema.field_names(),
            nullables=[f.type.nullable for f in schema.fields],
            aggregators=_aggregation_aggregators(schema, options),
            remove_record_on_delete=option_flag(options, "aggregation.remove-record-on-delete"),
        )
    return _partial_update_from(schema, options)
