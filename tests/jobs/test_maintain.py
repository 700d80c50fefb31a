"""maintain: many tables in one run, per-table failures, locks, globs, config blocks, dry run.

Tables are written by pypaimon (tests/interop/oracle.py), which also reads them before and after
as the oracle. The operations a run enables are those whose modules exist in this checkout, so the
tests grow with the operations as they land (expire-snapshots, expire-partitions).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from jobs.__main__ import main
from jobs.maintain import MaintenanceBadInput, MaintenanceFailed, TableOutcome, _report
from jobs.runtime.config import ConfigError, validate
from jobs.runtime.errors import BadInputError
from jobs.runtime.maintain_config import MaintainConfig, plan_tables
from jobs.runtime.report import RunRecord
from jobs.runtime.table_globs import resolve_tables
from jobs.runtime.table_lock import TableLock, default_lock_dir, lock_path
from paimon_format.snapshot import SnapshotManager
from paimon_format.storage import crash_points
from paimon_format.storage.fileio import FileIO
from tests.support.factories import make_table

pytest.importorskip("pypaimon")
from tests.interop import oracle  # noqa: E402 - needs pypaimon

HAS_EXPIRE_SNAPSHOTS = importlib.util.find_spec("jobs.expire_snapshots") is not None
HAS_EXPIRE_PARTITIONS = importlib.util.find_spec("jobs.expire_partitions") is not None
MAINTAINED = ["db.append_plain", "db.append_parted", "db.pk_fixed", "db.pk_dynamic"]
BROKEN = "db.fmt_orc"
OLD = time.time() - 3 * 24 * 3600


@pytest.fixture(scope="module")
def sample_warehouse(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("maintain-template") / "wh")
    oracle.create_sample_tables(warehouse)
    return warehouse


@pytest.fixture
def warehouse(sample_warehouse: str, tmp_path: Path) -> str:
    target = str(tmp_path / "wh")
    shutil.copytree(sample_warehouse, target)
    return target


def table_dir(warehouse: str, table: str) -> str:
    database, name = table.split(".")
    return os.path.join(warehouse, f"{database}.db", name)


def write_config(tmp_path: Path, text: str, name: str = "maintain.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def run_maintain(config: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["maintain", "--config", config, *extra])
    return code, json.loads(capsys.readouterr().out)


def fingerprint(root: str) -> dict[str, bytes]:
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                files[os.path.relpath(path, root)] = handle.read()
    return files


def reads(warehouse: str, table: str) -> dict[str, list]:
    """What pypaimon reads at every snapshot present and at every tag."""
    path = table_dir(warehouse, table)
    result: dict[str, list] = {
        f"snapshot {i}": oracle.read_rows(path, snapshot_id=i) for i in oracle.snapshot_ids(path)
    }
    tag_dir = os.path.join(path, "tag")
    for name in sorted(os.listdir(tag_dir)) if os.path.isdir(tag_dir) else []:
        tag = name[len("tag-") :]
        result[f"tag {tag}"] = oracle.read_rows(path, tag=tag)
    return result


def plant_orphan(warehouse: str, table: str, bucket_dir: str) -> str:
    """An old data file no snapshot references, named as Paimon names data files."""
    directory = os.path.join(table_dir(warehouse, table), bucket_dir)
    path = os.path.join(directory, "data-0b2e6b4c-1d7f-4c53-9a0e-5a1f1c0d9e11-0.parquet")
    with open(path, "wb") as handle:
        handle.write(b"orphan" * 10)
    os.utime(path, (OLD, OLD))
    return path


def break_table(warehouse: str, table: str) -> None:
    """Garble the base manifest list of the latest snapshot: reading the table now fails."""
    root = table_dir(warehouse, table)
    latest = SnapshotManager(FileIO.for_path(root), root).latest()
    with open(os.path.join(root, "manifest", latest.base_manifest_list), "wb") as handle:
        handle.write(b"not avro at all")


def operations_yaml(orphans_in: str = "db.append_*") -> str:
    """Every operation this checkout has; orphan removal (the slowest) only for `orphans_in`."""
    blocks = ["  compact_manifests: {mode: full}"]
    if HAS_EXPIRE_SNAPSHOTS:
        blocks.insert(0, "  expire_snapshots: {retain_min: 2, retain_max: 2, older_than: 1 ms}")
    overrides = f"  - match: '{orphans_in}'\n    remove_orphan_files: {{older_than: 2h}}\n"
    if HAS_EXPIRE_PARTITIONS:  # the oldest of append_parted's dt partitions (all are years old)
        overrides += (
            "  - match: db.append_parted\n    expire_partitions: {expiration_time: 1d, max_expires: 1}\n"
        )
    return "defaults:\n" + "\n".join(blocks) + "\noverrides:\n" + overrides


# -- the acceptance test ------------------------------------------------------------------


def test_five_tables_one_broken_four_maintained_broken_reported(spark_session, warehouse, tmp_path, capsys):
    orphans = [
        plant_orphan(warehouse, "db.append_plain", "bucket-0"),
        plant_orphan(warehouse, "db.append_parted", "dt=2024-01-02/bucket-0"),
    ]
    break_table(warehouse, BROKEN)
    before = {table: reads(warehouse, table) for table in MAINTAINED}
    broken_before = fingerprint(table_dir(warehouse, BROKEN))
    config = write_config(
        tmp_path,
        f"warehouse: {warehouse}\n"
        'tables: ["db.append_*", "db.pk_*", db.fmt_orc]\n'
        "parallelism: 2\n" + operations_yaml(),
    )

    code, record = run_maintain(config, capsys=capsys)

    assert code == 2, "a table failed on bad input (its corrupt manifest list)"
    tables = record["details"]["tables"]
    assert sorted(tables) == sorted([*MAINTAINED, BROKEN])
    broken = tables[BROKEN]
    assert broken["status"] == "failed" and broken["exit_code"] == 2
    assert broken["operations"][-1]["status"] == "failed"
    assert "manifest" in broken["reason"] and "not_run" in broken
    assert fingerprint(table_dir(warehouse, BROKEN)) == broken_before, "nothing changed in the broken table"
    for table in MAINTAINED:
        section = tables[table]
        assert section["status"] == "done", section
        assert [op["operation"] for op in section["operations"]] == record["details"]["plan"][table]
        assert all(op["status"] == "done" for op in section["operations"])
        after = reads(warehouse, table)
        retained = [key for key in after if key in before[table]]
        assert retained, f"{table} keeps some of its snapshots"
        for key in retained:
            assert after[key] == before[table][key], f"{table} {key} reads differently after maintenance"
        latest_before = max(
            (k for k in before[table] if k.startswith("snapshot")), key=lambda k: int(k.split()[1])
        )
        expected_latest = before[table][latest_before]
        if HAS_EXPIRE_PARTITIONS and table == "db.append_parted":
            expected_latest = [row for row in expected_latest if row["dt"] != "2024-01-01"]
            assert len(expected_latest) < len(before[table][latest_before])
        assert oracle.read_rows(table_dir(warehouse, table)) == expected_latest
        compact = next(op for op in section["operations"] if op["operation"] == "compact-manifests")
        assert compact["counts"]["manifests_after"] <= compact["counts"]["manifests_before"]
    if HAS_EXPIRE_PARTITIONS:
        assert record["details"]["plan"]["db.append_parted"][0] == "expire-partitions"
        assert tables["db.append_parted"]["partitions_expired"] == 1 == record["counts"]["partitions_expired"]
    if HAS_EXPIRE_SNAPSHOTS:
        assert record["counts"]["snapshots_expired"] > 0
        assert oracle.snapshot_ids(table_dir(warehouse, "db.append_parted"))[0] > 1
    assert "remove-orphan-files" not in record["details"]["plan"]["db.pk_fixed"], "overrides apply by match"
    assert not any(os.path.exists(path) for path in orphans), "planted orphans are removed"
    assert record["counts"]["files_removed"] >= len(orphans)
    assert record["counts"]["tables_done"] == 4 and record["counts"]["tables_failed"] == 1
    assert any(line.startswith(f"{BROKEN}: failed") for line in record["details"]["summary"])
    assert record["details"]["summary"][-1].startswith("5 tables: 4 done, 1 failed")
    assert not os.listdir(default_lock_dir(warehouse)), "every lock is released"


def test_a_second_run_while_the_first_holds_a_lock_skips_that_table(
    spark_session, warehouse, tmp_path, capsys, monkeypatch
):
    first = write_config(
        tmp_path,
        f"warehouse: {warehouse}\ntables: [db.append_plain]\n"
        "defaults:\n  compact_manifests: {mode: full}\n",
        "first.yaml",
    )
    second = write_config(
        tmp_path,
        f"warehouse: {warehouse}\ntables: [db.append_plain, db.pk_fixed]\n"
        "defaults:\n  compact_manifests: {mode: full}\n",
        "second.yaml",
    )
    inner: dict = {}

    def start_second_run(step: str) -> None:
        # Reached by the first run once it holds db.append_plain's lock (and again by the second run).
        if inner:
            return
        inner["started"] = True
        inner["code"] = main(["maintain", "--config", second, "--output", str(tmp_path / "second.json")])

    monkeypatch.setenv(crash_points.CRASH_ENV, "maintain:locked")
    previous = crash_points.set_crash_handler(start_second_run)
    try:
        code, record = run_maintain(first, capsys=capsys)
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()

    assert code == 0 and record["details"]["tables"]["db.append_plain"]["status"] == "done"
    assert inner["code"] == 0, "a skipped table does not fail the run"
    second_record = json.loads((tmp_path / "second.json").read_text())
    skipped = second_record["details"]["tables"]["db.append_plain"]
    assert skipped["status"] == "skipped" and skipped["reason"].startswith("locked by ")
    assert skipped["operations"] == []
    assert second_record["details"]["tables"]["db.pk_fixed"]["status"] == "done"
    assert second_record["counts"]["tables_skipped"] == 1
    assert not os.listdir(default_lock_dir(warehouse))


def test_dry_run_plans_every_table_and_changes_nothing(spark_session, warehouse, tmp_path, capsys):
    orphan = plant_orphan(warehouse, "db.append_plain", "bucket-0")
    before = fingerprint(warehouse)
    config = write_config(
        tmp_path, f"warehouse: {warehouse}\ntables: ['db.append_pl*']\n" + operations_yaml("db.append_plain")
    )

    code, record = run_maintain(config, "--dry-run", capsys=capsys)

    assert code == 0 and record["dry_run"]
    assert fingerprint(warehouse) == before and os.path.exists(orphan)
    assert not os.path.exists(default_lock_dir(warehouse)), "a dry run takes no lock"
    section = record["details"]["tables"]["db.append_plain"]
    assert all(op["dry_run"] for op in section["operations"])
    orphans = next(op for op in section["operations"] if op["operation"] == "remove-orphan-files")
    assert orphans["counts"]["orphan_files"] == 1
    assert sorted(record["details"]["tables"]) == ["db.append_plain"]
    assert record["details"]["summary"][-1].startswith("dry run, would be done: 1 tables: 1 done")


def test_dry_run_reports_a_locked_table_as_skipped(spark_session, warehouse, tmp_path, capsys):
    directory = default_lock_dir(warehouse)
    holder = TableLock(
        FileIO.for_path(directory), lock_path(directory, "db.pk_fixed"), 60_000, "nightly@host"
    )
    assert holder.acquire().held
    config = write_config(
        tmp_path, f"warehouse: {warehouse}\ntables: [db.pk_fixed]\ndefaults:\n  compact_manifests: {{}}\n"
    )
    code, record = run_maintain(config, "--dry-run", capsys=capsys)
    assert code == 0
    assert record["details"]["tables"]["db.pk_fixed"]["reason"].startswith("locked by nightly@host until ")
    assert holder.release()


# -- configuration: checked before Spark starts ---------------------------------------------------


def test_the_example_config_loads_and_plans():
    from jobs.runtime.config import load_config

    config = load_config(Path(__file__).parents[2] / "conf" / "maintain.yaml", [], MaintainConfig)
    plans = {plan.table: plan for plan in plan_tables(config, ["db.events_eu", "db.audit_log"])}
    assert "remove-orphan-files" not in [step.operation for step in plans["db.audit_log"].steps]
    assert plans["db.events_eu"].steps[-1].operation == "remove-orphan-files"


def test_a_typo_in_an_operation_block_fails_at_load_time_with_its_key_path(tmp_path, capsys):
    config = write_config(
        tmp_path,
        f"warehouse: {tmp_path}\ntables: ['db.*']\n"
        "defaults:\n  compact_manifests: {mdoe: full}\n"
        "overrides:\n  - match: db.events_*\n    remove_orphan_files: {max_orphan_ratio: lots}\n",
    )
    code, record = run_maintain(config, capsys=capsys)
    assert code == 2
    assert f"{config}: defaults.compact_manifests.mdoe: unknown key" in record["error"]
    assert f"{config}: overrides[0].remove_orphan_files.max_orphan_ratio:" in record["error"]


def test_top_level_keys_inside_a_block_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"defaults\.compact_manifests: .*table: set at the top level"):
        validate(
            {"warehouse": "/w", "tables": ["db.*"], "defaults": {"compact_manifests": {"table": "db.x"}}},
            MaintainConfig,
            "f.yaml",
        )


def test_overrides_merge_key_by_key_in_file_order():
    config = validate(
        {
            "warehouse": "/w",
            "tables": ["db.*"],
            "defaults": {"compact_manifests": {"mode": "full", "merge_min_count": 5}},
            "overrides": [
                {"match": "db.events_*", "compact_manifests": {"mode": "auto"}, "remove_orphan_files": {}},
                {"match": "db.events_eu", "compact_manifests": {"merge_min_count": 7}},
                {"match": "db.quiet", "compact_manifests": {"enabled": False}},
            ],
        },
        MaintainConfig,
        "f.yaml",
    )
    plans = {
        plan.table: plan for plan in plan_tables(config, ["db.events_eu", "db.events_us", "db.quiet", "db.x"])
    }
    eu = plans["db.events_eu"].steps
    assert [step.operation for step in eu] == ["compact-manifests", "remove-orphan-files"]
    assert (eu[0].config.mode, eu[0].config.merge_min_count) == ("auto", 7)
    assert eu[0].sources == ("defaults", "overrides[0]", "overrides[1]")
    assert eu[0].config.table == "db.events_eu" and eu[0].config.warehouse == "/w"
    us = plans["db.events_us"].steps[0].config
    assert (us.mode, us.merge_min_count) == ("auto", 5)
    assert plans["db.quiet"].steps == ()
    assert [step.operation for step in plans["db.x"].steps] == ["compact-manifests"]


def test_a_required_key_may_come_from_any_block_but_a_table_without_it_is_a_config_error(
    fake_operation, monkeypatch
):
    from pydantic import Field

    from jobs.runtime import maintain_config
    from jobs.runtime.config import TableJobConfig

    class NeedsCutoff(TableJobConfig):
        cutoff: str = Field(description="required, like expire-partitions' expiration_time")

    fake_operation("fake-expire", lambda context, config: None, NeedsCutoff)
    block = maintain_config._partial_block_model("fake_expire", "fake-expire")
    assert block.model_validate({}).cutoff is None, "a partial block may leave a required key out"
    with pytest.raises(Exception, match="cutof"):
        block.model_validate({"cutof": "1d"})
    # Route the defaults' compact_manifests slot to the fake operation to plan with its model.
    monkeypatch.setattr(maintain_config, "OPERATIONS", (("compact_manifests", "fake-expire"),))
    config = validate(
        {
            "warehouse": "/w",
            "tables": ["db.*"],
            "defaults": {"compact_manifests": {}},
            "overrides": [{"match": "db.a", "compact_manifests": {}}],
        },
        MaintainConfig,
        "f.yaml",
    )
    with pytest.raises(
        ConfigError,
        match=r"table db\.a: compact_manifests \(from defaults \+ overrides\[0\]\): "
        r"cutoff: required key is missing",
    ):
        plan_tables(config, ["db.a"])


# -- table globs ----------------------------------------------------------------------------------


def test_globs_list_tables_of_the_warehouse_and_report_patterns_matching_nothing(tmp_path):
    warehouse = str(tmp_path / "wh")
    for identifier in ["db.events_eu", "db.events_us", "db.users", "sales.events_x", "sales.orders"]:
        database, name = identifier.split(".")
        make_table(str(tmp_path / "wh" / f"{database}.db" / name))
    (tmp_path / "wh" / "db.db" / "not_a_table").mkdir()
    (tmp_path / "wh" / "misc").mkdir()

    resolution = resolve_tables(
        warehouse, ["*.events_*", "db.users", "db.not_*", "nope.*"], exclude=["*.events_us"]
    )

    assert resolution.tables == ["db.events_eu", "db.users", "sales.events_x"]
    assert resolution.matched == {"*.events_*": 3, "db.users": 1, "db.not_*": 0, "nope.*": 0}
    assert resolution.unmatched == ["db.not_*", "nope.*"]
    with pytest.raises(BadInputError, match="does not exist"):
        resolve_tables(str(tmp_path / "missing"), ["db.*"])


def test_strict_makes_an_unmatched_pattern_exit_2_and_a_missing_warehouse_is_exit_2(tmp_path, capsys):
    (tmp_path / "wh").mkdir()
    strict = write_config(tmp_path, f"warehouse: {tmp_path / 'wh'}\ntables: ['db.*']\nstrict: true\n")
    code, record = run_maintain(strict, capsys=capsys)
    assert code == 2 and "no table matches db.*" in record["error"]
    missing = write_config(tmp_path, f"warehouse: {tmp_path / 'none'}\ntables: ['db.*']\n", "m.yaml")
    code, record = run_maintain(missing, capsys=capsys)
    assert code == 2 and "does not exist" in record["error"]


# -- the lock -------------------------------------------------------------------------------------


def lock_at(tmp_path: Path, ttl_ms: int = 60_000, owner: str = "a") -> TableLock:
    directory = str(tmp_path / "locks")
    return TableLock(FileIO.for_path(directory), lock_path(directory, "db.t"), ttl_ms, owner)


def test_a_held_lock_is_not_taken_and_release_removes_only_our_own(tmp_path):
    first, second = lock_at(tmp_path, owner="first"), lock_at(tmp_path, owner="second")
    assert first.acquire().held
    refused = second.acquire()
    assert not refused.held and refused.describe().startswith("locked by first until ")
    assert not second.release(), "a lock we do not hold is never deleted"
    assert first.release() and not os.path.exists(first.path)
    assert second.acquire().held


def test_an_expired_lock_is_taken_over_by_exactly_one_of_two_racing_runs(tmp_path):
    crashed = lock_at(tmp_path, ttl_ms=1, owner="crashed")
    assert crashed.acquire().held
    time.sleep(0.01)  # let the 1 ms ttl pass; no synchronisation depends on it
    stale = crashed.read()
    racers = [lock_at(tmp_path, owner=f"racer-{i}") for i in range(2)]
    outcomes = [racer._take_over(stale) for racer in racers]  # both saw the same stale lock
    assert [outcome.held for outcome in outcomes] == [True, False]
    assert outcomes[0].took_over.owner == "crashed"
    assert racers[0].read().owner == "racer-0"
    assert not crashed.release(), "the crashed run, if it comes back, must not delete the new lock"
    assert racers[0].release()
    assert sorted(os.listdir(tmp_path / "locks")) == [], "the takeover marker goes with the new lock"


def test_a_taker_that_died_after_its_marker_does_not_lock_the_table_out_for_good(tmp_path):
    crashed = lock_at(tmp_path, ttl_ms=1, owner="crashed")
    assert crashed.acquire().held
    stale = crashed.read()
    marker = f"{crashed.path}.takeover-{stale.token}"
    dying = lock_at(tmp_path, ttl_ms=1, owner="dying taker")
    assert dying.file_io.create_if_absent(marker, dying._new_state().to_json())  # then it died
    time.sleep(0.01)  # let the 1 ms ttls pass; no synchronisation depends on it
    fresh = lock_at(tmp_path, owner="fresh")
    acquired = fresh.acquire()
    assert acquired.held and acquired.took_over.owner == "crashed"
    assert fresh.release()
    assert sorted(os.listdir(tmp_path / "locks")) == []


def test_a_live_takers_marker_is_respected(tmp_path):
    crashed = lock_at(tmp_path, ttl_ms=1, owner="crashed")
    assert crashed.acquire().held
    time.sleep(0.01)  # let the 1 ms ttl pass; no synchronisation depends on it
    stale = crashed.read()
    taker = lock_at(tmp_path, owner="taker")
    assert taker.file_io.create_if_absent(
        f"{crashed.path}.takeover-{stale.token}", taker._new_state().to_json()
    )  # the taker is between its marker and its new lock
    assert not lock_at(tmp_path, owner="third").acquire().held


def test_a_garbled_lock_fails_the_table_with_its_path(tmp_path):
    lock = lock_at(tmp_path)
    os.makedirs(os.path.dirname(lock.path))
    Path(lock.path).write_text("{")
    with pytest.raises(Exception, match=r"db\.t\.lock.*not a maintenance lock"):
        lock.acquire()


def test_many_threads_one_lock_one_holder(tmp_path):
    locks = [lock_at(tmp_path, owner=f"t{i}") for i in range(8)]
    results: list[bool] = []
    threads = [threading.Thread(target=lambda lk=lk: results.append(lk.acquire().held)) for lk in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True]


# -- exit code ------------------------------------------------------------------------------------


def outcome(table: str, status: str, code: int = 0) -> TableOutcome:
    result = TableOutcome(table, status=status, exit_code=code, reason="x" if status != "done" else None)
    return result


@pytest.mark.parametrize(
    "codes, expected",
    [([2, 3], MaintenanceBadInput), ([3, 1, 2], MaintenanceFailed)],
)
def test_the_run_fails_with_the_most_severe_table_code(codes, expected):
    outcomes = [outcome(f"db.t{i}", "failed", code) for i, code in enumerate(codes)] + [
        outcome("db.ok", "done")
    ]
    with pytest.raises(expected, match=f"{len(codes)} of {len(codes) + 1} tables failed"):
        _report(RunRecord("maintain"), outcomes, logging.getLogger("t"))


def test_skipped_tables_do_not_fail_the_run():
    record = RunRecord("maintain")
    _report(record, [outcome("db.a", "skipped"), outcome("db.b", "done")], logging.getLogger("t"))
    assert record.counts["tables_skipped"] == 1 and record.details["summary"][0] == "db.a: skipped (x)"
