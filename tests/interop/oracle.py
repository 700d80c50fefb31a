"""pypaimon 2.1.0 as a test oracle: sample tables it writes, the files it plans, the rows it reads.

The product never imports pypaimon; only tests do, through these helpers.  Typical use::

    pypaimon = pytest.importorskip("pypaimon")
    from tests.interop import oracle

    @pytest.fixture(scope="session")
    def samples(tmp_path_factory):
        warehouse = str(tmp_path_factory.mktemp("pypaimon-wh"))
        return warehouse, oracle.create_sample_tables(warehouse)

    info = samples[1]["append_parted"]
    assert oracle.planned_files(info.path, snapshot_id=3) == ours(...)
    assert oracle.read_rows(info.path, tag="t3") == info.expected_rows(3)

Every function that takes a table accepts either ``(warehouse, "db.table")`` (through the
filesystem catalog) or just a table directory (``FileStoreTable.from_path``), so it works on
tables written by pypaimon and on tables written by ``paimon_format`` alike.

What pypaimon 2.1.0 offers (read from its sources, verified by ``test_oracle.py``)
---------------------------------------------------------------------------------
Versions: pypaimon 2.1.0 requires ``pyarrow>=16,<20,!=19.0.0``, ``polars>=1.32,<2``,
``pandas>=1.5,<3``, ``fsspec>=2023,<2026``, ``pyroaring>=1``, ``fastavro>=1.4,<2``; it imports and
works with pyarrow 19.0.1, numpy 2.4.6, pandas 2.3.3, polars 1.44.2 (Python 3.11).  Without the
optional ``pypaimon_rust`` the native planner/reader is off (``scan.native-plan.enabled`` and
``read.native.enabled`` default false), so planning is the pure-Python manifest scanner.

Catalog and tables
    ``pypaimon.CatalogFactory.create({"warehouse": "/local/dir"})`` -> ``FileSystemCatalog``;
    tables live at ``<warehouse>/<db>.db/<table>``.  ``catalog.create_database("db", True)``,
    ``catalog.create_table("db.t", pypaimon.Schema.from_pyarrow_schema(pa_schema,
    partition_keys=[...], primary_keys=[...], options={...}), False)``, ``catalog.get_table("db.t")``.
    ``pypaimon.table.file_store_table.FileStoreTable.from_path(path)`` opens a table directory
    without a catalog (placeholder identifier ``default.table``).
    Arrow -> Paimon types: int8/16/32/64 -> TINYINT/SMALLINT/INT/BIGINT, float32/64 -> FLOAT/DOUBLE,
    bool -> BOOLEAN, string -> STRING, binary -> BYTES, large_binary -> BLOB (not BYTES!),
    decimal128(p,s) -> DECIMAL(p, s), date32 -> DATE, timestamp(s/ms/us/ns) -> TIMESTAMP(0/3/6/9),
    timestamp with tz -> TIMESTAMP_LTZ(p), time -> TIME(0), list/map/struct -> ARRAY/MAP/ROW.
    A nullable=False arrow field becomes a NOT NULL column; declare primary-key columns so.
    Primary-key table with ``bucket`` unset (-1) is HASH_DYNAMIC if the primary key contains all
    partition keys (pypaimon writes ``index/index-*`` HASH files plus an ``indexManifest``);
    a primary key without the partition keys is CROSS_PARTITION, which pypaimon refuses to write.

Writing (one snapshot per commit; writers only produce level-0 files, never compact data, and
the commit never merges manifests: the new base manifest list is every manifest of the previous
snapshot, "Manifest compaction is handled by external maintenance")
    ``builder = table.new_batch_write_builder()``; ``write, commit = builder.new_write(),
    builder.new_commit()``; ``write.write_arrow(pa_table)`` (or ``write_pandas``);
    ``commit.commit(write.prepare_commit())``; ``write.close(); commit.close()``.  A batch commit
    can be used once.  Snapshots are commitKind APPEND, commitIdentifier ``Long.MAX_VALUE``.
Overwriting / dropping partitions (commitKind OVERWRITE)
    ``table.new_batch_write_builder().overwrite({"dt": "a"})`` replaces one partition
    (``overwrite()`` / ``overwrite({})`` replaces the whole table).
    ``catalog.drop_partitions("db.t", [{"dt": "b"}])`` (= ``builder.new_commit()
    .truncate_partitions([...])``) drops partitions; ``commit.truncate_table()`` empties the table.
Tags
    ``table.create_tag("t3", snapshot_id=3)`` (also ``catalog.create_tag``); it writes
    ``tag/tag-t3`` = the snapshot JSON verbatim; ``tagCreateTime``/``tagTimeRetained`` are added
    only with ``time_retained="1d"``.  ``table.list_tags()``, ``table.delete_tag(name)``.
Time travel
    ``table.copy({"scan.snapshot-id": "3"})`` or ``table.copy({"scan.tag-name": "t3"})`` (also
    ``scan.version``, ``scan.timestamp-millis``, ``scan.timestamp``, ``scan.watermark``; at most
    one).  ``copy`` swallows resolution errors; an unknown id/tag raises ``ValueError`` later, at
    ``plan()``.  The copy reads with the schema of the travelled-to snapshot.
Planning
    ``rb = table.new_read_builder(); splits = rb.new_scan().plan().splits()``; each ``DataSplit``
    has ``.partition`` (GenericRow, ``get_field(i)`` -> Python value), ``.bucket``, ``.files``
    (``DataFileMeta``: ``file_name``, ``file_path`` (absolute), ``level``, ``row_count`` ...).  With
    default options the files of all splits are exactly the live files of the snapshot, also for
    primary-key tables (level-0 files are skipped only with deletion vectors or first-row merge).
Reading
    ``rb.new_read().to_arrow(splits)`` -> ``pa.Table`` with only the user columns (primary-key
    tables come back merged, deduplicated by key); ``to_arrow([])`` is an empty table.
    ``.to_pylist()`` yields plain Python: int, float, str, bool, bytes, ``datetime.date``, naive
    ``datetime.datetime`` (TIMESTAMP), UTC-aware datetime (TIMESTAMP_LTZ), ``decimal.Decimal``.
Partition directories
    ``partition.legacy-name`` defaults true: a DATE partition value is written as days since
    epoch (``p=19724``), not ``2024-01-02``.  This module renders partition values the way the
    directory names do (pypaimon's own path factory), see `partition_text`.

Gaps: pypaimon 2.1.0 writes DELETE rows only via a ``rowkind.field`` column, so the sample
primary-key tables contain upserts only; it never compacts, so no sample has level > 0 files.
"""

