"""A Spark-free stand-in for the part of pyspark's DataFrame API our maintenance jobs use, over pyarrow.

Why: for a small table, Spark's per-job cost (scheduling, Python workers, shuffles of a few hundred
rows) is most of a maintenance run. The jobs' real work already lives in plain functions over Arrow
batches (the `mapInArrow` functions calling `paimon_format`); what Spark adds around them is
plumbing: fanning lists out, filters, unions, group-bys, joins, collecting counts. `LocalSession`
does that plumbing in the driver process with pyarrow, so the SAME job code, with the same safety
checks, runs unchanged whichever session it is handed (`jobs.runtime.local_exec` decides which).

Semantics follow Spark where the jobs depend on them: `mapInArrow` output is cast to the declared
schema, `filter` drops nulls, `left_anti`/`left_semi`/inner joins by column name, `unionByName`
widens integer types, `max_by` takes the value at the greatest ordering value, aggregates are named
as Spark names them (`count(path)`). Partitioning calls (`repartition`, `localCheckpoint`,
`persist`) are no-ops: everything is one in-memory partition. Every frame is materialised at once,
so a session has a `row_limit`: a frame above it raises `LocalLimitExceeded` and the caller runs
the job on Spark instead; the driver's memory stays bounded whatever the table holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class LocalLimitExceeded(Exception):
    """A frame of a local run grew past the session's row limit: the table is not small after all."""


_TYPES = {
    "string": pa.string(),
    "long": pa.int64(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "double": pa.float64(),
}
_SIMPLE_FIELD = re.compile(r"^\s*(\w+)\s+(.+?)\s*$")


def parse_type(text: Any) -> pa.DataType:
    """A Spark DDL type (`long`, `array<string>`) or a pyspark type object, as a pyarrow type."""
    if not isinstance(text, str):
        text = text.simpleString()  # pyspark DataType objects (no JVM needed)
    text = text.strip().lower()
    if text.startswith("array<") and text.endswith(">"):
        return pa.list_(parse_type(text[len("array<") : -1]))
    if text not in _TYPES:
        raise ValueError(f"local frame: unsupported column type {text!r}")
    return _TYPES[text]


def parse_schema(text: str) -> pa.Schema:
    """`"path string, size long"` (the DDL strings the jobs hand to mapInArrow) as a pyarrow schema."""
    fields = []
    for part in text.split(","):
        match = _SIMPLE_FIELD.match(part)
        if match is None:
            raise ValueError(f"local frame: cannot parse column {part!r} of {text!r}")
        fields.append(pa.field(match.group(1), parse_type(match.group(2))))
    return pa.schema(fields)


class LocalRow(tuple):
    """A collected row: by position (`row[0]`) and by column name (`row["files"]`), like pyspark's Row."""

    _names: tuple[str, ...]

    def __new__(cls, names: tuple[str, ...], values: Iterable[Any]) -> LocalRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def asDict(self) -> dict[str, Any]:  # noqa: N802 - pyspark's name
        return dict(zip(self._names, self, strict=True))


# -- columns and functions ---------------------------------------------------------------------------


class Column:
    """An expression evaluated over a whole pyarrow table, or an aggregate (`aggregate` set)."""

    def __init__(self, evaluate: Callable[[pa.Table], Any], name: str, aggregate: tuple | None = None):
        self.evaluate = evaluate
        self.name = name
        self.aggregate = aggregate  # (pyarrow function, input Column[, ordering Column])

    def alias(self, name: str) -> Column:
        return Column(self.evaluate, name, self.aggregate)

    def cast(self, type_name: str) -> Column:
        target = parse_type(type_name)
        return Column(lambda t: pc.cast(self.evaluate(t), target), self.name)

    def isin(self, *values: Any) -> Column:
        value_set = pa.array(values[0] if len(values) == 1 and isinstance(values[0], list) else values)
        return Column(lambda t: pc.is_in(self.evaluate(t), value_set=value_set), f"({self.name} IN)")

    def __getitem__(self, index: int) -> Column:
        return Column(lambda t: pc.list_element(self.evaluate(t), index), f"{self.name}[{index}]")

    def isNull(self) -> Column:  # noqa: N802 - pyspark's name
        return Column(lambda t: pc.is_null(self.evaluate(t)), f"({self.name} IS NULL)")

    def isNotNull(self) -> Column:  # noqa: N802 - pyspark's name
        return Column(lambda t: pc.is_valid(self.evaluate(t)), f"({self.name} IS NOT NULL)")

    def _binary(self, other: Any, function: str) -> Column:
        right = _column(other, literal=True)
        return Column(lambda t: pc.call_function(function, [self.evaluate(t), right.evaluate(t)]), function)

    def __eq__(self, other: Any) -> Column:  # type: ignore[override]
        return self._binary(other, "equal")

    def __ne__(self, other: Any) -> Column:  # type: ignore[override]
        return self._binary(other, "not_equal")

    def __lt__(self, other: Any) -> Column:
        return self._binary(other, "less")

    def __le__(self, other: Any) -> Column:
        return self._binary(other, "less_equal")

    def __gt__(self, other: Any) -> Column:
        return self._binary(other, "greater")

    def __ge__(self, other: Any) -> Column:
        return self._binary(other, "greater_equal")

    def __and__(self, other: Any) -> Column:
        return self._binary(other, "and_kleene")

    def __or__(self, other: Any) -> Column:
        return self._binary(other, "or_kleene")

    def __invert__(self) -> Column:
        return Column(lambda t: pc.invert(self.evaluate(t)), f"(NOT {self.name})")

    __hash__ = None  # type: ignore[assignment]


def _if_else(condition: Any, chosen: Any, other: Any) -> Any:
    if isinstance(chosen, pa.Scalar) and isinstance(other, pa.Scalar) and chosen.type != other.type:
        other = other.cast(chosen.type)
    return pc.if_else(pc.fill_null(condition, False), chosen, other)


def _literal_type(value: Any) -> pa.DataType | None:
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):  # Spark: an int literal is INT when it fits, else BIGINT
        return pa.int32() if -(2**31) <= value < 2**31 else pa.int64()
    return None


