"""The live-table soak, short (scripts/soak.py, issue #28): Paimon's Java writer commits to two tables
while our maintain and drop-partition run beside it, and nothing is lost.

One run of a minute on the session's JVM (as the writer) and SparkSession (our jobs), then the same
checks shown to fail: a live data file deleted, and a batch the ledger says Java committed that the
table does not have, are each reported.
"""

from __future__ import annotations

import io
import os

import pytest

from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from scripts.soak.checks import check_files, check_read, latest_id
from scripts.soak.ledger import Ledger
from scripts.soak.run import SoakOptions, SoakResult, report, soak

pytestmark = [pytest.mark.java, pytest.mark.slow]


@pytest.fixture(scope="module")
def soaked(java_paimon, spark_session, tmp_path_factory) -> SoakResult:
    workdir = tmp_path_factory.mktemp("soak")
    options = SoakOptions(
        minutes=1.0,
        warehouse=str(workdir / "warehouse"),
        tables=("dedup", "dv_lookup"),
        checkpoint_s=20.0,
        orphan_older_than_s=20,
    )
    return soak(options, java_paimon, str(workdir))


def test_nothing_lost_while_java_writes_and_we_maintain(soaked: SoakResult) -> None:
    printed = io.StringIO()
    report(soaked, printed)
    java, ours, found = soaked.writer.stats, soaked.ours.stats, soaked.findings
    assert not soaked.lost, printed.getvalue()
    assert not found.problems and not java.failures, printed.getvalue()
    # a file Java's own expiry deleted under a job is a race (exit 3, counted), never a failure
    assert not ours.failures, printed.getvalue()
    assert all(java.commits[name] >= 5 for name in soaked.paths), java.commits
    assert java.tags > 0
    for operation in ("create-tag", "expire-tags", "expire-snapshots", "compact", "remove-orphan-files"):
        assert ours.runs[operation] + ours.conflicts[operation] > 0, (operation, ours.runs)
    assert found.reads_checked > 2 * len(soaked.paths) and found.rows_checked > 0 and found.files_checked > 0
    assert found.rows_lost == found.rows_doubled == found.files_missing == found.old_orphans == 0


def test_a_deleted_live_file_is_reported(soaked: SoakResult) -> None:
    name = "dedup"
    path = soaked.paths[name]
    table = Table(FileIO.for_path(path), path)
    entry = live_entries(table, table.snapshot_manager.latest())[0]
    os.remove(os.path.join(path, table.entry_relpaths(entry)[0]))
    found = check_files(name, path, None)
    assert found.files_missing == 1 and found.problems


def test_a_batch_missing_from_the_table_is_reported(soaked: SoakResult, java_paimon) -> None:
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