from __future__ import annotations

import datetime as dt
import os
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa

DATABASE = "db"

Partition = tuple[tuple[str, str], ...]
"""A partition as sorted ``(key, value text)`` pairs; ``()`` for an unpartitioned table."""

PlannedFile = tuple[Partition, int, str]
"""``(partition, bucket, data file name)``."""

Row = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# Catalog / table access
# --------------------------------------------------------------------------------------------------


def catalog(warehouse: str) -> Any:
    """pypaimon's filesystem catalog over a local warehouse directory."""
    import pypaimon

    return pypaimon.CatalogFactory.create({"warehouse": str(warehouse)})


def load_table(location: str, identifier: str | None = None) -> Any:
    """A pypaimon ``FileStoreTable``: ``identifier`` (``"db.t"``) in warehouse ``location``, or the
    table directory ``location`` itself when ``identifier`` is None."""
    if identifier is not None:
        return catalog(location).get_table(identifier)
    from pypaimon.table.file_store_table import FileStoreTable

    return FileStoreTable.from_path(str(location))


def time_travel(table: Any, snapshot_id: int | None = None, tag: str | None = None) -> Any:
    """``table`` pinned to a snapshot id or a tag (unchanged when both are None)."""
    if snapshot_id is not None and tag is not None:
        raise ValueError("give a snapshot id or a tag, not both")
    if snapshot_id is not None:
        return table.copy({"scan.snapshot-id": str(snapshot_id)})
    if tag is not None:
        return table.copy({"scan.tag-name": tag})
    return table


def _splits(table: Any) -> list[Any]:
    return table.new_read_builder().new_scan().plan().splits()


