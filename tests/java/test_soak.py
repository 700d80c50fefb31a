"""The live-table soak in CI (scripts/soak.py, issue #28): 5 minutes of Paimon's Java writer committing
to every soak table while our maintain and drop-partition run beside it, and nothing is lost.

The soak runs as a background process started when collection ends (tests/java/soak_background.py,
its own JVM and SparkSession), so its 5 minutes overlap the rest of the suite; these tests run last
and wait for it to exit. Then the same checks are shown to fail on its kept tables: a live data file
deleted, and a batch the ledger says Java committed that the table does not have, are each reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from scripts.soak.checks import check_files, check_read, latest_id
from scripts.soak.ledger import SPECS, Ledger
from tests.java.soak_background import MINUTES, background_soak

pytestmark = [pytest.mark.java, pytest.mark.slow]


@dataclass
class Soaked:
    figures: dict[str, Any]
    paths: dict[str, str]
    ledgers: dict[str, Ledger]


@pytest.fixture(scope="module")
def soaked(request: pytest.FixtureRequest) -> Soaked:
    soak = background_soak(request.config)
    code, figures, printed = soak.wait()
    assert figures is not None, (
        f"the soak (exit {code}, in {soak.workdir}) wrote no result:\n{printed[-4000:]}"
    )
    assert code == (1 if figures["failed"] else 0), printed[-4000:]
    figures["printed"] = printed
    return Soaked(figures, figures["paths"], soak.ledgers())


def test_nothing_lost_while_java_writes_and_we_maintain(soaked: Soaked) -> None:
    figures, printed = soaked.figures, soaked.figures["printed"]
    java, ours, found = figures["java"], figures["ours"], figures["findings"]
    assert not figures["lost"] and not figures["failed"], printed
    assert figures["minutes"] >= MINUTES and set(soaked.paths) == set(SPECS), figures["paths"]
    assert not found["problems"] and not java["failures"], printed
    # a file Java's own expiry deleted under a job is a race (exit 3, counted), never a failure
    assert not ours["failures"], printed
    assert all(java["commits"].get(name, 0) >= 5 for name in soaked.paths), java["commits"]
    assert java["tags"] > 0 and java["compactions"] > 0, java
    for operation in (
        "create-tag",
        "expire-tags",
        "expire-snapshots",
        "compact",
        "compact-manifests",
        "remove-orphan-files",
        "drop-partition",
    ):
        assert ours["runs"].get(operation, 0) + ours["conflicts"].get(operation, 0) > 0, (operation, ours)
    assert figures["checkpoints"] >= 2, figures["checkpoints"]
    assert found["reads_checked"] > 2 * len(soaked.paths) and found["rows_checked"] > 0
    assert found["files_checked"] > 0
    assert found["rows_lost"] == found["rows_doubled"] == found["files_missing"] == found["old_orphans"] == 0
    assert not figures["skipped_ids"] and not figures["overwritten"], printed


def test_a_deleted_live_file_is_reported(soaked: Soaked) -> None:
    name = "dedup"
    path = soaked.paths[name]
    table = Table(FileIO.for_path(path), path)
    entry = live_entries(table, table.snapshot_manager.latest())[0]
    os.remove(os.path.join(path, table.entry_relpaths(entry)[0]))
    found = check_files(name, path, None)
    assert found.files_missing == 1 and found.problems


def test_a_batch_missing_from_the_table_is_reported(soaked: Soaked, java_paimon: Any) -> None:
    name = "dv_lookup"
    path, ledger = soaked.paths[name], soaked.ledgers[name]
    latest = latest_id(path)
    rows = java_paimon.read(path, snapshot_id=latest)
    assert check_read(ledger, name, "latest", latest, rows, True).rows_lost == 0
    # a ledger that also holds a committed batch of new keys the table never saw: lost rows, and a
    # latest snapshot that no longer ends with Java's last committed batch
    extra = Ledger(ledger.spec, ledger.rng, dict(ledger.batches), dict(ledger.drops))
    planted = extra.new_batch()
    extra.settle(planted, True, latest + 1)
    found = check_read(extra, name, "latest", latest, rows, True)
    assert found.problems
    assert check_read(extra, name, "latest", latest, rows, False).rows_lost == 0  # ends earlier: fine
    broken = [row for row in rows if row["dt"] != "9999-12-31"][1:] + [
        r for r in rows if r["dt"] == "9999-12-31"
    ]
    assert check_read(ledger, name, "latest", latest, broken, True).rows_lost == 1
