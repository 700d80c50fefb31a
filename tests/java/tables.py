"""Java-written fixture tables: built once per session into a template warehouse, copied per test.

Fewer, richer tables (the time budget): each has several commits with known rows, and the rows Java
reads at every snapshot, tag and branch are recorded right after building (`JavaTable.reads`), so a
test can run a job on a copy and ask Java to read everything again.

- ``pk_changelog``: primary key, DATE + STRING partitions (values that need escaping), 2 buckets,
  parquet, ``changelog-producer: input``, updates and deletes, files at several levels (Paimon's
  own minor compactions while writing and a full compaction), manifests merged by Java's commit
  (``manifest.merge-min-count: 2``), a tag on snapshot 2, a branch from it with its own commits, then
  Java's snapshot and changelog expiry (``changelog.num-retained.max`` 5 above snapshots 2): long-lived
  changelogs, and a tag on an expired snapshot whose changelog list Java deleted (issue 16's bug).
- ``pk_lookup_dv``: ``changelog-producer: lookup`` with deletion vectors, ORC, INT partition.
- ``pk_first_row`` (avro), ``pk_partial_update``, ``pk_aggregation`` (sum / max / last value): the
  merge engines besides deduplicate.
- ``pk_dynamic``: dynamic bucket (``bucket: -1``), written through Paimon's hash bucket assigner.
- ``types_parquet`` / ``types_orc`` / ``types_avro``: append tables with every column type, then a
  schema evolution (column added, renamed, INT widened to BIGINT, FLOAT to DOUBLE) and a second commit.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from dataclasses import dataclass, field
from decimal import Decimal

from tests.java.oracle import JavaPaimon, Row

DATABASE = "db"


@dataclass
class JavaTable:
    """One fixture table: where it is (relative to a warehouse) and what Java read after building."""

    name: str
    partition_keys: list[str]
    primary_keys: list[str]
    # ("snapshot", "3") / ("tag", "t2") / ("branch", "b1") -> rows Java read there (sorted)
    reads: dict[tuple[str, str], list[Row]] = field(default_factory=dict)

    @property
    def identifier(self) -> str:
        return f"{DATABASE}.{self.name}"

    def path(self, warehouse: str) -> str:
        return os.path.join(warehouse, f"{DATABASE}.db", self.name)


def read_ref(java: JavaPaimon, path: str, ref: tuple[str, str]) -> list[Row]:
    kind, name = ref
    if kind == "snapshot":
        return java.read(path, snapshot_id=int(name))
    if kind == "tag":
        return java.read(path, tag=name)
    return java.read(path, branch=name)


def refs_of(path: str) -> list[tuple[str, str]]:
    """Every snapshot, tag and branch of a table directory, from its listing."""
    refs: list[tuple[str, str]] = []
    snapshot_dir = os.path.join(path, "snapshot")
    for name in sorted(os.listdir(snapshot_dir)):
        if name.startswith("snapshot-"):
            refs.append(("snapshot", name.removeprefix("snapshot-")))
    tag_dir = os.path.join(path, "tag")
    if os.path.isdir(tag_dir):
        refs += [("tag", n.removeprefix("tag-")) for n in sorted(os.listdir(tag_dir)) if n.startswith("tag-")]
    branch_dir = os.path.join(path, "branch")
    if os.path.isdir(branch_dir):
        refs += [("branch", n.removeprefix("branch-")) for n in sorted(os.listdir(branch_dir))]
    return refs


def record_reads(java: JavaPaimon, table: JavaTable, warehouse: str) -> None:
    path = table.path(warehouse)
    table.reads = {ref: read_ref(java, path, ref) for ref in refs_of(path)}


def copy_warehouse(template: str, target: str) -> str:
    shutil.copytree(template, target)
    return target


# -- the tables ------------------------------------------------------------------------------------

DAY1, DAY2 = dt.date(2024, 1, 2), dt.date(2024, 1, 3)
REGIONS = ("eu/west", "us east=1")  # '/' , ' ' and '=' are escaped in partition directory names


def _pk_rows(keys: range, version: int) -> list[Row]:
    return [
        {
            "id": k,
            "dt": DAY1 if k % 2 else DAY2,
            "region": REGIONS[k % 3 == 0],
            "v": f"v{version}-{k}",
            "n": k * version,
        }
        for k in keys
    ]


PK_FIELDS = [
    ("id", "BIGINT NOT NULL"),
    ("dt", "DATE NOT NULL"),
    ("region", "STRING NOT NULL"),
    ("v", "STRING"),
    ("n", "BIGINT"),
]


def build_pk_changelog(java: JavaPaimon, warehouse: str) -> JavaTable:
    table = JavaTable("pk_changelog", ["dt", "region"], ["id", "dt", "region"])
    path = table.path(warehouse)
    java.create_table(
        path,
        PK_FIELDS,
        table.partition_keys,
        table.primary_keys,
        {
            "bucket": "2",
            "file.format": "parquet",
            "changelog-producer": "input",
            "num-sorted-run.compaction-trigger": "2",
            "manifest.merge-min-count": "2",
            "snapshot.num-retained.min": "1",
            "changelog.num-retained.min": "1",
            "changelog.num-retained.max": "5",
        },
    )
    java.write(path, _pk_rows(range(0, 12), 1))  # 1
    java.write(path, _pk_rows(range(6, 18), 2))  # 2 (+ Paimon's own minor compactions)
    java.create_tag(path, "t2", 2)
    deletes = [{**row, "_kind": "-D"} for row in _pk_rows(range(0, 3), 1)]
    java.write(path, deletes + _pk_rows(range(15, 20), 3))
    java.compact(path, full=True)
    java.write(path, _pk_rows(range(18, 22), 4))
    java.create_branch(path, "b1", tag="t2")
    java.write(path, _pk_rows(range(100, 103), 9), branch="b1")
    java.write(path, _pk_rows(range(100, 101), 10), branch="b1")
    latest = java.write(path, _pk_rows(range(3, 5), 5))
    java.create_tag(path, "t_latest", latest)
    # Java's expiry: snapshots down to 2 (the tagged snapshot 2 expires), then the changelogs beyond 5:
    # tag t2's changelog list goes with changelog 2 (tags keep no changelog), later ones stay long-lived.
    expiry = {"retain_min": 1, "retain_max": 2, "changelog_retain_min": 1, "changelog_retain_max": 5}
    java.expire_snapshots(path, **expiry)
    java.expire_changelog(path, **expiry)
    return table


def build_pk_lookup_dv(java: JavaPaimon, warehouse: str) -> JavaTable:
    table = JavaTable("pk_lookup_dv", ["p"], ["k", "p"])
    path = table.path(warehouse)
    java.create_table(
        path,
        [("k", "INT NOT NULL"), ("p", "INT NOT NULL"), ("s", "STRING"), ("d", "DOUBLE")],
        table.partition_keys,
        table.primary_keys,
        {
            "bucket": "1",
            "file.format": "orc",
            "changelog-producer": "lookup",
            "deletion-vectors.enabled": "true",
        },
    )
    for version in range(1, 4):
        rows = [{"k": k, "p": k % 2, "s": f"s{version}-{k}", "d": k / version} for k in range(version, 8)]
        java.write(path, rows)
    java.write(path, [{"k": 4, "p": 0, "_kind": "-D"}])
    java.create_tag(path, "t2", 2)
    return table


def build_merge_engines(java: JavaPaimon, warehouse: str) -> list[JavaTable]:
    fields = [("k", "INT NOT NULL"), ("a", "BIGINT"), ("b", "STRING"), ("c", "INT")]
    engines = {
        "pk_first_row": {"merge-engine": "first-row", "file.format": "avro", "changelog-producer": "lookup"},
        "pk_partial_update": {"merge-engine": "partial-update"},
        "pk_aggregation": {
            "merge-engine": "aggregation",
            "fields.a.aggregate-function": "sum",
            "fields.b.aggregate-function": "last_non_null_value",
            "fields.c.aggregate-function": "max",
        },
    }
    tables = []
    for name, options in engines.items():
        table = JavaTable(name, [], ["k"])
        path = table.path(warehouse)
        java.create_table(path, fields, [], ["k"], {"bucket": "2", **options})
        java.write(path, [{"k": k, "a": k, "b": f"b{k}", "c": k} for k in range(5)])
        java.write(path, [{"k": k, "a": 10, "b": None, "c": 2} for k in range(2, 7)])
        java.create_tag(path, "t1", 1)
        java.write(path, [{"k": k, "a": 1, "c": 9} for k in range(4, 6)])
        tables.append(table)
    return tables


def build_pk_dynamic(java: JavaPaimon, warehouse: str) -> JavaTable:
    table = JavaTable("pk_dynamic", ["p"], ["k", "p"])
    path = table.path(warehouse)
    java.create_table(
        path,
        [("k", "BIGINT NOT NULL"), ("p", "STRING NOT NULL"), ("v", "STRING")],
        table.partition_keys,
        table.primary_keys,
        {"bucket": "-1", "dynamic-bucket.target-row-num": "4"},
    )
    for version in range(1, 4):
        java.write(path, [{"k": k, "p": "ab"[k % 2], "v": f"v{version}"} for k in range(version * 3, 12)])
    return table


TYPE_FIELDS = [
    ("id", "INT NOT NULL"),
    ("b", "BOOLEAN"),
    ("i8", "TINYINT"),
    ("i16", "SMALLINT"),
    ("i32", "INT"),
    ("i64", "BIGINT"),
    ("f32", "FLOAT"),
    ("f64", "DOUBLE"),
    ("dec", "DECIMAL(10, 2)"),
    ("dec_big", "DECIMAL(30, 5)"),
    ("s", "STRING"),
    ("c", "CHAR(3)"),
    ("vc", "VARCHAR(10)"),
    ("bin", "BYTES"),
    ("d", "DATE"),
    ("ts", "TIMESTAMP(6)"),
    ("ts3", "TIMESTAMP(3)"),
    ("ltz", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("arr", {"type": "ARRAY", "element": "INT"}),
    ("m", {"type": "MAP", "key": "STRING NOT NULL", "value": "BIGINT"}),
    (
        "r",
        {
            "type": "ROW",
            "fields": [{"id": 100, "name": "x", "type": "INT"}, {"id": 101, "name": "y", "type": "STRING"}],
        },
    ),
]


def type_row(i: int) -> Row:
    return {
        "id": i,
        "b": i % 2 == 0,
        "i8": i - 3,
        "i16": 300 * i,
        "i32": 70000 * i,
        "i64": 2**40 + i,
        "f32": 1.5 * i,
        "f64": 0.25 / (i + 1),
        "dec": Decimal(f"{i}.25"),
        "dec_big": Decimal(f"123456789012345678901234.{i:05d}"),
        "s": f"s-{i}-é",
        "c": f"c{i}"[:3].ljust(3),
        "vc": f"vc{i}",
        "bin": bytes([i, 0, 255]),
        "d": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456) + dt.timedelta(hours=i),
        "ts3": dt.datetime(2024, 1, 2, 3, 4, 5, 123000),
        "ltz": dt.datetime(2024, 6, 1, 12, 0, 0, 654321, tzinfo=dt.timezone.utc),
        "arr": [i, None, i + 1],
        "m": {"a": i, "b": None},
        "r": {"x": i, "y": f"y{i}"},
    }


def build_types(java: JavaPaimon, warehouse: str, file_format: str) -> JavaTable:
    table = JavaTable(f"types_{file_format}", [], [])
    path = table.path(warehouse)
    java.create_table(path, TYPE_FIELDS, [], [], {"file.format": file_format})
    java.write(path, [type_row(i) for i in range(3)] + [{"id": 99}])
    java.alter_table(
        path,
        [
            ("add_column", "added", "STRING"),
            ("rename_column", "s", "s_renamed"),
            ("update_column_type", "i32", "BIGINT"),
            ("update_column_type", "f32", "DOUBLE"),
        ],
    )
    second = []
    for i in range(3, 5):
        row = type_row(i)
        row["s_renamed"] = row.pop("s")
        row["added"] = f"new-{i}"
        row["i32"] = 2**35 + i
        second.append(row)
    java.write(path, second)
    return table


def build_all(java: JavaPaimon, warehouse: str) -> dict[str, JavaTable]:
    """Build every fixture table under `warehouse` and record what Java reads in each."""
    tables = [
        build_pk_changelog(java, warehouse),
        build_pk_lookup_dv(java, warehouse),
        *build_merge_engines(java, warehouse),
        build_pk_dynamic(java, warehouse),
        *(build_types(java, warehouse, fmt) for fmt in ("parquet", "orc", "avro")),
    ]
    for table in tables:
        record_reads(java, table, warehouse)
    return {table.name: table for table in tables}