def partition_text(table: Any, values: Sequence[Any]) -> tuple[str, ...]:
    """Partition values as pypaimon spells them in directory names (``partition.legacy-name``
    rules, null -> ``partition.default-name``), unescaped."""
    return tuple(table.path_factory()._canonical_partition(tuple(values)))


def _split_partition(table: Any, split: Any) -> Partition:
    keys = list(table.partition_keys)
    if not keys:
        return ()
    values = [split.partition.get_field(i) for i in range(len(keys))]
    return tuple(sorted(zip(keys, partition_text(table, values), strict=True)))


# --------------------------------------------------------------------------------------------------
# Oracle queries
# --------------------------------------------------------------------------------------------------


def planned_files(
    location: str,
    identifier: str | None = None,
    snapshot_id: int | None = None,
    tag: str | None = None,
) -> set[PlannedFile]:
    """The data files pypaimon plans to read at a snapshot / tag (default: latest).

    ``location`` is a warehouse (with ``identifier``) or a table directory.  Each file is
    ``(partition, bucket, file name)`` with the partition as sorted ``(key, value text)`` pairs.
    """
    table = time_travel(load_table(location, identifier), snapshot_id, tag)
    return {
        (_split_partition(table, split), split.bucket, meta.file_name)
        for split in _splits(table)
        for meta in split.files
    }


def planned_file_paths(
    location: str,
    identifier: str | None = None,
    snapshot_id: int | None = None,
    tag: str | None = None,
) -> set[str]:
    """Absolute paths of the data files pypaimon plans to read (as `planned_files`)."""
    table = time_travel(load_table(location, identifier), snapshot_id, tag)
    return {os.path.normpath(meta.file_path) for split in _splits(table) for meta in split.files}


def read_rows(
    location: str,
    identifier: str | None = None,
    snapshot_id: int | None = None,
    tag: str | None = None,
) -> list[Row]:
    """Every row pypaimon reads at a snapshot / tag (default: latest), as plain Python values,
    sorted with `sort_rows`."""
    table = time_travel(load_table(location, identifier), snapshot_id, tag)
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    result = builder.new_read().to_arrow(splits)
    return sort_rows(result.to_pylist() if result is not None else [])


def snapshot_ids(location: str, identifier: str | None = None) -> list[int]:
    """The snapshot ids present in the table's ``snapshot/`` directory, ascending."""
    table = load_table(location, identifier)
    snapshot_dir = os.path.join(str(table.table_path), "snapshot")
    if not os.path.isdir(snapshot_dir):
        return []
    return sorted(
        int(name[len("snapshot-") :]) for name in os.listdir(snapshot_dir) if name.startswith("snapshot-")
    )


def data_files_on_disk(table_path: str) -> set[PlannedFile]:
    """Every data file under the table's ``k=v/.../bucket-N`` directories, as `PlannedFile`s.

    Partition values are taken from the (unescaped) directory names, so they compare equal to
    `planned_files` for tables whose data sits in the table directory.
    """
    found: set[PlannedFile] = set()
    root = os.path.normpath(str(table_path))
    for directory, _dirs, files in os.walk(root):
        parts = os.path.relpath(directory, root).split(os.sep)
        if not parts or not parts[-1].startswith("bucket-"):
            continue
        bucket_name = parts[-1][len("bucket-") :]
        if not bucket_name.lstrip("-").isdigit() or not all("=" in part for part in parts[:-1]):
            continue  # not <k=v>/.../bucket-<n> (e.g. bucket-postpone, a path-directory prefix)
        partition = tuple(
            sorted(
                (urllib.parse.unquote(key), urllib.parse.unquote(value))
                for key, value in (part.split("=", 1) for part in parts[:-1])
            )
        )
        found.update((partition, int(bucket_name), name) for name in files if not name.startswith("."))
    return found


def sort_rows(rows: Iterable[Mapping[str, Any]]) -> list[Row]:
    """Rows as dicts in a deterministic order: by every column (by name) compared as text."""

    def key(row: Mapping[str, Any]) -> list[tuple[bool, str]]:
        return [(row[name] is None, str(row[name])) for name in sorted(row)]

    return sorted((dict(row) for row in rows), key=key)


