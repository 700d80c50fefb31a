"""The S3 soak, short (scripts/soak.py --s3, issue #28): two writers of ours and our maintenance on
the same tables, on moto behind the proxy answering 1% of the requests 503 SlowDown, and nothing lost.

One run on the session's SparkSession and proxy, as short as what it checks allows (maintain rounds
beside the writers until each writer committed twice to each table, a checkpoint after each round,
then a last round and checkpoint at rest), then the checks it relied on shown
to fail: a row no writer wrote, a row a writer's ledger has that the read lacks, a batch the ledger
says landed that the table does not have, and a referenced file deleted from the bucket. The
two-writer ledger rules (keys apart, days dropped only once the slowest writer left them, a batch
whole only from the latest snapshot after its write on) are tests of their own.
"""

from __future__ import annotations

import io
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from jobs.compaction.run import CompactRequest, compact_table
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage import crash_points
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from scripts.soak.checks import check_files, check_reads, latest_id, our_read
from scripts.soak.ledger import DROP_AGE_DAYS, ID_SPAN, SPECS, Ledger, day_name, droppable_days
from scripts.soak.our_writer import OurWriter
from scripts.soak.s3_run import S3SoakOptions, S3SoakResult, committed, create_tables, report, s3_soak
from scripts.soak.writer_loop import WriterLoop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def soaked(spark_session, moto_s3, s3_proxy, tmp_path_factory) -> S3SoakResult:
    _, bucket, _ = moto_s3
    workdir = tmp_path_factory.mktemp("s3soak")
    storage = {"endpoint_url": s3_proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    options = S3SoakOptions(
        minutes=0,  # no clock: rounds until each writer committed twice to each table
        min_commits=2,
        warehouse=f"s3://{bucket}/soak-{uuid.uuid4().hex[:8]}",
        storage_options=storage,
        tables=("dedup", "dv_lookup"),
        checkpoint_s=0,  # a checkpoint after every maintain round, with the writers still going
        orphan_older_than_s=20,
        watch_interval_s=0.5,
        batches_per_day=1,  # old days to drop soonest (a run past 5 batches a writer drops some)
    )
    s3_proxy.reset(throttle_ratio=0.01, seed=7)
    try:
        return s3_soak(options, str(workdir), s3_proxy.summary)
    finally:
        s3_proxy.reset()  # the tests below and other modules' run unthrottled


def test_two_writers_and_our_maintenance_on_throttled_s3_lose_nothing(soaked: S3SoakResult) -> None:
    printed = io.StringIO()
    report(soaked, printed)
    found, ours = soaked.findings, soaked.ours.stats
    assert not soaked.lost, printed.getvalue()
    assert not found.problems and not soaked.writer_failures and not ours.failures, printed.getvalue()
    assert soaked.bill["throttled"] > 0, printed.getvalue()  # the store did answer 503s
    for writer in soaked.writers:
        assert all(writer.commits[name] >= 2 for name in soaked.paths), printed.getvalue()
    for operation in ("create-tag", "expire-snapshots", "compact", "remove-orphan-files"):
        assert ours.runs[operation] + ours.conflicts[operation] > 0, printed.getvalue()
    assert soaked.checkpoints >= 2 and found.reads_checked > 2 * len(soaked.paths)
    assert found.rows_checked > 0 and found.files_checked > 0
    assert found.rows_lost == found.rows_doubled == found.files_missing == found.old_orphans == 0


def test_a_row_of_no_writer_or_a_row_a_writer_lost_is_reported(soaked: S3SoakResult) -> None:
    name = "dedup"
    path, ledgers = soaked.paths[name], soaked.ledgers[name]
    storage = soaked.options.storage_options
    latest = latest_id(path, None, storage)
    rows = our_read(path, storage, snapshot_id=latest)
    assert check_reads(ledgers, name, "latest", latest, rows, True).rows_lost == 0
    assert {ledger.writer for ledger in ledgers for row in rows if ledger.owns(row)} == {0, 1}

    stray = {**rows[0], "k": 5 * ID_SPAN + 1}  # a key in no writer's range
    found = check_reads(ledgers, name, "latest", latest, [*rows, stray], True)
    assert found.rows_doubled == 1 and found.problems

    second = [row for row in rows if ledgers[1].owns(row) and row["dt"] != "9999-12-31"][0]
    found = check_reads(ledgers, name, "latest", latest, [row for row in rows if row is not second], True)
    assert found.rows_lost == 1 and found.problems

    # writer 0's ledger with one more landed batch the table never saw
    extra = Ledger(
        ledgers[0].spec, ledgers[0].rng, dict(ledgers[0].batches), dict(ledgers[0].drops), writer=0
    )
    extra.settle(extra.new_batch(), True, latest + 1)
    assert check_reads([extra, ledgers[1]], name, "latest", latest, rows, True).problems
    assert not check_reads([extra, ledgers[1]], name, "latest", latest, rows, False).problems  # ends earlier


def test_a_deleted_referenced_file_on_s3_is_reported(soaked: S3SoakResult) -> None:
    name = "dv_lookup"
    path, storage = soaked.paths[name], soaked.options.storage_options
    assert check_files(name, path, None, storage).files_missing == 0
    table = Table(FileIO.for_path(path, storage), path)
    entry = live_entries(table, table.snapshot_manager.latest())[0]
    table.file_io.delete(table.full_path(table.entry_relpaths(entry)[0]))
    found = check_files(name, path, None, storage)
    assert found.files_missing == 1 and found.problems


def test_writers_keys_stay_apart_and_a_day_is_dropped_once_the_slowest_writer_left_it() -> None:
    spec = SPECS["dedup"]
    fast, slow = (Ledger(spec, random.Random(w), writer=w, deletes=False) for w in (0, 1))
    for _ in range(60):
        fast.settle(fast.new_batch(), True, None)
    for _ in range(6):
        slow.settle(slow.new_batch(), True, None)
    rows = [row for ledger in (fast, slow) for batch in ledger.batches.values() for row in batch.rows]
    assert all(fast.owns(row) != slow.owns(row) for row in rows)  # each row has exactly one owner
    assert not any(row.get("_kind") == "-D" for row in rows)  # deletes off for our writers
    assert fast.droppable_days()  # alone, the fast writer's old days could go
    assert droppable_days([fast, slow]) == []  # the slow writer still writes day 0 and 1
    for _ in range(6 * (DROP_AGE_DAYS + 2)):
        slow.settle(slow.new_batch(), True, None)
    assert droppable_days([fast, slow])[0] == day_name(0)


def test_a_batch_seen_in_some_buckets_only_is_allowed_inside_its_window_alone() -> None:
    """Deletion-vector tables: between a batch's APPEND (invisible level 0) and its compaction, another
    writer's compaction may show some of its buckets; inside that window alone a part is no loss."""
    ledger = Ledger(SPECS["dv_lookup"], random.Random(3), writer=1, deletes=False)
    ledger.settle(ledger.new_batch(), True, 3, 2)
    second = ledger.new_batch()
    ledger.settle(second, True, 7, 5)  # APPEND 5, compaction 7
    before = ledger_rows(ledger, 1)
    part = [row for row in second.rows if row["dt"] != "9999-12-31"][:2]  # two rows, no marker
    assert ledger.torn_batch(6) == 2 and ledger.torn_batch(7) is None
    assert check_reads([ledger], "dv", "snapshot", 6, [*before, *part], False).problems == []
    missing = check_reads([ledger], "dv", "snapshot", 6, [*before[1:], *part], False)
    assert missing.rows_lost == 1  # a row of the batch before is missing: a loss, window or not
    outside = check_reads([ledger], "dv", "snapshot", 7, [*before, *part], False)
    assert outside.problems  # after the compaction the batch is whole or it is a loss
    spec = SPECS["dedup"]  # a table whose reads see level 0 has no such window
    assert Ledger(spec, random.Random(3), batches=dict(ledger.batches)).torn_batch(6) is None


def test_the_short_soak_goes_on_until_every_writer_committed_enough_to_every_table() -> None:
    """CI's soak has no clock (minutes=0): its rounds end on `committed`, never before each writer's
    second commit to each table."""
    writers = [
        OurWriter(w, {name: Ledger(SPECS[name], random.Random(w)) for name in SPECS}, "", {}, "", 0)
        for w in (0, 1)
    ]
    assert committed(writers, 0) and not committed(writers, 1)
    for writer in writers:
        writer.commits.update({name: 2 for name in SPECS})
    writers[1].commits[next(iter(SPECS))] = 1  # one table of one writer lags
    assert committed(writers, 1) and not committed(writers, 2)
    writers[1].commits[next(iter(SPECS))] += 1
    assert committed(writers, 2)


def test_writers_asked_to_hold_together_start_no_batch_while_another_is_waited_for() -> None:
    """A checkpoint asks every writer to hold before waiting for any: a writer whose batch ends
    while another's goes on starts no next batch (the checkpoint would wait for that one too)."""
    gates, entered, left = ([threading.Event(), threading.Event()] for _ in range(3))

    class Gated(WriterLoop):
        def __init__(self, index: int) -> None:
            super().__init__(f"gated-{index}", ["t"])
            self.index, self.steps = index, 0

        def step(self, name: str) -> None:
            self.steps += 1
            entered[self.index].set()
            gates[self.index].wait()
            self.commits[name] += 1
            left[self.index].set()

    first, second = writers = [Gated(0), Gated(1)]
    for writer in writers:
        writer.start()
    for event in entered:
        event.wait()  # both in their first batch
    for writer in writers:
        writer.ask_to_hold()
    gates[1].set()  # the second writer's batch ends while the first's goes on
    left[1].wait()
    gates[0].set()
    first.hold()  # the first writer's batch ends; the second, asked, started no other meanwhile
    second.hold()
    assert (first.steps, second.steps) == (1, 1)
    for writer in writers:
        writer.release()
        writer.ask_to_stop()
    for writer in writers:
        writer.stop()
    assert not first.is_alive() and not second.is_alive()


def test_a_batch_a_rival_compaction_made_visible_is_whole_from_the_latest_snapshot_after_its_write(
    spark_session, tmp_path
) -> None:
    """Deletion-vector table: a rival compaction (the compact job, run just before the write's own
    compaction commits) compacts the batch's APPEND first; the write's compaction then finds nothing
    left and the last snapshot its record names is the APPEND, where the batch is invisible. The
    ledger's bound is the latest snapshot after the write, so every snapshot reads in order."""
    name, warehouse = "dv_lookup", str(tmp_path / "wh")
    path = create_tables(warehouse, {}, (name,))[name]
    ledger = Ledger(SPECS[name], random.Random(5), writer=0, deletes=False)
    writer = OurWriter(0, {name: ledger}, warehouse, {}, str(tmp_path), 0)
    rivals: list[str] = []

    def rival_compacts_first(step: str) -> None:
        if not rivals:  # the rival passes the same step: it commits
            rivals.append(step)
            compact_table(spark_session, Table(FileIO.for_path(path), path), CompactRequest())

    with rival_at_step("compact:after-files-written", rival_compacts_first):
        assert writer.commit_batch(ledger, name, ledger.new_batch())
    table = Table(FileIO.for_path(path), path)
    kinds = [table.snapshot_manager.snapshot(i).commit_kind for i in range(1, latest_id(path) + 1)]
    # the write's APPEND and the rival's compaction; the write's own compaction committed nothing
    assert rivals and kinds == ["APPEND", "COMPACT"]
    assert our_read(path, snapshot_id=1) == []  # the APPEND: the batch is at level 0, unseen
    for snapshot_id in (1, 2):
        rows = our_read(path, snapshot_id=snapshot_id)
        assert check_reads([ledger], name, "snapshot", snapshot_id, rows, False).problems == []


@contextmanager
def rival_at_step(step: str, action: Callable[[str], None]) -> Iterator[None]:
    """Run `action` where a job passes `crash_point(step)` (a named step of its own), in this process."""
    saved = os.environ.get(crash_points.CRASH_ENV)
    os.environ[crash_points.CRASH_ENV] = step
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(action)
    try:
        yield
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        if saved is None:
            os.environ.pop(crash_points.CRASH_ENV, None)
        else:
            os.environ[crash_points.CRASH_ENV] = saved


def ledger_rows(ledger: Ledger, marker: int) -> list[dict]:
    """The rows the ledger expects after batch `marker`, as a reader returns them."""
    return [dict(zip(ledger.spec.names, row, strict=True)) for row in ledger.rows_at(marker).elements()]
