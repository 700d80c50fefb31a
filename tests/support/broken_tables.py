"""Ways to break the sample table (tests/support/table_states.py) in a warehouse copy: each breaker
changes a file of its latest snapshot (snapshot 4) and returns the text the job's error must name."""

from __future__ import annotations

import json
import os

from paimon_format.scan.snapshot_scan import data_manifests
from tests.support.table_states import open_table


def latest_snapshot_path(warehouse: str) -> str:
    return f"{warehouse}/db.db/t/snapshot/snapshot-4"


def a_manifest_of_the_latest_snapshot(warehouse: str) -> str:
    table = open_table(warehouse)
    name = data_manifests(table, table.snapshot_manager.latest())[-1].file_name
    return table.manifest_path(name)


def truncated_manifest(warehouse: str, config: dict) -> str:
    path = a_manifest_of_the_latest_snapshot(warehouse)
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2])
    return os.path.basename(path)


def unknown_schema_id(warehouse: str, config: dict) -> str:
    path = latest_snapshot_path(warehouse)
    with open(path) as handle:
        snapshot = json.load(handle)
    snapshot["schemaId"] = 7
    with open(path, "w") as handle:
        json.dump(snapshot, handle)
    return "schema-7"