# --------------------------------------------------------------------------------------------------
# Sample tables
# --------------------------------------------------------------------------------------------------


@dataclass
class TableInfo:
    """A sample table written by pypaimon, with what each snapshot should read."""

    name: str
    identifier: str
    path: str
    kind: str
    """``append``, ``pk_fixed`` (fixed-bucket primary key) or ``pk_dynamic`` (bucket -1, HASH index)."""
    schema: pa.Schema
    partition_keys: list[str]
    primary_keys: list[str]
    options: dict[str, str]
    snapshot_ids: list[int] = field(default_factory=list)
    commit_kinds: dict[int, str] = field(default_factory=dict)
    """Snapshot id -> ``APPEND`` / ``OVERWRITE``."""
    tags: dict[str, int] = field(default_factory=dict)
    """Tag name -> snapshot id."""
    expected: dict[int, list[Row]] = field(default_factory=dict)
    """Snapshot id -> the rows a reader must see there (sorted with `sort_rows`)."""

    @property
    def latest_snapshot_id(self) -> int:
        return self.snapshot_ids[-1]

    @property
    def tag_names(self) -> list[str]:
        return sorted(self.tags)

    @property
    def file_format(self) -> str:
        return self.options.get("file.format", "parquet")

    def expected_rows(self, snapshot_id: int | None = None, tag: str | None = None) -> list[Row]:
        """The rows written up to a snapshot / tag (default: latest)."""
        if tag is not None:
            snapshot_id = self.tags[tag]
        return self.expected[self.latest_snapshot_id if snapshot_id is None else snapshot_id]


class _SampleWriter:
    """Writes one pypaimon table commit by commit while modelling the rows each snapshot holds."""

    def __init__(self, cat: Any, name: str, kind: str, schema: pa.Schema, **kwargs: Any):
        import pypaimon

        partition_keys = list(kwargs.get("partition_keys", ()))
        primary_keys = list(kwargs.get("primary_keys", ()))
        options = {k: str(v) for k, v in kwargs.get("options", {}).items()}
        identifier = f"{DATABASE}.{name}"
        pypaimon_schema = pypaimon.Schema.from_pyarrow_schema(
            schema, partition_keys=partition_keys, primary_keys=primary_keys, options=options
        )
        cat.create_table(identifier, pypaimon_schema, False)
        self.table = cat.get_table(identifier)
        self.info = TableInfo(
            name=name,
            identifier=identifier,
            path=os.path.normpath(str(self.table.table_path)),
            kind=kind,
            schema=schema,
            partition_keys=partition_keys,
            primary_keys=primary_keys,
            options=options,
        )
        self._rows: dict[Any, Row] = {}  # model: key -> row (append tables key by sequence)
        self._sequence = 0

    # -- model --------------------------------------------------------------------------------------

    def _key(self, row: Row) -> Any:
        if self.info.primary_keys:
            return tuple(row[k] for k in self.info.primary_keys)
        self._sequence += 1
        return self._sequence

    def _in_partition(self, row: Row, spec: Mapping[str, str]) -> bool:
        return all(str(row[k]) == str(v) for k, v in spec.items())

    # -- commits ------------------------------------------------------------------------------------

    def _commit(self, rows: list[Row], overwrite: Mapping[str, str] | None) -> None:
        builder = self.table.new_batch_write_builder()
        if overwrite is not None:
            builder = builder.overwrite(dict(overwrite))
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(pa.Table.from_pylist(rows, schema=self.info.schema))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()

    def _record(self, expected_kind: str) -> None:
        snapshot = self.table.snapshot_manager().get_latest_snapshot()
        previous = self.info.snapshot_ids[-1] if self.info.snapshot_ids else 0
        if snapshot is None or snapshot.id != previous + 1:
            raise AssertionError(f"{self.info.name}: a commit must add exactly one snapshot")
        if snapshot.commit_kind != expected_kind:
            raise AssertionError(f"{self.info.name}: snapshot {snapshot.id} is {snapshot.commit_kind}")
        self.info.snapshot_ids.append(snapshot.id)
        self.info.commit_kinds[snapshot.id] = snapshot.commit_kind
        self.info.expected[snapshot.id] = sort_rows(self._rows.values())

    def append(self, rows: list[Row]) -> None:
        """One APPEND commit (upserts for primary-key tables)."""
        self._commit(rows, None)
        for row in rows:
            self._rows[self._key(row)] = dict(row)
        self._record("APPEND")

    def overwrite(self, rows: list[Row], partition: Mapping[str, str]) -> None:
        """One OVERWRITE commit replacing ``partition`` (``{}``: the whole table) by ``rows``."""
        if not all(self._in_partition(row, partition) for row in rows):
            raise ValueError("overwrite rows must lie in the overwritten partition")
        self._commit(rows, partition)
        self._rows = {k: r for k, r in self._rows.items() if not self._in_partition(r, partition)}
        for row in rows:
            self._rows[self._key(row)] = dict(row)
        self._record("OVERWRITE")

    def drop_partitions(self, cat: Any, partitions: list[dict[str, str]]) -> None:
        """One OVERWRITE commit dropping whole partitions (``catalog.drop_partitions``)."""
        cat.drop_partitions(self.info.identifier, partitions)
        self._rows = {
            k: r for k, r in self._rows.items() if not any(self._in_partition(r, p) for p in partitions)
        }
        self._record("OVERWRITE")

    def tag(self, name: str, snapshot_id: int) -> None:
        """Tag a snapshot through pypaimon (``tag/tag-<name>`` = the snapshot JSON)."""
        self.table.create_tag(name, snapshot_id=snapshot_id)
        self.info.tags[name] = snapshot_id


