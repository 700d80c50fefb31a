"""Field aggregators of the aggregation and partial-update merge engines (Paimon's `FieldAggregator`s).

Each aggregator folds one column of a key's rows, oldest first: `agg(accumulator, value)` for an add,
`retract(accumulator, value)` for a -U/-D. As in Paimon, only some functions can retract: sum
subtracts, last_value forgets, last_non_null_value forgets a non-null retraction, the primary key
takes the value; the rest refuse unless `fields.<f>.ignore-retract` is set, which makes a retraction
keep the accumulator. Values are plain Python values as Arrow's `to_pylist` gives them.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from paimon_format.errors import InvalidTableStateError, UnsupportedOperationError
from paimon_format.model.options import CoreOptions
from paimon_format.model.types import DataType

_INTEGER_BOUNDS = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INT": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}
_NUMERIC = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL")
_ORDERED = (
    "BOOLEAN", "CHAR", "VARCHAR", "BINARY", "VARBINARY", "DECIMAL", "TINYINT", "SMALLINT", "INT",
    "BIGINT", "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ",
)  # fmt: skip
_ANY = None
_MAX_VARCHAR_LENGTH = 2147483647

PRIMARY_KEY = "primary-key"
"""Paimon's internal aggregator of key columns (takes the newest value, also on retraction)."""

SUPPORTED_TYPES: dict[str, tuple[str, ...] | None] = {
    "sum": _NUMERIC,
    "min": _ORDERED,
    "max": _ORDERED,
    "last_value": _ANY,
    "last_non_null_value": _ANY,
    "first_value": _ANY,
    "first_non_null_value": _ANY,
    "first_not_null_value": _ANY,  # Paimon's legacy name of first_non_null_value
    "listagg": ("VARCHAR",),  # unbounded VARCHAR (STRING) only, checked below
    "bool_and": ("BOOLEAN",),
    "bool_or": ("BOOLEAN",),
    PRIMARY_KEY: _ANY,
}


class AggregationError(InvalidTableStateError):
    """A value the aggregate cannot take (overflow, a retraction it cannot undo)."""


def aggregate_function_name(options: CoreOptions, field_name: str) -> str | None:
    """`fields.<f>.aggregate-function`, else `fields.default-aggregate-function`, else None."""
    own = options.get(f"fields.{field_name}.aggregate-function")
    if own is not None:
        return own.strip()
    default = options.get("fields.default-aggregate-function")
    return default.strip() if default is not None else None


def check_aggregator(field_name: str, data_type: DataType, function: str) -> None:
    """Raise `UnsupportedOperationError` naming the field when `function` cannot aggregate it here."""
    if function not in SUPPORTED_TYPES:
        hint = " (Paimon has no count: use sum over 1/0 values)" if function == "count" else ""
        raise UnsupportedOperationError(
            f"fields.{field_name}.aggregate-function={function!r} is not supported by this merge{hint}; "
            f"supported: {', '.join(sorted(f for f in SUPPORTED_TYPES if f != PRIMARY_KEY))}"
        )
    allowed = SUPPORTED_TYPES[function]
    unbounded = data_type.root == "VARCHAR" and data_type.length in (None, _MAX_VARCHAR_LENGTH)
    if function == "listagg" and not unbounded:
        raise UnsupportedOperationError(
            f"fields.{field_name}.aggregate-function='listagg' needs a STRING (unbounded VARCHAR) column, "
            f"not {data_type.to_json()} (as in Paimon)"
        )
    if allowed is not None and data_type.root not in allowed:
        raise UnsupportedOperationError(
            f"fields.{field_name}.aggregate-function={function!r} does not support type "
            f"{data_type.to_json()} (supports {', '.join(allowed)})"
        )


