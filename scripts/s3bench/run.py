"""One job run on the benchmark's store, and the row it prints.

A run: a fresh copy of the table's bucket for a destructive job, a fresh ledger and the latency and
503 share asked for, the job as a process of its own (`python -m jobs <op> --config F`, as a
scheduler starts it; its run record says where it ran and how long it took), then the ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from scripts.s3bench.jobs import Facts, Job, fewest_of, round_trips_of
from scripts.s3bench.store import AWS_ENV, REPO, Store

SOURCE_BUCKETS = {
    "maintenance": "src-maintenance",
    "append": "src-append",
    "pk": "src-pk",
    "write": "src-empty",
}
TABLES = {"maintenance": "db.t", "append": "db.append", "pk": "db.pk", "write": "db.w"}
_RUNS = count(1)


@dataclass
class Run:
    latency_ms: float
    wall_s: float = (
        0.0  # the job alone (its run record's duration), Spark's start included when it used Spark
    )
    process_s: float = 0.0  # the whole process, Python's start and imports included
    executed_in: str = "-"  # the run record's details.executed_in; "-" when the job does not say
    ledger: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)
    reported_throttled: int | None = None  # the run record's details.storage.throttled_requests
    peak_rss_mib: int | None = None  # the run record's details.driver_peak_rss_mib
    chain: int = 0  # the longest chain of requests each sent after the one before it was answered
    error: str | None = None


def run_job(store: Store, job: Job, latency_ms: float, throttle: float, workdir: Path) -> Run:
    """Run `job` once at `latency_ms` (and `throttle`, the share answered 503) on a copy of its table."""
    source = SOURCE_BUCKETS[job.table]
    bucket = f"run-{next(_RUNS)}" if job.destructive else source
    if job.destructive:
        store.copy(source, bucket)
    config = {
        "warehouse": f"s3://{bucket}/wh",
        "table": TABLES[job.table],
        "storage_options": store.storage_options(),
        **job.settings,
    }
    path = workdir / f"{job.operation}.yaml"
    path.write_text(yaml.safe_dump(config))
    if job.operation == "read_table":
        command = [sys.executable, "-m", "scripts.s3bench.read_job", "--config", str(path)]
    else:
        command = [sys.executable, "-m", "jobs", job.operation, "--config", str(path), "--quiet"]
        command += ["--log-level", "WARNING"] + (["--dry-run"] if job.dry_run else [])
    env = {
        **os.environ,
        **AWS_ENV,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    run = Run(latency_ms)
    store.reset(latency_ms, throttle)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    run.process_s = time.perf_counter() - start
    run.ledger = store.control("ledger", {"requests": 1})
    run.chain = request_chain(run.ledger.pop("request_list", []), latency_ms / 1000)
    if job.destructive:
        store.drop(bucket)
    record = parse_record(done.stdout)
    run.wall_s = float(record.get("duration_s") or run.process_s)
    run.executed_in = str(record.get("details", {}).get("executed_in", "-"))
    run.counts = dict(record.get("counts", {}))
    rss = record.get("details", {}).get("driver_peak_rss_mib")
    run.peak_rss_mib = int(rss) if rss is not None else None
    storage = record.get("details", {}).get("storage")
    if isinstance(storage, dict) and "throttled_requests" in storage:
        run.reported_throttled = int(storage["throttled_requests"])
    if done.returncode != 0:
        log_path = workdir / f"{job.name.replace(' ', '-')}.stderr"
        log_path.write_text(done.stderr)  # a Spark failure's cause is pages up in the log: keep it all
        last_line = (done.stderr.strip().splitlines() or ["?"])[-1]
        message = f"(log {log_path}) {record.get('error') or record.get('message') or last_line}"
        run.error = f"exit {done.returncode}: {' '.join(str(message).split())}"[:400]
    return run


def request_chain(requests: list[dict[str, Any]], latency_s: float) -> int:
    """The longest chain of requests in which each was sent after the one before it was answered:
    the round trips a run waited for one after another, whatever its requests in flight (a request
    arrived `latency_s` before it went to moto, and was answered when moto was done)."""
    if not requests:
        return 0
    arrived = np.array([r["upstream_start"] - latency_s for r in requests])
    order = np.argsort(arrived, kind="stable")
    arrived = arrived[order]
    answered = np.array([requests[i]["upstream_start"] + requests[i]["upstream_seconds"] for i in order])
    depth = np.zeros(len(order), dtype=np.int64)
    for index in range(len(order)):
        before = depth[:index][answered[:index] <= arrived[index] + 1e-4]
        depth[index] = 1 + (int(before.max()) if before.size else 0)
    return int(depth.max())


def parse_record(stdout: str) -> dict[str, Any]:
    """The run record a job printed (indented JSON, the whole of stdout), or {} when there is none."""
    try:
        record = json.loads(stdout)
    except json.JSONDecodeError:
        return {}
    return record if isinstance(record, dict) else {}


# Counters of how a run went about it (its plan's shape, which may follow the latency it measured),
# not of what it did: left out when two runs' results are compared.
_HOW_WORDS = (
    "listing",
    "_read",
    "pages",
    "ranges",
    "waves",
    "vanished",
    "throttl",
    "request",
    "batch",
    "task",
)


def same_result(a: Run, b: Run) -> bool:
    """Whether two runs of a job report the same results (files deleted, orphans found, ...)."""

    def kept(counts: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in counts.items() if not any(word in k for word in _HOW_WORDS)}

    return kept(a.counts) == kept(b.counts)


HEADER = (
    f"{'job':<32} {'ran in':<7} {'wall s':>7} {'@0 s':>6} {'reqs':>6} {'GET':>5} {'HEAD':>5} {'LIST':>5} "
    f"{'PUT':>5} {'DEL':>4} {'DelO':>4} {'oth':>4} {'MiB in':>7} {'MiB out':>7} {'peak':>4} {'thr p/r':>9} "
    f"{'fewest':>6} {'req/few':>7} {'floor s':>7} {'wall/floor':>10} {'added s':>7} {'add/floor':>9} "
    f"{'chain':>5} {'trips':>5} "
    f"{'moto ms':>7} "
    f"{'moto s':>6} {'RSS MiB':>7} {'load':>5}"
)


def row(job: Job, facts: Facts, run: Run, zero: Run | None, in_flight: int) -> str:
    """One line: the run at the benchmark's latency, beside the same job at latency 0."""
    if run.error:
        return f"{job.name:<32} FAILED {run.error}"
    ledger, kinds = run.ledger, run.ledger["by_kind"]
    fewest = fewest_of(job, facts)
    # requests in flight bound the floor, and so does the chain of requests that wait for each other
    floor = max(fewest / in_flight, round_trips_of(job, facts)) * run.latency_ms / 1000
    requests = ledger["requests"]
    zero_wall = f"{zero.wall_s:6.2f}" if zero and not zero.error else "     -"
    moto = zero.ledger if zero and not zero.error else ledger
    moto_ms = 1000 * moto["upstream_busy_s"] / max(moto["requests"], 1)
    ratio = f"{run.wall_s / floor:10.1f}" if floor else "         -"
    # what the latency added: this run's wall minus the same job's at latency 0 (moto and CPU alike)
    added = f"{run.wall_s - zero.wall_s:7.2f}" if zero and not zero.error else "      -"
    # the latency's share against the floor: moto serves requests one at a time at a few ms each,
    # so its own time (the @0 run) is left out of what latency in flight should cost
    added_ratio = (
        f"{(run.wall_s - zero.wall_s) / floor:9.1f}" if zero and not zero.error and floor else "        -"
    )
    rss = f"{run.peak_rss_mib:7d}" if run.peak_rss_mib is not None else "      -"
    busy = ledger["upstream_busy_s"]  # moto's busy time in this run
    reported = "-" if run.reported_throttled is None else str(run.reported_throttled)
    throttled = f"{ledger['throttled']}/{reported}"  # the proxy's 503s / what the run record counted
    line = (
        f"{job.name:<32} {run.executed_in[:7]:<7} {run.wall_s:7.2f} {zero_wall} {requests:6d} "
        f"{kinds['GET']:5d} {kinds['HEAD']:5d} {kinds['LIST']:5d} {kinds['PUT']:5d} {kinds['DELETE']:4d} "
        f"{kinds['DeleteObjects']:4d} {kinds['OTHER']:4d} {ledger['bytes_in'] / 2**20:7.2f} "
        f"{ledger['bytes_out'] / 2**20:7.2f} {ledger['peak_in_flight']:4d} {throttled:>9} "
        f"{fewest:6d} {requests / fewest:7.2f} {floor:7.2f} {ratio} {added} {added_ratio} "
        f"{run.chain:5d} {round_trips_of(job, facts):5d} "
        f"{moto_ms:7.2f} {busy:6.2f} {rss} {os.getloadavg()[0]:5.2f}"
    )
    if zero is not None and not zero.error and not same_result(run, zero):
        line += f"\n{'':<32} results differ from the latency-0 run: {run.counts} vs {zero.counts}"
    return line