SIMPLE_SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
"""Append samples: ``id BIGINT, dt STRING, v STRING``."""

PK_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("v", pa.string())])
"""Primary-key samples: ``id BIGINT NOT NULL, dt STRING, v STRING``."""

ALL_TYPES_SCHEMA = pa.schema(
    [
        ("c_int", pa.int32()),
        ("c_bigint", pa.int64()),
        ("c_double", pa.float64()),
        ("c_string", pa.string()),
        ("c_boolean", pa.bool_()),
        ("c_date", pa.date32()),
        ("c_timestamp", pa.timestamp("us")),
        ("c_decimal", pa.decimal128(10, 2)),
        ("c_tinyint", pa.int8()),
        ("c_smallint", pa.int16()),
        ("c_float", pa.float32()),
        ("c_bytes", pa.binary()),
        ("c_decimal38", pa.decimal128(38, 18)),
        ("c_timestamp3", pa.timestamp("ms")),
        ("c_timestamp_ltz", pa.timestamp("us", tz="UTC")),
        ("p", pa.date32()),
    ]
)
"""``all_types``: INT, BIGINT, DOUBLE, STRING, BOOLEAN, DATE, TIMESTAMP(6), DECIMAL(10, 2), TINYINT,
SMALLINT, FLOAT, BYTES, DECIMAL(38, 18), TIMESTAMP(3), TIMESTAMP_LTZ(6); partitioned by ``p DATE``."""


def _simple(i: int, dt_value: str, tag: str = "v") -> Row:
    return {"id": i, "dt": dt_value, "v": f"{tag}{i}"}


def _all_types_row(i: int, partition: dt.date) -> Row:
    """A deterministic row; every 4th row has NULL in all non-partition columns."""
    if i % 4 == 3:
        return {name: None for name in ALL_TYPES_SCHEMA.names if name != "p"} | {"p": partition}
    sign = -1 if i % 2 else 1
    return {
        "c_int": sign * (i * 1000 + 7),
        "c_bigint": sign * (2**40 + i),
        "c_double": sign * (i + 0.125),
        "c_string": f"s{i}-é",
        "c_boolean": i % 2 == 0,
        "c_date": dt.date(2023, 12, 31) + dt.timedelta(days=i * 37),
        "c_timestamp": dt.datetime(2024, 2, 29, 23, 59, 58, 123456) + dt.timedelta(hours=i),
        "c_decimal": Decimal(sign * (12345 + i)) / 100,
        "c_tinyint": [-128, 127, 0, 1][i % 4],
        "c_smallint": sign * (300 + i),
        "c_float": sign * (i + 0.5),
        "c_bytes": bytes([i % 256, 0, 255]),
        "c_decimal38": sign * (Decimal("12345678901234567890.123456789012345678") + i),
        "c_timestamp3": dt.datetime(1999, 12, 31, 23, 59, 59, 999000) + dt.timedelta(days=i),
        "c_timestamp_ltz": dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc)
        + dt.timedelta(minutes=i),
        "p": partition,
    }


