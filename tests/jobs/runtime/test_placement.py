"""Driver or Spark by requests, latency and rows (`jobs.runtime.placement`), without Spark.

The estimate is a pure function of what sizing found; these tests pin the decisions it must make:
a latency-bound table with few requests in flight goes to Spark, a table of 200,000 files on local
disk stays in the driver, Spark's parallelism comes from the configuration, and the latency is the
median of the storage calls sizing made (timed on a clock the test drives, never on wall time).
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.deletion.prefix_listing import estimated_objects
from jobs.runtime import placement
from jobs.runtime.local_exec import DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILES, TableSize, measure, work_of
from jobs.runtime.placement import (
    PROBE_SAMPLES,
    SPARK_START_S,
    LatencyProbe,
    Work,
    estimate,
    listing_pages,
    spark_parallelism,
)
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.table_states import build_sample_table


@pytest.fixture(autouse=True)
def no_running_spark(monkeypatch):
    """The decisions of a plain process: no SparkContext running, not under spark-submit."""
    monkeypatch.setattr(placement, "running_context", lambda: None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)


def orphan_table(files: int, manifests: int, snapshots: int = 10) -> TableSize:
    """What sizing finds on `scripts/bench_orphans.py`'s table: every file in the latest snapshot."""
    return TableSize(
        manifest_entries=files, live_files=files, roots=snapshots, branches=1, manifests=manifests
    )


def test_a_latency_bound_run_goes_to_spark_and_a_cpu_light_one_stays_in_the_driver():
    work = Work(requests=2_000, rows=20_000)
    slow = estimate(work, latency_s=0.03, io_parallelism=4, parallelism=32, start_s=SPARK_START_S)
    assert not slow.driver_faster and slow.reason().startswith("faster on Spark")
    assert slow.driver_s == pytest.approx(2_000 * 0.03 / 4 + 20_000 * placement.DRIVER_S_PER_ROW, abs=1e-3)
    wide = estimate(work, latency_s=0.03, io_parallelism=64, parallelism=32, start_s=SPARK_START_S)
    assert wide.driver_faster, "64 requests in flight: 15 s of waiting shrinks to 0.9 s"


def test_orphan_cleaning_of_200000_local_files_fits_the_defaults_and_is_faster_in_the_driver():
    size = orphan_table(200_000, 200)
    assert size.fits(DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILES)
    work = work_of(size, "size", lists_files=True, protocol="file")
    assert work == Work(requests=3 * 10 + 200 + 1, rows=400_000)
    guess = estimate(work, latency_s=0.00005, io_parallelism=4, parallelism=2, start_s=SPARK_START_S)
    assert guess.driver_faster
    too_big = orphan_table(1_000_000, 1000)
    assert not too_big.fits(DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILES)


def test_work_follows_the_bound_the_run_fits_by():
    size = TableSize(
        manifest_entries=1_000_000,
        live_files=1_000_000,
        roots=10,
        branches=1,
        manifests=1000,
        scan_entries=10_000,
        scan_manifests=10,
    )
    assert work_of(size, "scan", False, "s3") == Work(requests=13, rows=10_000)
    assert work_of(size, "names", False, "s3") == Work(requests=1030, rows=10 * 1003)
    # an object store's flat listing: 1,000 keys a page
    assert work_of(size, "size", True, "s3") == Work(requests=1030 + 1000, rows=2_000_000)
    assert listing_pages(1_000_001, "s3") == 1001 and listing_pages(0, "gs") == 1


@pytest.mark.parametrize(
    "conf, expected",
    [
        (None, 2),  # a plain run's local[2]
        ({"spark.master": "local[4]"}, 4),
        ({"spark.master": "local"}, 1),
        ({"spark.default.parallelism": "12", "spark.master": "local[4]"}, 12),
        ({"spark.master": "yarn", "spark.executor.instances": 5, "spark.executor.cores": 4}, 20),
        ({"spark.master": "yarn"}, placement.CLUSTER_PARALLELISM),
    ],
)
def test_spark_parallelism_comes_from_the_configuration(conf: Any, expected: int):
    assert spark_parallelism(conf) == expected


def test_under_spark_submit_the_submitted_master_counts(monkeypatch):
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master local[3] pyspark-shell")
    assert spark_parallelism(None) == 3
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "")
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4040")
    assert spark_parallelism(None) == placement.CLUSTER_PARALLELISM


class SteppedClock:
    """A clock that each storage call moves on by the next step (seconds)."""

    def __init__(self, steps: list[float]) -> None:
        self.now = 0.0
        self.steps = iter(steps)

    def __call__(self) -> float:
        return self.now

    def advance(self) -> None:
        self.now += next(self.steps, 0.001)


def test_the_latency_is_the_median_of_the_first_storage_calls(tmp_path):
    clock = SteppedClock([0.5, 0.02, 0.03, 0.02, 0.04])  # the first call pays a connection set-up
    probe = LatencyProbe(clock)
    inner = FileIO.for_path(str(tmp_path))

    class Slow(FileIO):
        def read_bytes(self, path: str) -> bytes:
            clock.advance()
            return inner.read_bytes(path)

    path = str(tmp_path / "f")
    inner.write_bytes(path, b"x")
    timed = probe.wrap(Slow("file"))
    assert [timed.read_bytes(path) for _ in range(5)] == [b"x"] * 5
    assert probe.samples == pytest.approx([0.5, 0.02, 0.03, 0.02, 0.04])
    assert probe.latency_s == pytest.approx(0.03)
    for _ in range(2 * PROBE_SAMPLES):
        timed.read_bytes(path)
    assert len(probe.samples) == PROBE_SAMPLES  # only the first calls are timed


def test_sizing_a_table_times_its_own_reads_and_finds_the_same_size(tmp_path):
    table = build_sample_table(str(tmp_path / "wh"), commits=3)
    probe = LatencyProbe()
    assert measure(table, probe=probe) == measure(table)
    assert len(probe.samples) >= 5  # LATEST hint, snapshot, lists, directory listings


def test_sizing_after_the_open_check_reads_no_snapshot_and_leaves_it_for_the_plan(tmp_path):
    """Sizing takes the latest snapshot the open check read (a round trip fewer on an object store)
    and leaves it handed over: the job's plan reads no second time either. The orphan job's estimate
    of the objects to list then takes it (and its lists from the handle's cache) with no request."""
    sample = build_sample_table(str(tmp_path / "wh"), commits=3)
    reads: list[str] = []

    class Counting(FileIO):
        def read_bytes(self, path: str) -> bytes:
            reads.append(path.rsplit("/", 1)[-1])
            return super().read_bytes(path)

    table = Table(Counting("file"), sample.path)
    table.check_metadata()
    reads.clear()
    size = measure(table, probe=LatencyProbe())
    assert size == measure(Table(FileIO.for_path(sample.path), sample.path))
    assert not [name for name in reads if name.startswith("snapshot-") or name == "LATEST"]
    assert table.snapshot_manager.handed_over() is not None
    reads.clear()
    assert estimated_objects(table) == size.live_files + size.manifests
    assert reads == []  # the latest and both of its lists were read already
    assert table.snapshot_manager.handed_over() is None  # taken: the roots after the listing look afresh