def col(name: str) -> Column:
    return Column(lambda t: t.column(name), name)


def lit(value: Any) -> Column:
    scalar = pa.scalar(value, _literal_type(value))
    return Column(lambda t: scalar, str(value))


def _column(value: Any, literal: bool = False) -> Column:
    if isinstance(value, Column):
        return value
    return lit(value) if literal else col(value)


class _When:
    """`when(condition, value)`, chained with `.when(...)` and completed by `.otherwise(value)` into a
    Column, as the jobs use it (the first condition that holds picks the value)."""

    def __init__(self, condition: Column, value: Any, earlier: _When | None = None) -> None:
        self.condition = condition
        self.value = _column(value, literal=True)
        self.earlier = earlier

    def when(self, condition: Column, value: Any) -> _When:
        return _When(condition, value, self)

    def otherwise(self, value: Any) -> Column:
        result = _column(value, literal=True)
        branch: _When | None = self
        while branch is not None:  # from the last `when` back to the first: the first one wins
            result = _branch(branch.condition, branch.value, result)
            branch = branch.earlier
        return Column(result.evaluate, "when")


def _branch(condition: Column, chosen: Column, other: Column) -> Column:
    return Column(lambda t: _if_else(condition.evaluate(t), chosen.evaluate(t), other.evaluate(t)), "when")


def when(condition: Column, value: Any) -> _When:
    return _When(condition, value)


def _aggregate(function: str, column: Any, name: str, ordering: Column | None = None) -> Column:
    source = _column(column)
    return Column(lambda t: None, f"{name}({source.name})", (function, source, ordering))


def max_(column: Any) -> Column:
    return _aggregate("max", column, "max")


def min_(column: Any) -> Column:
    return _aggregate("min", column, "min")


def sum_(column: Any) -> Column:
    return _aggregate("sum", column, "sum")


def count(column: Any) -> Column:
    if column == "*":
        return Column(lambda t: None, "count(1)", ("count_all", None, None))
    return _aggregate("count", column, "count")


def count_distinct(column: Any) -> Column:
    return _aggregate("count_distinct", column, "count")


