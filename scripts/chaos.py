"""Run the crash and race matrix, bounded in cases and time, and print what it found.

    .venv/bin/python scripts/chaos.py [--cases 300] [--seconds 600] [--jobs write,compact-manifests]
                                      [--race-rounds 2] [--orphan-job-every 10] [--named-steps]

For each job (those of tests/chaos/harness.JOBS committed in this checkout): count the storage
operations of a clean run, then for every one of them and each action (`halt` = the process dies
there, `fail` = that operation raises) run, check, rerun, compare with an uninterrupted run (pypaimon
reads the latest snapshot and every tag), and judge the leftovers by remove-orphan-files' rule
(running the job itself on every N-th case that leaves something). Named crash steps are included.
Cases are shuffled (--seed) and interleaved over jobs, so that a bound still covers every job and
step. Then writer-vs-job races.

Prints a table: cases tried, crashes injected, reruns, files lost, commits lost (both must be 0).
Exit code 1 when anything was lost or doubled. Job and Spark logs go to chaos.log in the work dir.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("TZ", "UTC")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=300, help="at most this many crash cases")
    parser.add_argument("--seconds", type=float, default=600, help="stop starting new cases after this")
    parser.add_argument("--jobs", default="", help="comma-separated operations (default: all committed)")
    parser.add_argument("--race-rounds", type=int, default=2, help="writer-vs-job rounds per job (0: none)")
    parser.add_argument(
        "--orphan-job-every", type=int, default=10, help="run remove-orphan-files every N cases"
    )
    parser.add_argument(
        "--named-steps", action="store_true", help="only the jobs' named crash steps (each one, halted)"
    )
    parser.add_argument("--seed", type=int, default=8, help="order of the cases (shuffled per job)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)

    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    workdir = args.workdir or tempfile.mkdtemp(prefix="paimon-chaos-")
    log_path = os.path.join(workdir, "chaos.log")
    started = time.monotonic()
    out = os.fdopen(os.dup(1), "w", buffering=1)
    with quiet(log_path):
        from jobs.runtime.spark import get_or_create_spark
        from tests.chaos import harness

        spark = get_or_create_spark("chaos", {"spark.master": "local[2]", "spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("OFF")
        jobs = [j for j in args.jobs.split(",") if j] or harness.available_jobs(full=True)
        template = harness.prepare(workdir)
        templates = {job: harness.for_job(template, job, workdir) for job in jobs}
        references, queues = {}, {}
        for job in jobs:
            counts = harness.count_operations(job, templates[job], workdir)
            references[job] = harness.reference_run(job, templates[job], workdir)
            queues[job] = harness.fault_cases(job, counts)
            if args.named_steps:
                queues[job] = [case for case in queues[job] if case.startswith("step:")]
            random.Random(args.seed).shuffle(queues[job])
            print(f"{job}: {counts} -> {len(queues[job])} cases", file=out)

        results, orphan_turn = [], 0
        for job, fault in interleave(queues):
            if len(results) >= args.cases or time.monotonic() - started > args.seconds:
                break
            orphan_turn += 1
            run_orphans = args.orphan_job_every > 0 and orphan_turn % args.orphan_job_every == 0
            result = harness.run_case(
                job, fault, templates[job], references[job], workdir, run_orphan_job=run_orphans
            )
            results.append(result)
            if not result.ok:
                print(f"FAILED {job} {fault}: {result}", file=out)
        races = []
        for job in jobs:
            if (
                job != "write"
                and harness.JOBS[job].races
                and args.race_rounds > 0
                and time.monotonic() - started < args.seconds * 1.5
            ):
                races.append(
                    harness.race(job, templates[job], references[job], workdir, rounds=args.race_rounds)
                )
    elapsed = time.monotonic() - started
    print_table(results, races, jobs, elapsed, out)
    lost = any(not r.ok for r in results) or any(not r.ok for r in races)
    out.write(f"logs: {log_path}\n")
    return 1 if lost else 0


@contextmanager
def quiet(log_path: str):
    """Send this process's stderr and stdout (job logs, Spark, JVM) to a file; the table goes to `out`."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(log)


def interleave(queues: dict[str, list[str]]):
    """(job, fault) round-robin over the jobs, so a bound on count or time still covers each job."""
    for group in itertools.zip_longest(
        *[[(job, fault) for fault in faults] for job, faults in queues.items()]
    ):
        yield from (item for item in group if item is not None)


def print_table(results, races, jobs, elapsed: float, out) -> None:
    by_job = {job: [r for r in results if r.job == job] for job in jobs}
    header = (
        f"{'job':<26} {'cases':>6} {'crashes':>8} {'failures':>9} {'untouched':>10} {'reruns':>7} "
        f"{'orphan job':>11} {'files lost':>11} {'commits lost':>13} {'doubled':>8} {'other':>6}"
    )
    out.write("\n" + header + "\n" + "-" * len(header) + "\n")
    totals: Counter = Counter()
    for job, rows in by_job.items():
        line = Counter(
            cases=len(rows),
            crashes=sum(
                1 for r in rows if r.injected and (":halt" in r.fault or r.fault.startswith("step:"))
            ),
            failures=sum(1 for r in rows if r.injected and r.fault.endswith(("fail", *"0123456789"))),
            untouched=sum(r.untouched for r in rows),
            reruns=sum(r.rerun for r in rows),
            orphan_job=sum(r.orphans_checked_by_job for r in rows),
            files_lost=sum(len(r.lost_files) for r in rows),
            commits_lost=sum(len(r.lost_commits) for r in rows),
            doubled=sum(r.double_commits for r in rows),
            other=sum(len(r.problems) + len(r.orphans_left) for r in rows),
        )
        totals.update(line)
        out.write(_row(job, line))
    out.write("-" * len(header) + "\n" + _row("total", totals))
    if races:
        out.write(
            f"\n{'race (writer vs job)':<26} {'rounds':>6} {'writer commits':>15} {'job gave up (3)':>16} "
            f"{'files lost':>11} {'commits lost':>13} {'failures':>9}\n"
        )
        for race in races:
            out.write(
                f"{race.job:<26} {race.rounds:>6} {race.writer_commits:>15} {race.races_lost:>16} "
                f"{len(race.lost_files):>11} {len(race.lost_commits):>13} {len(race.job_failures):>9}\n"
            )
    out.write(
        f"\n{totals['cases']} crash cases and {sum(r.rounds for r in races)} race rounds in {elapsed:.0f} s\n"
    )


def _row(name: str, c: Counter) -> str:
    widths = [("cases", 6), ("crashes", 8), ("failures", 9), ("untouched", 10), ("reruns", 7)]
    widths += [("orphan_job", 11), ("files_lost", 11), ("commits_lost", 13), ("doubled", 8), ("other", 6)]
    return f"{name:<26} " + " ".join(f"{c[key]:>{width}}" for key, width in widths) + "\n"


if __name__ == "__main__":
    sys.exit(main())
