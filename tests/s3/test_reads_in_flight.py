"""The deletion jobs' readers keep many reads in flight on S3 (issue #26), and read the same either way.

What is measured: how many `read_bytes` calls run at once, counted by a FileIO that every
`FileIO.for_path` of this process makes while a gauge is active (`install_wrapper`, as fault
injection hooks in), over a table on moto behind the project's proxy. No timing decides anything:
with `io_parallelism` 8 a manifest read waits (`ReadGauge.gate`) until a second manifest read is in
flight, which reads one after another never do (the wait then runs out and the manifest peak stays
1, failing the test); with `io_parallelism` 1 nothing waits and no two reads of any kind may
overlap. Both runs must find exactly the same candidates and referenced set, and read each manifest
and list as often as each other (counted at the proxy).
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.maintenance.references import referenced_files
from paimon_format.storage import in_flight
from paimon_format.storage.fileio import FileIO, install_wrapper
from paimon_format.table import Table
from tests.s3.proxy import ThrottlingProxy
from tests.support.cli_runs import run_job
from tests.support.table_states import IDENTIFIER, append_rows, batch, build_sample_table, table_root

GATE_S = 60.0  # how long the first manifest read waits for a second one (only reached when serial)
TWO_DAYS_S = 2 * 24 * 3600
FUTURE = "2100-01-01 00:00:00"


def is_manifest(path: str) -> bool:
    """A data or changelog manifest (not a manifest list, not an index manifest)."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("manifest-") and not name.startswith("manifest-list-")


class ReadGauge:
    """Reads in flight at once over every gauged FileIO: all of them (`peak`) and manifests alone
    (`manifest_peak`). With `gate`, a manifest read waits until another manifest read is in flight
    (once that has happened, nothing waits), so readers that overlap their reads always do."""

    def __init__(self, gate: bool) -> None:
        self.gate = gate
        self.peak = self.manifest_peak = 0
        self._in_flight = self._manifests_in_flight = 0
        self._lock = threading.Lock()
        self._overlapped = threading.Event()

    def read(self, path: str, read: Callable[[str], bytes]) -> bytes:
        manifest = is_manifest(path)
        with self._lock:
            self._in_flight += 1
            self._manifests_in_flight += manifest
            self.peak = max(self.peak, self._in_flight)
            self.manifest_peak = max(self.manifest_peak, self._manifests_in_flight)
            if self._manifests_in_flight > 1:
                self._overlapped.set()
        try:
            if self.gate and manifest:
                self._overlapped.wait(GATE_S)
            return read(path)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._manifests_in_flight -= manifest


_ACTIVE: list[ReadGauge] = []


class GaugedFileIO(FileIO):
    """A plain FileIO whose reads the active gauge counts."""

    def read_bytes(self, path: str) -> bytes:
        if not _ACTIVE:
            return super().read_bytes(path)
        return _ACTIVE[-1].read(path, super().read_bytes)


def _gauge_wrapper(file_io: FileIO) -> FileIO:
    if not _ACTIVE or type(file_io) is not FileIO:
        return file_io
    return GaugedFileIO(
        file_io.protocol,
        file_io.storage_options,
        file_io.allow_unsafe_overwrite_commit,
        file_io.configured_parallelism,
    )


@contextmanager
def gauged(gate: bool) -> Iterator[ReadGauge]:
    """Every FileIO made meanwhile counts its reads in the yielded gauge."""
    install_wrapper(_gauge_wrapper)  # once per process; a no-op while no gauge is active
    gauge = ReadGauge(gate)
    _ACTIVE.append(gauge)
    try:
        yield gauge
    finally:
        _ACTIVE.remove(gauge)


