"""A `df.write.format("paimon")` killed mid-write (SIGKILL to its whole process tree: the driver, its
JVM and the Python workers, as when a machine or container dies) leaves the table as it was: no new
snapshot, our reader and Paimon's Java read the rows from before, and remove-orphan-files finds
exactly the files the dead write left (each carrying the write's id, none named by a snapshot), and
removes them, after which Java still reads the table."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.__main__ import main
from jobs.source.writer import make_writer
from paimon_format.scan.snapshot_scan import live_entries, resolve_snapshot
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.paths import DATA_FILE_RE
from paimon_format.table import Table
from tests.java.oracle import sort_key
from tests.support.planted_files import files_on_disk

pytestmark = [pytest.mark.java, pytest.mark.slow]

REPO = str(Path(__file__).resolve().parents[2])
SCHEMA = StructType(
    [StructField("k", LongType()), StructField("dt", StringType()), StructField("v", StringType())]
)
SEED = [{"k": 1, "dt": "d0", "v": "a"}, {"k": 2, "dt": "d1", "v": "b"}]
DEADLINE_S = 240  # the child starts its own JVM and SparkSession on a busy machine


def _seed(warehouse: str) -> None:
    """The table (primary key, 2 buckets, a file per written batch) with two rows, one snapshot."""
    options = {
        "warehouse": warehouse,
        "path": "db.t",
        "primary-key": "dt,k",
        "partition": "dt",
        "bucket": "2",
        "target-file-size": "1 b",
    }
    writer = make_writer(options, SCHEMA, False)
    writer.commit([writer.write(iter([pa.RecordBatch.from_pylist(SEED, schema=to_arrow_schema(SCHEMA))]))])


def _poll(condition: Callable[[], bool], what: str, child: subprocess.Popen | None, log: Path) -> None:
    """Wait for `condition` (checked every 0.2 s) until the deadline; a child that exits fails it."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if child is not None and child.poll() is not None:
            pytest.fail(f"the writer exited ({child.returncode}) before {what}: {log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {DEADLINE_S} s: {log.read_text()[-3000:]}")
        time.sleep(0.2)


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process (Linux's /proc)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            except OSError:  # it ended meanwhile
                continue
            found[int(entry)] = (int(fields[1]), fields[0])
    return found


def _kill_tree(root: int) -> set[int]:
    """SIGKILL `root` and every process below it at one instant: each is stopped first (a stopped
    process forks no more), the tree read again until no new one appears, then all are killed. (The
    process group is not enough: PySpark's worker daemon runs in a group of its own.)"""
    stopped: set[int] = set()
    while True:
        processes = _processes()
        tree, grew = {root}, True
        while grew:
            below = {pid for pid, (parent, _) in processes.items() if parent in tree} - tree
            tree, grew = tree | below, bool(below)
        new = tree - stopped
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return stopped


def _alive(pids: set[int]) -> bool:
    """Whether one of `pids` still runs (zombies waiting for their reaper do not count)."""
    processes = _processes()
    return any(pid in processes and processes[pid][1] != "Z" for pid in pids)


def _rows(root: str) -> list[dict[str, Any]]:
    table = Table(FileIO.for_path(root), root)
    snapshot = resolve_snapshot(table)
    batches = [b for split in plan_splits(table, snapshot) for b in read_split(table, split)]
    return sorted(pa.Table.from_batches(batches).select(["k", "dt", "v"]).to_pylist(), key=sort_key)


def _orphans(tmp_path: Path, warehouse: str, name: str, *flags: str) -> set[str]:
    """remove-orphan-files through the CLI (older_than 0 ms, forced): its candidates' relative paths."""
    listing = tmp_path / f"candidates-{name}"
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        f"warehouse: {warehouse}\ntable: db.t\nolder_than: 0 ms\nforce: true\ncandidates_output: {listing}\n"
    )
    output = tmp_path / f"{name}.json"
    code = main(["remove-orphan-files", "--config", str(config), *flags, "--output", str(output)])
    assert code == 0, json.loads(output.read_text()).get("error")
    return {
        row["path"]
        for part in listing.glob("part-*.csv")
        for row in csv.DictReader(part.open(encoding="utf-8"))
    }


def test_a_write_killed_mid_way_leaves_the_table_as_it_was(spark_session, java_paimon, tmp_path):
    warehouse = str(tmp_path / "wh")
    root = f"{warehouse}/db.db/t"
    _seed(warehouse)
    before = files_on_disk(root)
    java_before = java_paimon.read(root)
    log = tmp_path / "writer.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.source.dying_write", warehouse],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": REPO},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _poll(
            lambda: any(DATA_FILE_RE.fullmatch(Path(f).name) for f in files_on_disk(root) - before),
            "data file",
            child,
            log,
        )
    finally:
        killed = _kill_tree(child.pid)
        child.wait()
        _poll(lambda: not _alive(killed), "end of the writer's processes", None, log)

    left = files_on_disk(root) - before
    assert left and before <= files_on_disk(root)
    assert all(DATA_FILE_RE.fullmatch(Path(f).name) for f in left), left
    assert len({tuple(Path(f).name.split("-")[1:4]) for f in left}) == 1  # one write id in every name
    table = Table(FileIO.for_path(root), root)
    assert table.snapshot_manager.snapshot_ids() == [1]
    named = {
        f"{table.bucket_relpath(e.partition, e.bucket)}/{e.file.file_name}"
        for e in live_entries(table, table.snapshot_manager.latest())
    }
    assert left.isdisjoint(named)
    assert _rows(root) == sorted(SEED, key=sort_key)
    assert java_paimon.read(root) == java_before

    assert _orphans(tmp_path, warehouse, "dry", "--dry-run") == left
    assert files_on_disk(root) == before | left
    assert _orphans(tmp_path, warehouse, "real") == left
    assert files_on_disk(root) == before
    assert java_paimon.read(root) == java_before
    assert _rows(root) == sorted(SEED, key=sort_key)
