"""Whole-process peers for the benchmarks: our job as `python -m jobs`, and Paimon's Java implementation.

Both are timed as whole processes, start-up included (Spark's JVM and Python workers; the oracle's
JVM), because that is what a scheduler pays per run. The Java side is the test oracle
(tests/java/PaimonOracle.java on the Paimon 1.0 bundle of the `paimon-python-ali` wheel, compiled
by `javac`; `bash scripts/setup` installs both): one fresh JVM per run, started, asked for one
operation, and closed.
"""

from __future__ import annotations

import json
import os
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


@dataclass(frozen=True)
class ProcessTiming:
    total_s: float  # the whole process, start-up included
    work_s: float | None = None  # the operation alone (Java request / our run record's duration)
    cpu_s: float | None = None  # CPU-seconds of the process tree (Linux /proc), start-up included


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


def run_job_process(operation: str, config: dict[str, Any], workdir: Path) -> tuple[ProcessTiming, dict]:
    """`python -m jobs <operation> --config <config>` in a new process; its timing and run record."""
    path = workdir / f"{operation}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "jobs", operation, "--config", str(path), "--quiet", "--log-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    total = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{operation} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}")
    record = json.loads(done.stdout)
    return ProcessTiming(total, record.get("duration_s")), record


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
    """A fresh oracle JVM answering one request: the whole process, and the request alone."""
    sys.path.insert(0, str(REPO))
    from scripts.bench_java_peers import JAVA_PEER_OPTIONS
    from tests.java.oracle import JavaPaimon

    log = Path(tempfile.mkdtemp(prefix="bench-java-")) / "jvm.log"
    start = time.perf_counter()
    oracle = JavaPaimon(log, jvm_options=JAVA_PEER_OPTIONS)  # a 4 GiB heap and Java's default compilers
    try:
        work_start = time.perf_counter()
        request(oracle)
        work = time.perf_counter() - work_start
        cpu = tree_cpu_seconds(oracle._process.pid)
    finally:
        oracle.close()
    return ProcessTiming(time.perf_counter() - start, work, cpu)


def describe_ratio(ours: ProcessTiming, java: ProcessTiming) -> str:
    """Java's time over ours: >= 1.0 means our job is at least as fast as Paimon's Java."""
    ratio = java.total_s / ours.total_s
    return f"ratio java/ours = {ratio:.2f} (whole processes; >= 1.0: ours at least as fast)"


def job_config(root: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A job YAML for the table at `<warehouse>/db.db/t`."""
    warehouse = str(Path(root).parents[1])
    return {"warehouse": warehouse, "table": "db.t", **extra}
