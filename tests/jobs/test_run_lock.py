"""The per-table lock around standalone jobs (issue #30: every table-management job has the frame's
lock): a job on a table another run holds exits 3 and changes nothing, an expired lock is taken
over, a dry run only looks, the lock is gone after the run, write takes none, and maintain's steps
never ask for the lock their maintain run holds."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main
from jobs.runtime.config import TableJobConfig
from jobs.runtime.table_lock import LockState, TableLock, default_lock_dir, lock_path
from paimon_format.storage import faults
from paimon_format.storage.faults import SimulatedCrash
from paimon_format.storage.fileio import FileIO
from tests.support.table_states import IDENTIFIER, build_sample_table, fingerprint, open_table


def run(tmp_path: Path, operation: str, config: dict, capsys, *extra: str) -> tuple[int, dict, str]:
    path = tmp_path / f"{operation}.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main([operation, "--config", str(path), *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def hold_lock(warehouse: str, owner: str = "nightly@host pid 7", ttl_ms: int = 3_600_000) -> TableLock:
    """Another run's lock on the sample table (as maintain or a standalone job takes it)."""
    directory = default_lock_dir(warehouse)
    lock = TableLock(FileIO.for_path(directory), lock_path(directory, IDENTIFIER), ttl_ms, owner)
    assert lock.acquire().held
    return lock


def lock_file(warehouse: str) -> str:
    return lock_path(default_lock_dir(warehouse), IDENTIFIER)


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    warehouse = str(tmp_path / "wh")
    build_sample_table(warehouse, commits=3)
    return warehouse


def test_a_job_on_a_locked_table_exits_3_naming_the_holder_and_changes_nothing(warehouse, tmp_path, capsys):
    holder = hold_lock(warehouse)
    before = fingerprint(warehouse)

    config = {"warehouse": warehouse, "table": IDENTIFIER, "tag": "locked-out"}
    code, record, err = run(tmp_path, "create-tag", config, capsys)

    assert code == 3 and record["status"] == "refused"
    assert "locked by nightly@host pid 7 until " in record["error"]
    assert lock_file(warehouse) in record["error"]
    assert record["details"]["lock"].startswith("locked by nightly@host pid 7 until ")
    assert "locked by nightly@host pid 7" in err
    assert fingerprint(warehouse) == before, "the holder's lock and the table are as they were"
    assert holder.read() is not None and holder.read().token == holder.state.token


def test_the_dry_run_on_a_locked_table_reports_the_holder_and_changes_nothing(warehouse, tmp_path, capsys):
    hold_lock(warehouse)
    before = fingerprint(warehouse)
    config = {"warehouse": warehouse, "table": IDENTIFIER, "retain_min": 1, "older_than": "1 ms"}

    code, record, _ = run(tmp_path, "expire-snapshots", config, capsys, "--dry-run")

    assert code == 3 and record["dry_run"] is True
    assert record["error"].startswith("dry run: a real run now would be refused: ")
    assert "locked by nightly@host pid 7 until " in record["error"]
    assert fingerprint(warehouse) == before


def test_a_dry_run_on_a_free_table_takes_no_lock(warehouse, tmp_path, capsys):
    config = {"warehouse": warehouse, "table": IDENTIFIER, "tag": "dry"}
    code, record, _ = run(tmp_path, "create-tag", config, capsys, "--dry-run")
    assert code == 0, record["error"]
    assert record["details"]["lock"] == "not taken (dry run)"
    assert not os.path.exists(default_lock_dir(warehouse)), "a dry run creates no lock file or directory"


def test_the_lock_is_held_while_the_job_runs_and_gone_after(
    warehouse, tmp_path, capsys, fake_operation, monkeypatch
):
    seen: list[LockState | None] = []

    def look_at_the_lock(context, config) -> None:
        directory = default_lock_dir(config.warehouse)
        seen.append(TableLock(FileIO.for_path(directory), lock_path(directory, config.table), 1).read())

    name = fake_operation("fake-locked", look_at_the_lock)
    code, record, _ = run(tmp_path, name, {"warehouse": warehouse, "table": IDENTIFIER}, capsys)

    assert code == 0, record["error"]
    assert seen[0] is not None and seen[0].owner.endswith(f"pid {os.getpid()}")
    assert seen[0].expires_ms - seen[0].acquired_ms == 6 * 3_600_000, "maintain's default ttl: 6h"
    assert record["details"]["lock"] == lock_file(warehouse)
    assert os.listdir(default_lock_dir(warehouse)) == [], "released after the run"

    def fail(context, config) -> None:
        raise RuntimeError("boom")

    failing = fake_operation("fake-failing", fail)
    code, record, _ = run(tmp_path, failing, {"warehouse": warehouse, "table": IDENTIFIER}, capsys)
    assert code == 1 and os.listdir(default_lock_dir(warehouse)) == [], "released after a failure too"


