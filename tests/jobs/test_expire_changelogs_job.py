"""expire-changelogs on its own (issue #30): the long-lived changelogs beyond the retention go with
the files only they needed, no snapshot is touched, consumers hold theirs, `delete_all` takes all.

The table (tests/support/changelog_tables.decoupled_table): snapshots 1-8 with compactions among
them, tag t3; our expire-snapshots first turns snapshots 1-6 into long-lived changelogs (changelog
retention 4 keeps 5-6 of them). The differential against Paimon's Java ExpireChangelogImpl is in
tests/java/test_consumers_java.py (it needs the Java fixtures).
"""

from __future__ import annotations

import json

import pytest
import yaml

from jobs.__main__ import main
from jobs.expire_changelogs import ChangelogExpiryRequest, expire_changelogs_of
from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.runtime.local_frame import LocalSession
from paimon_format.consumers import ConsumerManager
from tests.support.changelog_tables import decoupled_table
from tests.support.table_states import (
    IDENTIFIER,
    copy_warehouse,
    fingerprint,
    missing_needed,
    open_table,
    unreferenced,
)

FUTURE = "2100-01-01 00:00:00"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    """The table after expire-snapshots made its long-lived changelogs. That expiry is set-up, not
    under test: it runs in the driver (`LocalSession`); tests/jobs/test_expire_changelog.py runs it on
    Spark and tests/jobs/runtime/test_local_exec.py shows both delete the same on this table."""
    warehouse = str(tmp_path_factory.mktemp("expire-changelogs") / "wh")
    table = decoupled_table(warehouse)
    expire_snapshots(LocalSession(), table, ExpiryRequest(older_than=FUTURE))
    return warehouse


@pytest.fixture
def warehouse(template, tmp_path) -> str:
    return copy_warehouse(template, str(tmp_path / "wh"))


def state(warehouse: str) -> tuple[list[int], list[int]]:
    table = open_table(warehouse)
    return table.snapshot_manager.snapshot_ids(), table.snapshot_manager.changelog_ids()


def test_the_template_has_long_lived_changelogs(warehouse):
    assert state(warehouse) == ([7, 8], [5, 6])


def test_changelogs_beyond_retain_max_go_with_their_files_and_no_snapshot(
    spark_session, warehouse, tmp_path, capsys
):
    before = fingerprint(warehouse)
    config = tmp_path / "ec.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "warehouse": warehouse,
                "table": IDENTIFIER,
                "retain_max": 3,
                "retain_min": 1,
                "older_than": FUTURE,
            }
        )
    )
    assert main(["expire-changelogs", "--config", str(config), "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert fingerprint(warehouse) == before and dry["counts"]["changelogs_to_expire"] == 1
    assert main(["expire-changelogs", "--config", str(config)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["counts"]["changelogs_expired"] == 1 and state(warehouse) == ([7, 8], [6])
    table = open_table(warehouse)
    assert missing_needed(table) == set() and unreferenced(table) == set()


def test_a_consumer_holds_its_changelog_and_delete_all_takes_every_one(spark_session, warehouse):
    table = open_table(warehouse)
    ConsumerManager(table.file_io, table.path).reset_consumer("stream-1", 5)
    expire_changelogs_of(
        spark_session, table, ChangelogExpiryRequest(retain_max=1, retain_min=1, older_than=FUTURE)
    )
    assert state(warehouse) == ([7, 8], [5, 6])  # the consumer reads changelog 5 next
    expire_changelogs_of(spark_session, open_table(warehouse), ChangelogExpiryRequest(delete_all=True))
    table = open_table(warehouse)
    assert state(warehouse) == ([7, 8], [])  # as Paimon's expireAll: consumers hold nothing here
    assert missing_needed(table) == set() and unreferenced(table) == {"consumer/consumer-stream-1"}


def test_bad_input_is_exit_2(warehouse, tmp_path, capsys):
    before = fingerprint(warehouse)
    for keys, expected in (
        ({"delete_all": True, "retain_max": 2}, "give no retention keys"),
        ({"retain_min": 5, "retain_max": 2}, "retain_min 5 > retain_max 2"),
        ({"older_than": "yesterday-ish"}, "older_than"),
    ):
        config = tmp_path / "ec.yaml"
        config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
        assert main(["expire-changelogs", "--config", str(config)]) == 2
        assert expected in json.loads(capsys.readouterr().out)["error"]
    assert fingerprint(warehouse) == before
