"""`df.write.format("paimon")` onto tables Paimon's Java wrote: a dynamic-bucket table (Java's HASH
index, then Java's assigner again on top of ours) and a fixed-bucket table with an input changelog
and DATE partitions. Java reads every key once, with our rows winning."""

from __future__ import annotations

import datetime as dt
import shutil
from typing import Any

import pytest

from jobs.source import register
from tests.java.oracle import Row, sort_key

pytestmark = pytest.mark.java


def _table_copy(java_templates: tuple[str, dict], name: str, tmp_path: Any) -> str:
    warehouse, tables = java_templates
    target = str(tmp_path / f"{name}")
    shutil.copytree(tables[name].path(warehouse), target)
    return target


def _merged(before: list[Row], ours: list[Row], key: tuple[str, ...]) -> list[Row]:
    rows = {tuple(row[k] for k in key): row for row in before}
    rows.update({tuple(row[k] for k in key): row for row in ours})
    return sorted(rows.values(), key=sort_key)


def test_on_javas_dynamic_bucket_table(spark_session, java_paimon, java_templates, tmp_path):
    register(spark_session)
    path = _table_copy(java_templates, "pk_dynamic", tmp_path)
    before = java_paimon.read(path)
    ours = [{"k": k, "p": "ab"[k % 2], "v": "ours"} for k in range(8, 16)]
    frame = spark_session.createDataFrame([tuple(r.values()) for r in ours], "k long, p string, v string")
    frame.repartition(2).write.format("paimon").mode("append").save(path)
    expected = _merged(before, ours, ("k", "p"))
    assert java_paimon.read(path) == expected
    theirs = [{"k": k, "p": "ab"[k % 2], "v": "java"} for k in range(14, 18)]
    java_paimon.write(path, theirs)  # Java's assigner on top of our HASH index: still one bucket per key
    assert java_paimon.read(path) == _merged(expected, theirs, ("k", "p"))


def test_on_javas_fixed_bucket_changelog_table(spark_session, java_paimon, java_templates, tmp_path):
    register(spark_session)
    path = _table_copy(java_templates, "pk_changelog", tmp_path)
    before = java_paimon.read(path)
    day = before[0]["dt"]
    ours = [{"id": i, "dt": day, "region": before[0]["region"], "v": "ours", "n": i} for i in range(3)]
    rows = [(r["id"], dt.date.fromisoformat(str(r["dt"])), r["region"], r["v"], r["n"]) for r in ours]
    frame = spark_session.createDataFrame(rows, "id long, dt date, region string, v string, n long")
    frame.repartition(2).write.format("paimon").mode("append").save(path)
    assert java_paimon.read(path) == _merged(before, ours, ("id", "dt", "region"))
