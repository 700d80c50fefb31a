"""reset-consumer, clear-consumers, and `consumer.expiration-time` / `consumer.changelog-only` in
expire-snapshots (issue #30, Consumers).

The template: our sample table (four appends, tag t2). Consumers are written as a streaming reader
leaves them (`consumer/consumer-<id>`, Jackson's JSON); a stale one has its file's modification time
set back, as a reader that stopped long ago leaves it.
"""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from jobs.__main__ import main
from jobs.clear_consumers import ClearConsumersRequest, clear_consumers
from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.reset_consumer import ResetConsumerRequest, reset_consumer
from jobs.runtime.errors import CommitRaceLost
from jobs.runtime.local_frame import LocalSession
from paimon_format.consumers import ConsumerManager
from paimon_format.storage import crash_points
from tests.support.table_states import (
    IDENTIFIER,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    missing_needed,
    open_table,
)

FUTURE = "2100-01-01 00:00:00"  # every snapshot is older than this cutoff


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("consumer-jobs") / "wh")
    build_sample_table(warehouse, commits=4)
    return warehouse


@pytest.fixture
def warehouse(template, tmp_path) -> str:
    return copy_warehouse(template, str(tmp_path / "wh"))


def consumers_of(warehouse: str) -> ConsumerManager:
    table = open_table(warehouse)
    return ConsumerManager(table.file_io, table.path)


def run_cli(tmp_path, operation: str, keys: dict, warehouse: str, capsys, *flags: str) -> tuple[int, dict]:
    config = tmp_path / f"{operation}.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
    code = main([operation, "--config", str(config), *flags])
    return code, json.loads(capsys.readouterr().out)


def set_options(warehouse: str, **options: str) -> None:
    """A new schema with `options` added, as ALTER TABLE SET makes."""
    import dataclasses

    table = open_table(warehouse)
    schema = table.schema
    altered = dataclasses.replace(schema, id=schema.id + 1, options={**schema.options, **options})
    assert table.schema_manager.commit_new_schema(altered)


def make_stale(consumers: ConsumerManager, consumer_id: str, age_s: float) -> None:
    path = consumers.consumer_path(consumer_id)
    old = time.time() - age_s
    os.utime(path, (old, old))


# -- reset-consumer --------------------------------------------------------------------------------


def test_reset_consumer_sets_the_next_snapshot_and_a_dry_run_writes_nothing(warehouse, tmp_path, capsys):
    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stream-1", 2)
    before = fingerprint(warehouse)
    code, record = run_cli(
        tmp_path,
        "reset-consumer",
        {"consumer_id": "stream-1", "next_snapshot": 4},
        warehouse,
        capsys,
        "--dry-run",
    )
    assert code == 0 and fingerprint(warehouse) == before
    assert record["details"]["consumer"]["previous_next_snapshot"] == 2
    code, record = run_cli(
        tmp_path, "reset-consumer", {"consumer_id": "stream-1", "next_snapshot": 4}, warehouse, capsys
    )
    assert code == 0 and consumers.consumers() == {"stream-1": 4}
    # a new consumer, at the snapshot after the latest (a reader that has read everything)
    code, _ = run_cli(
        tmp_path, "reset-consumer", {"consumer_id": "new", "next_snapshot": 5}, warehouse, capsys
    )
    assert code == 0 and consumers.consumers() == {"new": 5, "stream-1": 4}
    # Java's byte form, as a Java reader writes it
    assert consumers.file_io.read_bytes(consumers.consumer_path("new")) == b'{\n  "nextSnapshot" : 5\n}'


def test_reset_consumer_deletes_a_consumer(warehouse, tmp_path, capsys):
    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stream-1", 2)
    code, record = run_cli(
        tmp_path, "reset-consumer", {"consumer_id": "stream-1", "delete": True}, warehouse, capsys
    )
    assert code == 0 and record["counts"]["consumers_deleted"] == 1 and consumers.consumers() == {}
    code, _ = run_cli(
        tmp_path,
        "reset-consumer",
        {"consumer_id": "stream-1", "delete": True, "strict": False},
        warehouse,
        capsys,
    )
    assert code == 0


def test_bad_input_is_exit_2_naming_it_and_changes_nothing(warehouse, tmp_path, capsys):
    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stream-1", 2)
    os.remove(open_table(warehouse).snapshot_manager.snapshot_path(1))  # as an expiry leaves it
    pristine = fingerprint(warehouse)
    cases = [
        ("reset-consumer", {"consumer_id": "stream-1", "next_snapshot": 1}, "next_snapshot 1 is neither"),
        ("reset-consumer", {"consumer_id": "stream-1", "next_snapshot": 9}, "snapshots: 2..4"),
        ("reset-consumer", {"consumer_id": "gone", "delete": True}, "consumer 'gone' does not exist"),
        ("reset-consumer", {"consumer_id": "stream-1"}, "exactly one of next_snapshot"),
        ("reset-consumer", {"consumer_id": "a/b", "next_snapshot": 2}, "is no consumer id"),
        ("reset-consumer", {"consumer_id": "x", "next_snapshot": 2, "branch": "nope"}, "branch 'nope'"),
        ("clear-consumers", {"include": "(["}, "is no valid regex"),
    ]
    for operation, keys, expected in cases:
        code, record = run_cli(tmp_path, operation, keys, warehouse, capsys)
        assert code == 2 and expected in record["error"], (operation, keys, record["error"])
    assert fingerprint(warehouse) == pristine


