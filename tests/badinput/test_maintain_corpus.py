"""The bad-input corpus for `maintain`, whose config names many tables and per-operation blocks.

A broken block anywhere in the file must stop the whole run before any table is touched (exit 2,
one line naming the key path and the file). A broken or missing table among good ones must fail
alone: exit 2 for the run, a cause naming the table (and, in its own section of the record, the
file), not one byte of the broken table changed, and the good table maintained as usual.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable

import pytest
import yaml

from jobs.__main__ import main
from paimon_format.table import Table
from tests.support.broken_tables import truncated_manifest, unknown_schema_id
from tests.support.pypaimon_reads import pypaimon_rows
from tests.support.table_states import DATABASE, build_sample_table, fingerprint, row_ids

GOOD = f"{DATABASE}.good"  # a copy of the sample table that every case leaves intact
BROKEN = f"{DATABASE}.t"  # the sample table, which the table-state cases break
BLOCKS = {"expire_snapshots": {"retain_min": 1, "retain_max": 1}}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("badinput-maintain") / "wh")
    build_sample_table(warehouse)
    shutil.copytree(table_dir(warehouse, BROKEN), table_dir(warehouse, GOOD))
    return warehouse


@pytest.fixture
def warehouse(template: str, tmp_path) -> str:
    return shutil.copytree(template, str(tmp_path / "wh"))


def table_dir(warehouse: str, identifier: str) -> str:
    database, name = identifier.split(".")
    return os.path.join(warehouse, f"{database}.db", name)


def maintain_config(warehouse: str, **changes) -> dict:
    return {"warehouse": warehouse, "tables": [GOOD, BROKEN], "defaults": dict(BLOCKS), **changes}


def run_maintain(config: dict, tmp_path, capsys, *extra: str) -> tuple[int, dict, str, str]:
    path = tmp_path / "maintain.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["maintain", "--config", str(path), *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err, str(path)


def a_bad_block_in_an_override(config: dict) -> str:
    config["overrides"] = [{"match": BROKEN, "expire_snapshots": {"retain_mni": 3}}]
    return "retain_mni: unknown key"


def a_wrong_type_in_the_defaults(config: dict) -> str:
    config["defaults"] = {**BLOCKS, "compact_manifests": {"mode": "sometimes"}}
    return "compact_manifests.mode"


def a_table_key_inside_a_block(config: dict) -> str:
    config["defaults"] = {"expire_snapshots": {**BLOCKS["expire_snapshots"], "warehouse": "/elsewhere"}}
    return "warehouse: set at the top level of the maintain config"


def a_glob_matching_nothing_when_strict(config: dict) -> str:
    config["tables"] = [GOOD, "nodb.*"]
    config["strict"] = True
    return "no table matches nodb.*"


CONFIG_CASES: dict[str, Callable[[dict], str]] = {
    "bad-block-in-an-override": a_bad_block_in_an_override,
    "wrong-type-in-the-defaults": a_wrong_type_in_the_defaults,
    "table-key-inside-a-block": a_table_key_inside_a_block,
    "glob-matching-nothing-when-strict": a_glob_matching_nothing_when_strict,
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_a_bad_config_block_stops_the_run_before_any_table(spark_session, warehouse, tmp_path, capsys, case):
    config = maintain_config(warehouse)
    expected = CONFIG_CASES[case](config)
    before = fingerprint(warehouse)
    for dry_run in (["--dry-run"], []):
        code, record, err, path = run_maintain(config, tmp_path, capsys, *dry_run)
        cause = record["error"]
        assert code == 2, (cause, err[-2000:])
        assert "\n" not in cause and expected in cause, cause
        assert "Traceback" not in err and cause in err
        assert "tables" not in record["details"], "no table may be maintained"
        if case != "glob-matching-nothing-when-strict":
            assert path in cause  # a config problem names the file
        assert fingerprint(warehouse) == before, "a refused run changed the warehouse"


def no_such_table(warehouse: str, config: dict) -> str:
    config["tables"] = [GOOD, f"{DATABASE}.nope"]
    return f"{DATABASE}.db/nope: not a Paimon table"


# One of each way a table fails: not there, refused when opened, failing in a Spark task (the other
# table states fail the same way per table; tests/badinput/test_corpus.py covers each of them per job).
TABLE_CASES = {
    "missing-table": no_such_table,
    "unknown-schema-id": unknown_schema_id,
    "truncated-manifest": truncated_manifest,
}


@pytest.mark.parametrize("case", sorted(TABLE_CASES))
def test_a_broken_or_missing_table_fails_alone(spark_session, warehouse, tmp_path, capsys, case):
    config = maintain_config(warehouse)
    expected = TABLE_CASES[case](warehouse, config)  # breaks db.t, or names a missing table
    failing = config["tables"][1]
    failing_dir = table_dir(warehouse, failing)
    before = fingerprint(failing_dir) if os.path.isdir(failing_dir) else None
    good_before = snapshot_rows(warehouse, GOOD)

    code, record, err, _ = run_maintain(config, tmp_path, capsys)
    cause = record["error"]
    assert code == 2, (cause, err[-2000:])
    assert "\n" not in cause and f"{failing} (exit 2)" in cause, cause
    assert "Traceback" not in err and cause in err
    tables = record["details"]["tables"]
    assert tables[failing]["status"] == "failed" and expected in tables[failing]["reason"]
    if before is None:
        assert not os.path.exists(table_dir(warehouse, failing)), "a missing table was created"
    else:
        assert fingerprint(table_dir(warehouse, failing)) == before, "the broken table was changed"

    assert tables[GOOD]["status"] == "done" and tables[GOOD]["snapshots_expired"] == 3
    good_after = snapshot_rows(warehouse, GOOD)
    latest = max(good_before)
    assert sorted(good_after) == [latest] and good_after[latest] == good_before[latest]
    tag = Table.open(warehouse, GOOD).tag_manager.tags()["t2"]
    assert row_ids(rows_at_tag(warehouse, GOOD, "t2")) == good_before[tag.id]  # its snapshot expired


def rows_at_tag(warehouse: str, identifier: str, tag: str) -> list[dict]:
    import pypaimon

    table = pypaimon.CatalogFactory.create({"warehouse": warehouse}).get_table(identifier)
    builder = table.copy({"scan.tag-name": tag}).new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()


def snapshot_rows(warehouse: str, identifier: str) -> dict[int, list[int]]:
    """Row ids pypaimon reads at every snapshot of the table (the oracle)."""
    ids = Table.open(warehouse, identifier).snapshot_manager.snapshot_ids()
    return {i: row_ids(pypaimon_rows(warehouse, identifier, i)) for i in ids}