def max_by(column: Any, ordering: Any) -> Column:
    return _aggregate("last", column, "max_by", _column(ordering))


def size(column: Any) -> Column:
    source = _column(column)
    return Column(lambda t: pc.list_value_length(source.evaluate(t)), f"size({source.name})")


def xxhash64(column: Any) -> Column:
    """A 64-bit hash of each value, as a join key: not Spark's xxhash64 values but Python's own hash
    of the text (SipHash, 64 bits on 64-bit builds, salted per process), so equal values hash equal
    within the one process that builds and joins the keys of a local run, which is all a key needs.
    Text reaches Python through numpy (a sixth of `to_pylist`'s cost) and is hashed without a
    cryptographic digest: 0.1 s for 200,000 paths where blake2b over `to_pylist` took 0.6 s."""
    source = _column(column)

    def digest(values: pa.Array | pa.ChunkedArray) -> pa.Array:
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            texts = (
                values.to_numpy(zero_copy_only=False) if isinstance(values, pa.Array) else values.to_numpy()
            )
            return pa.array([None if v is None else hash(v) for v in texts], pa.int64())
        return pa.array([None if v is None else hash(str(v)) for v in values.to_pylist()], pa.int64())

    return Column(lambda t: digest(_as_array(source.evaluate(t), t)), f"xxhash64({source.name})")


def udf(function: Callable[[Any], Any], return_type: Any = "string") -> Callable[[Any], Column]:
    target = parse_type(return_type)

    def apply(column: Any) -> Column:
        source = _column(column)
        return Column(
            lambda t: pa.array([function(v) for v in _as_array(source.evaluate(t), t).to_pylist()], target),
            source.name,
        )

    return apply


# What `functions_for(local session)` hands the jobs in place of `pyspark.sql.functions`.
FUNCTIONS = SimpleNamespace(
    col=col,
    lit=lit,
    when=when,
    max=max_,
    min=min_,
    sum=sum_,
    count=count,
    countDistinct=count_distinct,
    count_distinct=count_distinct,
    xxhash64=xxhash64,
    max_by=max_by,
    size=size,
    udf=udf,
)


def _as_array(value: Any, table: pa.Table) -> pa.Array | pa.ChunkedArray:
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * table.num_rows, value.type)
    return value


# -- frames ------------------------------------------------------------------------------------------