@dataclass
class FieldAggregator:
    """One column's aggregate: `agg`/`retract` fold values; `reset` starts a new key."""

    name: str
    function: str
    data_type: DataType
    ignore_retract: bool = False
    delimiter: str = ","
    distinct: bool = False
    _initialized: bool = field(default=False, repr=False)
    _agg: Callable[[Any, Any], Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._agg = getattr(self, "_agg_" + self.function.replace("-", "_"))

    def reset(self) -> None:
        self._initialized = False

    def agg(self, accumulator: Any, value: Any) -> Any:
        return self._agg(accumulator, value)

    def agg_reversed(self, accumulator: Any, value: Any) -> Any:
        """Paimon's `aggReversed`: the value is older than the accumulator."""
        return self._agg(value, accumulator)

    def retract(self, accumulator: Any, value: Any) -> Any:
        if self.ignore_retract:
            return accumulator
        function = self.function
        if function == "sum":
            if accumulator is None or value is None:
                return self._negate(value) if accumulator is None else accumulator
            return self._arith(accumulator, value, -1)
        if function == "last_value":
            return None
        if function == "last_non_null_value":
            return None if value is not None else accumulator
        if function == PRIMARY_KEY:
            return value
        raise AggregationError(
            f"aggregate function {function!r} of field {self.name} does not support retraction; set "
            f"'fields.{self.name}.ignore-retract'='true' to ignore retraction messages"
        )

    # -- the functions (null handling as Paimon: a null input leaves the accumulator) --------------

    def _agg_sum(self, accumulator: Any, value: Any) -> Any:
        if accumulator is None or value is None:
            return value if accumulator is None else accumulator
        return self._arith(accumulator, value, 1)

    def _agg_min(self, accumulator: Any, value: Any) -> Any:
        if accumulator is None or value is None:
            return value if accumulator is None else accumulator
        return accumulator if accumulator < value else value

    def _agg_max(self, accumulator: Any, value: Any) -> Any:
        if accumulator is None or value is None:
            return value if accumulator is None else accumulator
        return value if accumulator < value else accumulator

    def _agg_last_value(self, accumulator: Any, value: Any) -> Any:
        return value

    def _agg_last_non_null_value(self, accumulator: Any, value: Any) -> Any:
        return accumulator if value is None else value

    def _agg_first_value(self, accumulator: Any, value: Any) -> Any:
        if not self._initialized:
            self._initialized = True
            return value
        return accumulator

    def _agg_first_non_null_value(self, accumulator: Any, value: Any) -> Any:
        if not self._initialized and value is not None:
            self._initialized = True
            return value
        return accumulator

    _agg_first_not_null_value = _agg_first_non_null_value

    def _agg_bool_and(self, accumulator: Any, value: Any) -> Any:
        if accumulator is None or value is None:
            return value if accumulator is None else accumulator
        return accumulator and value

    def _agg_bool_or(self, accumulator: Any, value: Any) -> Any:
        if accumulator is None or value is None:
            return value if accumulator is None else accumulator
        return accumulator or value

    def _agg_listagg(self, accumulator: Any, value: Any) -> Any:
        if value is None or not value.strip():
            return accumulator
        if accumulator is None or not accumulator.strip():
            return value
        if not self.distinct:
            return accumulator + self.delimiter + value
        seen = set(accumulator.split(self.delimiter))
        parts = [accumulator]
        for token in value.split(self.delimiter):
            if not token.strip() or token in seen:
                continue
            seen.add(token)
            parts.append(token)
        return self.delimiter.join(parts)

    def _agg_primary_key(self, accumulator: Any, value: Any) -> Any:
        return value

    # -- arithmetic as Java's exact/overflowing types ----------------------------------------------

    def _negate(self, value: Any) -> Any:
        if value is None:
            return None
        return self._checked(-value, f"-({value})")

    def _arith(self, left: Any, right: Any, sign: int) -> Any:
        root = self.data_type.root
        if root == "FLOAT":
            a, b = np.float32(left), np.float32(right)
            return float(a + b if sign > 0 else a - b)
        if root == "DECIMAL":
            with decimal.localcontext() as context:
                context.prec = 100
                result = left + right if sign > 0 else left - right
            return self._fit_decimal(result)
        return self._checked(left + right if sign > 0 else left - right, f"{left} {'+-'[sign < 0]} {right}")

    def _checked(self, result: Any, expression: str) -> Any:
        bounds = _INTEGER_BOUNDS.get(self.data_type.root)
        if bounds is not None and not bounds[0] <= result <= bounds[1]:
            raise AggregationError(
                f"field {self.name}: {self.data_type.root} overflow in {self.function} ({expression})"
            )
        if self.data_type.root == "DECIMAL":
            return self._fit_decimal(result)
        return result

    def _fit_decimal(self, value: decimal.Decimal) -> decimal.Decimal | None:
        """Java's `Decimal.fromBigDecimal`: rounded half-up to the scale, null when it overflows."""
        scale = self.data_type.scale or 0
        precision = self.data_type.precision or 10
        quantum = decimal.Decimal(1).scaleb(-scale)
        with decimal.localcontext() as context:
            context.prec = 100
            rounded = value.quantize(quantum, rounding=decimal.ROUND_HALF_UP)
        if len(rounded.as_tuple().digits) > precision and rounded != 0:
            return None
        return rounded


def field_aggregator(
    options: CoreOptions, field_name: str, data_type: DataType, function: str
) -> FieldAggregator:
    """The aggregator of one column, with its per-field options (ignore-retract, listagg's)."""
    check_aggregator(field_name, data_type, function)
    prefix = f"fields.{field_name}."
    delimiter = options.get(prefix + "list-agg-delimiter")
    return FieldAggregator(
        name=field_name,
        function=function,
        data_type=data_type,
        ignore_retract=_flag(options, prefix + "ignore-retract"),
        delimiter="," if delimiter is None else delimiter,
        distinct=_flag(options, prefix + "distinct"),
    )


def _flag(options: CoreOptions, key: str) -> bool:
    raw = options.get(key)
    if raw is None:
        return False
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise UnsupportedOperationError(f"option {key}={raw!r}: expected true or false")
    return text == "true"