def create_sample_tables(warehouse: str) -> dict[str, TableInfo]:
    """Create database ``db`` in ``warehouse`` with pypaimon and write the sample tables.

    ========================  ==========================================================  =========
    table                     layout                                                      snapshots
    ========================  ==========================================================  =========
    ``append_plain``          append, unpartitioned, bucket -1                            3
    ``append_parted``         append by ``dt`` (3 partitions), tag ``t3`` at snapshot 3   5
    ``pk_fixed``              primary key ``id``, bucket 4, overlapping upserts           4
    ``pk_dynamic``            primary key ``(id, dt)`` by ``dt``, bucket -1 (HASH index)  3
    ``fmt_orc/avro/parquet``  append with ``file.format`` orc / avro / parquet            2 each
    ``dropped_part``          append by ``dt``; overwrite ``dt=a`` (3), drop ``dt=b`` (4) 4
    ``all_types``             15 column types (see `ALL_TYPES_SCHEMA`), by ``p DATE``     2
    ========================  ==========================================================  =========

    Takes about a second.  Returns table name -> `TableInfo`.
    """
    cat = catalog(warehouse)
    cat.create_database(DATABASE, True)
    tables: dict[str, TableInfo] = {}

    def new(name: str, kind: str, schema: pa.Schema, **kwargs: Any) -> _SampleWriter:
        writer = _SampleWriter(cat, name, kind, schema, **kwargs)
        tables[name] = writer.info
        return writer

    plain = new("append_plain", "append", SIMPLE_SCHEMA)
    for commit in range(3):
        plain.append([_simple(commit * 10 + j, "x") for j in range(commit + 1)])

    parted = new("append_parted", "append", SIMPLE_SCHEMA, partition_keys=["dt"])
    days = ["2024-01-01", "2024-01-02", "2024-01-03"]
    for commit in range(5):
        parted.append([_simple(commit * 10 + j, days[(commit + j) % 3]) for j in range(2)])
    parted.tag("t3", 3)

    pk_fixed = new("pk_fixed", "pk_fixed", PK_SCHEMA, primary_keys=["id"], options={"bucket": 4})
    for commit in range(4):
        pk_fixed.append(
            [{"id": k, "dt": "d", "v": f"r{commit}-{k}"} for k in range(commit * 2, commit * 2 + 8)]
        )

    pk_dynamic = new("pk_dynamic", "pk_dynamic", PK_SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"])
    for commit in range(3):
        # Each commit updates keys of the previous one and adds new keys (new HASH index entries).
        pk_dynamic.append(
            [{"id": k, "dt": f"p{k % 2}", "v": f"r{commit}"} for k in range(commit * 3, commit * 3 + 6)]
        )

    for file_format in ("orc", "avro", "parquet"):
        fmt = new(f"fmt_{file_format}", "append", SIMPLE_SCHEMA, options={"file.format": file_format})
        fmt.append([_simple(1, "a"), _simple(2, "b")])
        fmt.append([_simple(3, "a", "w")])

    dropped = new("dropped_part", "append", SIMPLE_SCHEMA, partition_keys=["dt"])
    dropped.append([_simple(1, "a"), _simple(2, "b"), _simple(3, "c")])
    dropped.append([_simple(4, "a"), _simple(5, "b")])
    dropped.overwrite([_simple(6, "a", "new")], {"dt": "a"})
    dropped.drop_partitions(cat, [{"dt": "b"}])

    all_types = new("all_types", "append", ALL_TYPES_SCHEMA, partition_keys=["p"])
    for commit in range(2):
        all_types.append([_all_types_row(commit * 4 + j, dt.date(2024, 1, 1 + j % 2)) for j in range(4)])

    return tables
