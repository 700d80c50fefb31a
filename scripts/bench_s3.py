"""Object-storage benchmark: every job on moto's S3 behind a proxy that adds a latency to every request,
with the request bill (kinds, bytes, peak in flight, 503s) against the fewest requests the job needs.

    .venv/bin/python scripts/bench_s3.py                                         # 20,000 objects, 30 ms
    .venv/bin/python scripts/bench_s3.py --objects 100000 --manifests 1000       # the issue's size
    .venv/bin/python scripts/bench_s3.py --throttle 0.01                         # 1% answered 503
    .venv/bin/python scripts/bench_s3.py --jobs expire-snapshots,compact --spark # some jobs, + Spark path
    .venv/bin/python scripts/bench_s3.py --objects 100000 --manifests 1000 --repeat 3  # fastest of 3 each
    .venv/bin/python scripts/bench_s3.py --slope-ms 150        # + the round trips each job paid (slope)

Builds the tables once on local disk (scripts/s3bench/tables.py: the orphan benchmark's table of 100
daily partitions x 4 buckets, `--manifests` manifests and `--objects` objects in all, 10 snapshots, 5
tags, 1% planted orphans; small append and primary-key tables with real Parquet data; Parquet files
for the write job), uploads them straight to moto, which runs with the proxy in a process of its own
(`python -m tests.s3.proxy`), and runs each job as `python -m jobs <op>` through the proxy, on a fresh
copy of its table when the job changes it: first at latency 0 (moto's own cost), then at
`--latency-ms`. One row per job:

  ran in      the run record's details.executed_in (driver or Spark)
  wall s      the job alone at --latency-ms (its run record's duration; Spark's start-up included
              when it used Spark); @0 s: the same at latency 0
  reqs ...    requests by kind (GET, HEAD, LIST, PUT, DELETE, DeleteObjects, other) at --latency-ms,
              MiB in (request bodies) and out (response bodies), peak in flight, throttled (503:
              the proxy's count / the run record's details.storage.throttled_requests)
  fewest      the requests the job needs at the fewest (scripts/s3bench/jobs.py says how, per job)
  floor s     the larger of fewest x latency / the in-flight limit (FileIO.io_parallelism for s3)
              and round trips x latency: the chain of requests that must wait for each other
              (a list before the manifests it names; scripts/s3bench/jobs.py gives each job's chain)
  added s     wall s - @0 s: what the latency added to the job (the floor is what it must add at least);
              with --repeat N each job runs N times at each latency, alternately, and the fastest
              run of each counts (a shared machine's noise only ever adds to a wall time)
  add/floor   added s / floor s: how close the latency's cost comes to the floor, moto's own time
              (the @0 run: it serves requests one at a time, a few ms each) left out
  chain       the longest chain of requests each sent after the one before it was answered (from
              the proxy's timings): the round trips the run waited for one after another; trips:
              the chain a correct run needs at least (scripts/s3bench/jobs.py), the floor's part
  moto ms     moto's own time per request (how long moto had a request at all, at latency 0, over
              the requests); moto s: how long moto was busy during the run at --latency-ms
  RSS MiB     the job process's peak resident memory (details.driver_peak_rss_mib)
  load        the 1-minute load average after the run
  slope       with --slope-ms: the least-squares slope of the job's wall over the latencies (0, --latency-ms
              and these): the round trips it waited one after another, against the floor's round trips
              (floor s / latency); moto's own time does not move with the latency, so it is out of the slope

A job that fails prints its error in its row; the script goes on and exits 1 at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from paimon_format.storage.fileio import FileIO  # noqa: E402
from scripts.s3bench import tables  # noqa: E402
from scripts.s3bench.jobs import Facts, Job, all_jobs, fewest_of, round_trips_of, with_spark  # noqa: E402
from scripts.s3bench.run import HEADER, SOURCE_BUCKETS, Run, row, run_job  # noqa: E402
from scripts.s3bench.store import Store  # noqa: E402


def build_and_upload(store: Store, workdir: Path, objects: int, manifests: int) -> Facts:
    """Every table built locally, then uploaded to its own bucket; their facts."""
    start = time.perf_counter()
    warehouse = workdir / "wh"
    facts: Facts = {
        "maintenance": tables.build_maintenance(str(warehouse / "db.db" / "t"), objects, manifests),
        "append": tables.build_append(str(warehouse / "db.db" / "append"), 100_000, 40),
        "pk": tables.build_pk(str(warehouse / "db.db" / "pk"), 100_000, 4, 4),
        "incoming": tables.build_incoming(workdir / "incoming", 100_000, 4, 4),
    }
    built = time.perf_counter() - start
    start = time.perf_counter()
    uploaded = 0
    for key, name in (("maintenance", "t"), ("append", "append"), ("pk", "pk")):
        uploaded += store.upload(warehouse / "db.db" / name, SOURCE_BUCKETS[key], f"wh/db.db/{name}")
    uploaded += store.upload(workdir / "incoming", "src-incoming", "incoming")
    empty = workdir / "empty"
    empty.mkdir()
    store.upload(empty, SOURCE_BUCKETS["write"], "wh")
    m = facts["maintenance"]
    print(
        f"built in {built:.1f} s, uploaded {uploaded:,} objects in {time.perf_counter() - start:.1f} s; "
        f"maintenance table: {m.objects:,} objects, {m.data_files:,} data files, {m.orphans:,} orphans, "
        f"{m.manifests:,} manifests ({m.manifest_bytes / 2**20:.1f} MiB), {m.snapshots} snapshots, "
        f"{m.tags} tags; append: {facts['append'].data_files} files; pk: {facts['pk'].data_files} files",
        flush=True,
    )
    return facts


def selected_jobs(names: str, spark: bool) -> list[Job]:
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    jobs = [job for job in all_jobs() if not wanted or job.name in wanted or job.operation in wanted]
    if not jobs:
        raise SystemExit(f"no job matches {names!r}; jobs: {', '.join(j.name for j in all_jobs())}")
    chosen: list[Job] = []
    for job in jobs:
        chosen.append(job)
        if spark and job.has_local:
            chosen.append(with_spark(job))
    return chosen


def fastest(runs: list[Run]) -> Run | None:
    """The run of least wall time (noise on a shared machine only ever adds), or the first failed one."""
    failed = [run for run in runs if run.error]
    if failed or not runs:
        return failed[0] if failed else None
    return min(runs, key=lambda run: run.wall_s)


def slope_line(job: Job, facts: Facts, runs: list[Run | None], in_flight: int) -> str:
    """The round trips a job paid: the least-squares slope of its (fastest) wall over the latency,
    in seconds per second of latency, i.e. how many latencies it waited one after another. Against
    its floor's (the larger of fewest / in-flight limit and its chain of dependent requests) it says
    how close the job comes to the floor at any latency, with moto's own time (the same at every
    latency) and the machine's noise (small against a long latency) out of the ratio."""
    done = [run for run in runs if run is not None and not run.error]
    if len(done) < 2:
        return f"{'':<32} slope: too few runs finished"
    seconds = np.array([run.latency_ms / 1000 for run in done])
    wall = np.array([run.wall_s for run in done])
    paid = float(np.polyfit(seconds, wall, 1)[0])
    floor = max(fewest_of(job, facts) / in_flight, round_trips_of(job, facts))
    points = ", ".join(f"{run.latency_ms:g} ms {run.wall_s:.2f} s" for run in done)
    ratio = paid / floor
    return f"{'':<32} slope over {points}: paid {paid:.1f} round trips, floor {floor:.1f}, ratio {ratio:.2f}"