def test_reset_consumer_racing_an_expiry_is_exit_3_and_puts_the_consumer_back(warehouse):
    table = open_table(warehouse)
    consumers = ConsumerManager(table.file_io, table.path)
    consumers.reset_consumer("stream-1", 4)
    before = table.file_io.read_bytes(consumers.consumer_path("stream-1"))

    def expire_snapshot_2(step: str) -> None:  # another job expires snapshot 2 meanwhile
        os.remove(table.snapshot_manager.snapshot_path(2))

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, "reset-consumer:planned")
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(expire_snapshot_2)
    try:
        with pytest.raises(CommitRaceLost, match="snapshot 2 was expired by another job"):
            reset_consumer(table, ResetConsumerRequest("stream-1", 2))
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()
    assert table.file_io.read_bytes(consumers.consumer_path("stream-1")) == before


# -- clear-consumers -------------------------------------------------------------------------------


def test_clear_consumers_by_include_and_exclude(warehouse, tmp_path, capsys):
    table = open_table(warehouse)
    consumers = ConsumerManager(table.file_io, table.path)
    for consumer_id in ("etl-1", "etl-2", "etl-keep", "audit"):
        consumers.reset_consumer(consumer_id, 3)
    before = fingerprint(warehouse)
    record = clear_consumers(table, ClearConsumersRequest("etl-.*", "etl-keep"), dry_run=True)
    assert fingerprint(warehouse) == before and record.samples["consumers_to_delete"] == ["etl-1", "etl-2"]
    # the whole id must match, as Java's Matcher.matches: "etl" alone matches nothing
    clear_consumers(table, ClearConsumersRequest("etl"))
    assert len(consumers.consumer_ids()) == 4
    code, record = run_cli(
        tmp_path, "clear-consumers", {"include": "etl-.*", "exclude": "etl-keep"}, warehouse, capsys
    )
    assert code == 0 and record["counts"]["consumers_deleted"] == 2
    assert consumers.consumer_ids() == ["audit", "etl-keep"]
    code, _ = run_cli(tmp_path, "clear-consumers", {}, warehouse, capsys)
    assert code == 0 and consumers.consumer_ids() == []


# -- consumer options in expire-snapshots ----------------------------------------------------------


def test_a_stale_consumer_expires_first_and_no_longer_holds_snapshots(spark_session, warehouse):
    set_options(warehouse, **{"consumer.expiration-time": "1 h"})
    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stopped", 2)
    consumers.reset_consumer("live", 3)
    make_stale(consumers, "stopped", 2 * 3600)
    table = open_table(warehouse)
    dry = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE), dry_run=True)
    assert dry.counts["consumers_expired"] == 1 and consumers.consumer_ids() == ["live", "stopped"]
    assert dry.details["settings"]["min_consumer_next_snapshot"] == 3
    record = expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert record.samples["consumers_expired"] == ["stopped"] and consumers.consumer_ids() == ["live"]
    assert table.snapshot_manager.snapshot_ids() == [3, 4]  # the live consumer still holds 3
    consumers.delete_consumer("live")
    expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [4]
    assert missing_needed(open_table(warehouse)) == set()


# The two tests below run in the driver (`LocalSession`): which snapshots a consumer holds is decided
# in the driver's plan before any frame (the test above shows it on Spark), and
# tests/jobs/runtime/test_local_exec.py shows the driver deletes what Spark deletes.


def test_without_expiration_time_a_stale_consumer_still_holds(warehouse):
    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stopped", 2)
    make_stale(consumers, "stopped", 30 * 86400)
    table = open_table(warehouse)
    record = expire_snapshots(LocalSession(), table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert record.counts["consumers_expired"] == 0 and table.snapshot_manager.snapshot_ids() == [2, 3, 4]


def test_changelog_only_consumers_hold_no_snapshots(warehouse):
    set_options(warehouse, **{"consumer.changelog-only": "true"})
    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stream-1", 2)
    table = open_table(warehouse)
    record = expire_snapshots(LocalSession(), table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    assert table.snapshot_manager.snapshot_ids() == [4] and record.snapshot_ids["limited_by"] != "consumer"
    assert consumers.consumer_ids() == ["stream-1"]  # the consumer itself stays


def test_inspect_lists_the_consumers(warehouse, capsys):
    from paimon_format.__main__ import main as format_main

    consumers = consumers_of(warehouse)
    consumers.reset_consumer("stream-1", 3)
    table = open_table(warehouse)
    assert format_main(["inspect", table.path, "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert [(c["id"], c["next_snapshot"]) for c in described["consumers"]] == [("stream-1", 3)]
    assert format_main(["inspect", table.path]) == 0
    assert "consumer  stream-1: next snapshot 3" in capsys.readouterr().out