@pytest.fixture(autouse=True)
def fresh_throttle_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throttles another test provoked in this process must not narrow these pools."""
    monkeypatch.setattr(in_flight, "_WINDOW", in_flight._Window())


def build_table(warehouse: str, options: dict) -> Table:
    """A partitioned append table of 14 snapshots, each with a delta manifest of its own, two of them
    overwrites (DELETE entries, so an expiry reads its deltas), and a tag on snapshot 2."""
    table = build_sample_table(warehouse, commits=5, rows_per_commit=6, storage_options=options)
    for round_ in range(2):
        written = write_table_files(
            table.file_io, table.path, table.schema, batch(1000 * (round_ + 1), 6), 5000
        )
        SnapshotCommit(table).overwrite([CommitMessage(p, b, -1, files) for p, b, files in written])
        for i in range(3):
            append_rows(table, batch(1000 * (round_ + 1) + 100 + 10 * i, 4))
    assert table.snapshot_manager.latest_id() == 13
    return table


@pytest.fixture(scope="module")
def shared_table(moto_s3, s3_proxy) -> tuple[str, dict, ThrottlingProxy]:
    """(warehouse, storage options, proxy) of one `build_table` for this module: every test here
    only reads it (dry runs), so it is written once."""
    _, bucket, _ = moto_s3
    options = {"endpoint_url": s3_proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    warehouse = f"s3://{bucket}/t-{uuid.uuid4().hex[:12]}/wh"
    build_table(warehouse, options)
    return warehouse, options, s3_proxy


def manifest_reads(proxy: ThrottlingProxy) -> Counter[str]:
    """How often each manifest and manifest list was fetched (GETs of a key, not listings)."""
    return Counter(
        r.path for r in proxy.requests if r.method == "GET" and "/manifest/" in r.path and not r.query
    )


def job_config(warehouse: str, options: dict, parallelism: int, **keys: object) -> dict:
    return {
        "warehouse": warehouse,
        "table": IDENTIFIER,
        "storage_options": options,
        "io_parallelism": parallelism,
        "local": "always",  # in this process, where the gauge sees every read
        **keys,
    }


def run_gauged(
    tmp_path, capsys, proxy: ThrottlingProxy, operation: str, config: dict, *extra: str
) -> tuple[dict, ReadGauge, Counter[str]]:
    proxy.reset()
    with gauged(gate=config["io_parallelism"] > 1) as gauge:
        code, record = run_job(tmp_path, operation, config, capsys, *extra)
    assert code == 0, record.get("error")
    return record, gauge, manifest_reads(proxy)


def test_remove_orphan_files_reads_manifests_in_flight_and_finds_the_same_orphans(
    shared_table, age_s3_objects, tmp_path, capsys
):
    warehouse, options, proxy = shared_table
    table = Table(FileIO.for_path(table_root(warehouse), options), table_root(warehouse))
    table.file_io.write_bytes(f"{table.path}/dt=2024-01-01/bucket-0/data-{uuid.uuid4()}-0.parquet", b"x")
    table.file_io.write_bytes(f"{table.path}/manifest/manifest-{uuid.uuid4()}-0", b"x")
    everything = [status.path for status in table.file_io.list_files_recursive(table.path)]
    age_s3_objects(everything, TWO_DAYS_S)

    serial, serial_gauge, serial_reads = run_gauged(
        tmp_path, capsys, proxy, "remove-orphan-files", job_config(warehouse, options, 1), "--dry-run"
    )
    parallel, parallel_gauge, parallel_reads = run_gauged(
        tmp_path, capsys, proxy, "remove-orphan-files", job_config(warehouse, options, 8), "--dry-run"
    )

    assert serial["details"]["executed_in"] == parallel["details"]["executed_in"] == "driver"
    assert serial["counts"]["orphan_files"] == 2
    assert parallel["counts"] == serial["counts"]
    assert parallel.get("samples") == serial.get("samples")
    assert serial_gauge.peak == 1
    assert parallel_gauge.manifest_peak >= 2
    assert parallel_reads == serial_reads  # the same manifests and lists, as often: nothing read twice
    assert sum(1 for path in serial_reads if "/manifest-list-" not in path) >= 13


def test_expire_snapshots_dry_run_reads_in_flight_and_plans_the_same_candidates(
    shared_table, tmp_path, capsys
):
    warehouse, options, proxy = shared_table
    keys = {"retain_min": 2, "retain_max": 100, "older_than": FUTURE}

    serial, serial_gauge, serial_reads = run_gauged(
        tmp_path, capsys, proxy, "expire-snapshots", job_config(warehouse, options, 1, **keys), "--dry-run"
    )
    parallel, parallel_gauge, parallel_reads = run_gauged(
        tmp_path, capsys, proxy, "expire-snapshots", job_config(warehouse, options, 8, **keys), "--dry-run"
    )

    assert serial["details"]["executed_in"] == parallel["details"]["executed_in"] == "driver"
    assert serial["counts"]["snapshots_to_expire"] == 11
    assert serial["counts"]["files_to_delete"] > 0
    assert parallel["counts"] == serial["counts"]
    assert parallel.get("bytes") == serial.get("bytes")
    assert parallel.get("samples") == serial.get("samples")
    assert serial_gauge.peak == 1
    assert parallel_gauge.manifest_peak >= 2
    assert parallel_reads == serial_reads


def test_referenced_files_in_one_process_reads_in_flight_and_finds_the_same_set(shared_table):
    warehouse, options, proxy = shared_table
    root = table_root(warehouse)

    found = {}
    for parallelism in (1, 8):
        proxy.reset()
        with gauged(gate=parallelism > 1) as gauge:
            table = Table(FileIO.for_path(root, options, io_parallelism=parallelism), root)
            found[parallelism] = (referenced_files(table), gauge, manifest_reads(proxy))

    (serial, serial_gauge, serial_reads), (parallel, parallel_gauge, parallel_reads) = found[1], found[8]
    assert parallel == serial
    assert sum(1 for path in serial if path.startswith("dt=")) >= 13
    assert serial_gauge.peak == 1
    assert parallel_gauge.manifest_peak >= 2
    assert parallel_reads == serial_reads
