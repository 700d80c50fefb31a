"""Running our jobs in-process on Java-written tables, and checking what Java reads afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from jobs.__main__ import main
from tests.java.oracle import JavaPaimon, Row
from tests.java.tables import JavaTable, read_ref, refs_of


def run_job(tmp_path: Path, operation: str, config: dict[str, Any], *extra: str) -> tuple[int, dict]:
    """Run one job in this process (the session's SparkSession); (exit code, run record)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config_path = tmp_path / f"{operation}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    record_path = tmp_path / f"{operation}.json"
    code = main([operation, "--config", str(config_path), "--output", str(record_path), *extra])
    return code, json.loads(record_path.read_text())


def java_reads(java: JavaPaimon, path: str) -> dict[tuple[str, str], list[Row]]:
    """Rows Java reads at every snapshot, tag and branch the table now has."""
    return {ref: read_ref(java, path, ref) for ref in refs_of(path)}


def assert_reads_kept(java: JavaPaimon, table: JavaTable, warehouse: str, changed: set | None = None) -> None:
    """Every snapshot, tag and branch still there reads as before (refs in `changed` are skipped: the
    caller checks those), and no tag or branch disappeared."""
    now = java_reads(java, table.path(warehouse))
    for ref, rows in now.items():
        if changed and ref in changed:
            continue
        if ref in table.reads:
            assert rows == table.reads[ref], f"{table.name} {ref}: Java reads other rows than before"
    lost = {ref for ref in table.reads if ref[0] != "snapshot"} - set(now)
    assert not lost, f"{table.name}: lost {lost}"


def files_under(root: str) -> set[str]:
    """Table-relative paths of every file under a table directory."""
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
    }