_JOINS = {"left_anti": "left anti", "leftanti": "left anti", "left_semi": "left semi", "inner": "inner"}
_SQL_FILTER = re.compile(r"^\s*(\w+)\s*(=|==|!=|<>|<=|>=|<|>)\s*(-?\d+)\s*$")
_SQL_OPERATORS = {
    "=": "equal",
    "==": "equal",
    "!=": "not_equal",
    "<>": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


class LocalFrame:
    """One materialised pyarrow table with pyspark's DataFrame methods (see the module docstring)."""

    def __init__(self, table: pa.Table, session: LocalSession) -> None:
        session.check(table.num_rows)
        self.table = table
        self.session = session

    def _new(self, table: pa.Table) -> LocalFrame:
        return LocalFrame(table, self.session)

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def _evaluate(self, column: Column) -> pa.ChunkedArray | pa.Array:
        return _as_array(column.evaluate(self.table), self.table)

    def select(self, *columns: Any) -> LocalFrame:
        chosen = [
            _column(c)
            for c in (columns[0] if len(columns) == 1 and isinstance(columns[0], list) else columns)
        ]
        arrays = [self._evaluate(c) for c in chosen]
        return self._new(pa.table(arrays, names=[c.name for c in chosen]))

    def withColumn(self, name: str, column: Column) -> LocalFrame:  # noqa: N802 - pyspark's name
        array = self._evaluate(column)
        if name in self.table.column_names:
            return self._new(self.table.set_column(self.table.column_names.index(name), name, array))
        return self._new(self.table.append_column(name, array))

    def withColumnRenamed(self, old: str, new: str) -> LocalFrame:  # noqa: N802
        return self._new(self.table.rename_columns([new if n == old else n for n in self.table.column_names]))

    def drop(self, *names: str) -> LocalFrame:
        return self._new(self.table.drop_columns([n for n in names if n in self.table.column_names]))

    def filter(self, condition: Column | str) -> LocalFrame:
        if isinstance(condition, str):
            match = _SQL_FILTER.match(condition)
            if match is None:
                raise ValueError(f"local frame: unsupported filter expression {condition!r}")
            name, operator, value = match.groups()
            condition = col(name)._binary(int(value), _SQL_OPERATORS[operator])
        return self._new(self.table.filter(pc.fill_null(self._evaluate(condition), False)))

    where = filter

    def mapInArrow(  # noqa: N802 - pyspark's name
        self, function: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], schema: str
    ) -> LocalFrame:
        target = parse_schema(schema)
        outputs = []
        rows = 0
        for batch in function(iter(self.table.to_batches())):
            rows += batch.num_rows
            self.session.check(rows)  # abort while the output grows, not after it is all held
            outputs.append(pa.Table.from_batches([batch]).select(target.names).cast(target))
        return self._new(pa.concat_tables(outputs) if outputs else target.empty_table())

    def groupBy(self, *keys: str) -> LocalGroupedData:  # noqa: N802
        return LocalGroupedData(self, list(keys))

    def join(self, other: LocalFrame, on: str | list[str], how: str = "inner") -> LocalFrame:
        keys = [on] if isinstance(on, str) else list(on)
        if how not in _JOINS:
            raise ValueError(f"local frame: unsupported join {how!r}")
        if self.table.num_rows == 0:
            right = [] if _JOINS[how] != "inner" else [n for n in other.columns if n not in keys]
            schema = pa.schema(list(self.table.schema) + [other.table.schema.field(n) for n in right])
            return self._new(schema.empty_table())
        joined = self.table.join(other.table, keys, join_type=_JOINS[how], use_threads=False)
        return self._new(joined)

    def unionByName(self, other: LocalFrame) -> LocalFrame:  # noqa: N802
        right = other.table.select(self.columns)
        return self._new(pa.concat_tables([self.table, right], promote_options="permissive"))

    def distinct(self) -> LocalFrame:
        if self.table.num_rows == 0:
            return self
        return self._new(self.table.group_by(self.columns, use_threads=False).aggregate([]))

    def dropDuplicates(self, subset: Sequence[str] | None = None) -> LocalFrame:  # noqa: N802
        if subset is None or set(subset) == set(self.columns) or self.table.num_rows == 0:
            return self.distinct()
        numbered = self.table.append_column("__row", pa.array(range(self.table.num_rows), pa.int64()))
        first = numbered.group_by(list(subset), use_threads=False).aggregate([("__row", "min")])
        return self._new(self.table.take(first.column("__row_min")))

    def sortWithinPartitions(self, *keys: str) -> LocalFrame:  # noqa: N802
        return self._new(self.table.sort_by([(key, "ascending") for key in keys]))

    def limit(self, count: int) -> LocalFrame:
        return self._new(self.table.slice(0, count))

    def count(self) -> int:
        return self.table.num_rows

    def collect(self) -> list[LocalRow]:
        names = tuple(self.table.column_names)
        columns = [self.table.column(name).to_pylist() for name in names]
        return [LocalRow(names, values) for values in zip(*columns, strict=True)] if columns else []

    # Partitioning and caching mean nothing in one process: every frame is already materialised.
    def hint(self, *_args: Any) -> LocalFrame:
        return self  # a join strategy: one process has only one

    def repartition(self, *_args: Any) -> LocalFrame:
        return self

    def repartitionByRange(self, *_args: Any) -> LocalFrame:  # noqa: N802
        return self

    def coalesce(self, *_args: Any) -> LocalFrame:
        return self

    def localCheckpoint(self, eager: bool = True) -> LocalFrame:  # noqa: N802
        return self

    def persist(self, *_args: Any) -> LocalFrame:
        return self

    def cache(self) -> LocalFrame:
        return self

    def unpersist(self, *_args: Any) -> LocalFrame:
        return self