def walls(runs: list[Run]) -> str:
    return ", ".join("failed" if run.error else f"{run.wall_s:.2f}" for run in runs)


def in_flight_limit() -> int:
    """The jobs' in-flight limit on s3: FileIO's default for the protocol (1 before it had one)."""
    return int(getattr(FileIO.for_path("s3://bucket/x"), "io_parallelism", 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=20_000, help="objects of the maintenance table")
    parser.add_argument("--manifests", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=30.0, help="added to every request")
    parser.add_argument("--throttle", type=float, default=0.0, help="share of requests answered 503")
    parser.add_argument("--jobs", default="", help="comma-separated job names or operations (default: all)")
    parser.add_argument("--spark", action="store_true", help="also run each job that can on Spark")
    parser.add_argument("--no-zero", action="store_true", help="skip the latency-0 runs")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each job at each latency; the fastest of each counts"
    )
    parser.add_argument(
        "--slope-ms",
        default="",
        help="more latencies (comma-separated ms, e.g. 150): each job also runs at these, and the round "
        "trips it paid (the slope of its wall over the latency) are printed against its floor's",
    )
    args = parser.parse_args()
    extra = [float(ms) for ms in args.slope_ms.split(",") if ms.strip()]
    jobs = selected_jobs(args.jobs, args.spark)
    workdir = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    store = Store.start(workdir)
    failures = 0
    try:
        facts = build_and_upload(store, workdir, args.objects, args.manifests)
        limit = in_flight_limit()
        print(
            f"latency {args.latency_ms:g} ms, throttle {args.throttle:g}, in-flight limit {limit}; "
            f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )
        print(HEADER, flush=True)
        for job in jobs:
            zeros: list[Run] = []
            runs: list[Run] = []
            more: dict[float, list[Run]] = {ms: [] for ms in extra}
            for _ in range(max(args.repeat, 1)):  # alternately, so a drift of the machine hits both alike
                if args.latency_ms and not args.no_zero:
                    zeros.append(run_job(store, job, 0.0, args.throttle, workdir))
                runs.append(run_job(store, job, args.latency_ms, args.throttle, workdir))
                for ms, at_ms in more.items():
                    at_ms.append(run_job(store, job, ms, args.throttle, workdir))
            failures += sum(bool(r.error) for r in zeros + runs + [r for rs in more.values() for r in rs])
            zero, run = fastest(zeros), fastest(runs)
            assert run is not None  # one run at least
            if args.repeat > 1:
                print(f"{'':<32} walls at 0 ms: {walls(zeros)}; at {args.latency_ms:g} ms: {walls(runs)}")
            print(row(job, facts, run, zero, limit), flush=True)
            if zero is not None and zero.error and not run.error:
                print(f"{'':<32} at latency 0: FAILED {zero.error}", flush=True)
            if more:
                print(slope_line(job, facts, [zero, run, *(fastest(rs) for rs in more.values())], limit))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    finally:
        store.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print(f"bench_s3: {failures} run(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