def test_an_expired_lock_is_taken_over_and_a_lock_elsewhere_is_honoured(warehouse, tmp_path, capsys):
    crashed = hold_lock(warehouse, owner="crashed@host pid 9")
    now = int(time.time() * 1000)
    stale = LockState(crashed.state.token, crashed.owner, now - 7_200_000, now - 3_600_000)
    Path(lock_file(warehouse)).write_bytes(stale.to_json())  # its run died an hour after its ttl
    config = {"warehouse": warehouse, "table": IDENTIFIER, "tag": "after-crash"}

    code, record, err = run(tmp_path, "create-tag", config, capsys)

    assert code == 0, record["error"]
    assert "took over an expired lock of crashed@host pid 9" in err
    assert "after-crash" in open_table(warehouse).tag_manager.tag_names()
    assert os.listdir(default_lock_dir(warehouse)) == [], "the new lock and the takeover marker are gone"
    assert not crashed.release(), "the crashed run, back, finds no lock of its own to delete"

    elsewhere = str(tmp_path / "locks")
    directory_config = {**config, "tag": "elsewhere", "lock": {"dir": elsewhere, "ttl": "2h"}}
    other = TableLock(FileIO.for_path(elsewhere), lock_path(elsewhere, IDENTIFIER), 60_000, "other@host")
    assert other.acquire().held
    code, record, _ = run(tmp_path, "create-tag", directory_config, capsys)
    assert code == 3 and "locked by other@host" in record["error"]
    code, record, _ = run(tmp_path, "create-tag", {**directory_config, "lock": {"enabled": False}}, capsys)
    assert code == 0 and record["details"]["lock"] == "disabled"


def test_a_crashed_run_leaves_its_lock_until_it_expires_then_the_rerun_takes_it_over(
    warehouse, tmp_path, capsys
):
    config = {"warehouse": warehouse, "table": IDENTIFIER, "tag": "crashed"}
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with faults.injected("create:2:halt"), pytest.raises(SimulatedCrash):  # the lock, then the tag
        run(tmp_path, "create-tag", config, capsys)
    for handler in root.handlers[:]:  # a dead process leaves no log handler; this one lives on
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    left = TableLock(FileIO.for_path(default_lock_dir(warehouse)), lock_file(warehouse), 1).read()
    assert left is not None and left.owner.endswith(f"pid {os.getpid()}"), "a dead run cannot release"

    code, record, _ = run(tmp_path, "create-tag", config, capsys)
    assert code == 3 and f"locked by {left.owner} until {left.expires}" in record["error"]

    now = int(time.time() * 1000)
    expired = LockState(left.token, left.owner, now - 7_200_000, now - 1)  # its ttl has passed
    Path(lock_file(warehouse)).write_bytes(expired.to_json())
    code, record, err = run(tmp_path, "create-tag", config, capsys)
    assert code == 0 and f"took over an expired lock of {left.owner}" in err
    assert "crashed" in open_table(warehouse).tag_manager.tag_names()
    assert os.listdir(default_lock_dir(warehouse)) == []


def test_write_takes_no_lock_and_refuses_a_lock_block(spark_session, warehouse, tmp_path, capsys):
    assert "lock" in TableJobConfig.model_fields
    source = tmp_path / "in.json"
    source.write_text('{"id": 100, "dt": "2024-01-01", "v": "x"}\n')
    config = {"warehouse": warehouse, "table": IDENTIFIER, "source": {"format": "json", "path": str(source)}}
    code, record, _ = run(tmp_path, "write", {**config, "lock": {"enabled": True}}, capsys)
    assert code == 2 and record["error"].startswith("lock: write takes no table lock")

    hold_lock(warehouse)  # a maintenance run on the table does not stop ingestion
    code, record, _ = run(tmp_path, "write", config, capsys)
    assert code == 0, record["error"]
    assert "lock" not in record["details"] and record["snapshot_ids"]["committed"] == 4


def test_maintain_refuses_a_lock_key_in_a_block(tmp_path, capsys):
    config = {
        "warehouse": str(tmp_path / "wh"),
        "tables": ["db.*"],
        "defaults": {"expire_snapshots": {"lock": {"enabled": False}}},
    }
    code, record, _ = run(tmp_path, "maintain", config, capsys)
    assert code == 2 and "set at the top level of the maintain config" in record["error"]
    assert "defaults.expire_snapshots" in record["error"]