class LocalGroupedData:
    """`frame.groupBy(keys)`: `agg` with aggregate Columns or a {column: function} dict."""

    def __init__(self, frame: LocalFrame, keys: list[str]) -> None:
        self.frame = frame
        self.keys = keys

    def agg(self, *aggregates: Any) -> LocalFrame:
        if len(aggregates) == 1 and isinstance(aggregates[0], dict):
            aggregates = tuple(
                _aggregate(function, column, function) for column, function in aggregates[0].items()
            )
        table = self.frame.table
        inputs: dict[str, Any] = {key: table.column(key) for key in self.keys}
        specs: list[tuple[Any, str]] = []
        ordering = None
        for index, aggregate in enumerate(aggregates):
            function, source, order_by = aggregate.aggregate
            name = f"__a{index}"
            if function == "count_all":
                specs.append(([], "count_all"))
                continue
            inputs[name] = _as_array(source.evaluate(table), table)
            specs.append((name, function))
            if order_by is not None:
                if ordering is not None:
                    raise ValueError("local frame: one max_by ordering per aggregation")
                ordering = _as_array(order_by.evaluate(table), table)
        work = pa.table(inputs) if inputs else pa.table({"__n": pa.nulls(table.num_rows)})
        if ordering is not None:  # "last" over rows sorted by the ordering = Spark's max_by
            work = work.append_column("__order", ordering).sort_by([("__order", "ascending")])
        result = work.group_by(self.keys, use_threads=False).aggregate(specs)
        columns = {key: result.column(key) for key in self.keys}
        for aggregate, (name, function) in zip(aggregates, specs, strict=True):
            source = "count_all" if function == "count_all" else f"{name}_{function}"
            columns[aggregate.name] = result.column(source)
        return self.frame._new(pa.table(columns))


# -- the session ---------------------------------------------------------------------------------------


class LocalAccumulator:
    def __init__(self, value: int) -> None:
        self.value = value

    def add(self, amount: int) -> None:
        self.value += amount


class LocalContext:
    """The `spark.sparkContext` calls the jobs make: parallelism, parallelize, accumulators, labels."""

    defaultParallelism = 1  # noqa: N815 - pyspark's name

    def parallelize(self, items: Sequence[Any], _slices: int | None = None) -> list[Any]:
        return list(items)

    def accumulator(self, value: int) -> LocalAccumulator:
        return LocalAccumulator(value)

    def setJobGroup(self, *_args: Any) -> None:  # noqa: N802
        return None

    def setLocalProperty(self, *_args: Any) -> None:  # noqa: N802
        return None


class LocalSession:
    """Stands where a SparkSession would: `createDataFrame`, `range`, `sparkContext`."""

    def __init__(self, row_limit: int | None = None) -> None:
        self.row_limit = row_limit
        self.sparkContext = LocalContext()  # noqa: N815 - pyspark's name

    def check(self, rows: int) -> None:
        if self.row_limit is not None and rows > self.row_limit:
            raise LocalLimitExceeded(
                f"a frame of {rows:,} rows exceeds the local row limit of {self.row_limit:,}"
            )

    def createDataFrame(self, data: Any, schema: Any = None) -> LocalFrame:  # noqa: N802
        if isinstance(data, pa.Table):
            return LocalFrame(data, self)
        if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas (driver_list_frame on Spark 3.5)
            return LocalFrame(pa.Table.from_pandas(data, preserve_index=False), self)
        target = parse_schema(schema)
        rows = list(data)
        self.check(len(rows))
        columns = [pa.array([row[i] for row in rows], field.type) for i, field in enumerate(target)]
        return LocalFrame(pa.table(columns, schema=target), self)

    def range(self, start: int, end: int, step: int = 1, numPartitions: int | None = None) -> LocalFrame:  # noqa: N803
        return LocalFrame(pa.table({"id": pa.array(list(range(start, end, step)), pa.int64())}), self)


def functions_for(spark: SparkSession | LocalSession) -> Any:
    """`pyspark.sql.functions`, or its local stand-in when `spark` is a LocalSession."""
    if isinstance(spark, LocalSession):
        return FUNCTIONS
    from pyspark.sql import functions  # a Spark session is running: a local run never loads pyspark

    return functions
