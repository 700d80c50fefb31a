"""Whole-process peers for the benchmarks: our job as `python -m jobs`, and Paimon's Java implementation.

Both are timed as whole processes, start-up included (Spark's JVM and Python workers; the oracle's
JVM), because that is what a scheduler pays per run. The Java side is the test oracle
(tests/java/PaimonOracle.java on the Paimon 1.0 bundle of the `paimon-python-ali` wheel, compiled
by `javac`; `bash scripts/setup` installs both): one fresh JVM per run, started, asked for one
operation, and closed. Benchmark helpers only (they import the test oracle); the product never
imports this module.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

# Java as its users run it at scale: the default compilers and collector, and room for its
# in-memory set of used files (its orphan cleaning ran out of a 512 MiB heap at 1,000,000 files).
JAVA_PEER_OPTIONS = ("-Xmx4g",)


@dataclass(frozen=True)
class ProcessTiming:
    total_s: float  # the whole process, start-up included
    work_s: float | None = None  # the operation alone (Java request / our run record's duration)
    cpu_s: float | None = None  # CPU-seconds of the process tree, start-up included
    load: str = ""  # the load averages right after the run (the machine is shared)
    result: Any = None  # the Java request's answer


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def tree_cpu_seconds(root: int) -> float:
    """CPU-seconds (user + system, own and reaped children's) of `root` and its live descendants.

    The machine is shared: wall-clock figures move with the load, CPU-seconds much less. Reads
    /proc (Linux); processes that ended unreaped are missed, so this is a lower bound.
    """
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    tree = {root}
    grown = True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    return sum(times.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def run_job_process(
    operation: str, config: dict[str, Any], workdir: Path, dry_run: bool = False
) -> tuple[ProcessTiming, dict]:
    """`python -m jobs <operation> --config <config>` in a new process (its own Spark session when it
    needs one, `local[2]`); its timing (CPU of the whole process tree) and run record. Fails loudly
    on a non-zero exit."""
    path = workdir / f"{operation}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    command = [
        sys.executable,
        "-m",
        "jobs",
        operation,
        "--config",
        str(path),
        "--quiet",
        "--log-level",
        "WARNING",
    ]
    if dry_run:
        command.append("--dry-run")
    start, cpu_start = time.perf_counter(), _children_cpu_seconds()
    _adopt_descendants()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    _reap_descendants()
    total, cpu = time.perf_counter() - start, _children_cpu_seconds() - cpu_start
    if done.returncode != 0:
        raise RuntimeError(f"{operation} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}")
    record = json.loads(done.stdout)
    return ProcessTiming(total, record.get("duration_s"), cpu, load_average()), record


def _adopt_descendants() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so that the CPU time of a
    job's JVM and Python workers, should they outlive the `python -m jobs` process, is counted."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _reap_descendants() -> None:
    """Wait for every adopted descendant to exit (their CPU time then counts in RUSAGE_CHILDREN)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def java_unavailable() -> str | None:
    """Why the Java peer cannot run here (None: it can)."""
    sys.path.insert(0, str(REPO))
    from tests.java.oracle import bridge_jar, compiled_classes

    try:
        compiled_classes(bridge_jar())
    except (FileNotFoundError, subprocess.CalledProcessError) as error:
        return f"{error} (bash scripts/setup installs paimon-python-ali and a JDK)"
    return None


def run_java(request: Callable[[Any], Any]) -> ProcessTiming:
    """A fresh oracle JVM answering one request: the whole process, the request alone, its answer."""
    sys.path.insert(0, str(REPO))
    from tests.java.oracle import JavaPaimon

    log = Path(tempfile.mkdtemp(prefix="bench-java-")) / "jvm.log"
    start = time.perf_counter()
    oracle = JavaPaimon(log, jvm_options=JAVA_PEER_OPTIONS)  # a 4 GiB heap and Java's default compilers
    try:
        work_start = time.perf_counter()
        result = request(oracle)
        work = time.perf_counter() - work_start
        cpu = tree_cpu_seconds(oracle._process.pid)
    finally:
        oracle.close()
    total = time.perf_counter() - start
    shutil.rmtree(log.parent, ignore_errors=True)
    return ProcessTiming(total, work, cpu, load_average(), result)


def describe_ratio(ours: ProcessTiming, java: ProcessTiming) -> str:
    """Both whole processes and Java's time over ours: >= 1.0 means ours is at least as fast."""
    return (
        f"Java {java.total_s:.2f} s, {java.cpu_s or 0:.1f} CPU-s ({java.load}); ours {ours.total_s:.2f} s, "
        f"{ours.cpu_s or 0:.1f} CPU-s ({ours.load}); ratio java/ours = {java.total_s / ours.total_s:.2f} "
        "(whole processes, the JVM's and Spark's start-up included; >= 1.0: ours at least as fast)"
    )


def copy_table(source: Path, target: Path) -> None:
    """A second copy of a benchmark table: data files hard-linked (jobs only ever delete them, and a
    deleted link leaves the other copy's file in place), metadata copied (hints are rewritten)."""

    def link_or_copy(src: str, dst: str) -> None:
        if "/bucket-" in src:
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link_or_copy)


def relative_files(root: str) -> set[str]:
    """Every file under a table directory, relative to it (to compare two copies after a run)."""
    found: set[str] = set()
    for directory, _dirs, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        found.update(name if relative == "." else f"{relative}/{name}" for name in files)
    return found


def job_config(root: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A job YAML for the table at `<warehouse>/db.db/t`."""
    warehouse = str(Path(root).parents[1])
    return {"warehouse": warehouse, "table": "db.t", **extra}
