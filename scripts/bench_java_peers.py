"""Whole-process peers for the benchmarks: our job as its own `python -m jobs` process, and Paimon's
Java implementation (tests/java/PaimonOracle.java, the shaded Paimon 1.0 bundle of paimon-python-ali)
as its own JVM, each timed from process start to exit (Spark's and the JVM's start-up included).

Benchmark helpers only (they import the test oracle); the product never imports this module.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@dataclass
class Timed:
    seconds: float
    result: Any
    load: str  # `uptime`'s load averages right after the run
    cpu_seconds: float = 0.0  # user + system CPU of the process tree (children reaped by the run)


def adopt_descendants() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so that the CPU time of a
    job's JVM and Python workers, which outlive the `python -m jobs` process by a moment, is counted."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def reap_descendants() -> None:
    """Wait for every adopted descendant to exit (their CPU time then counts in RUSAGE_CHILDREN)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def run_job_process(
    operation: str, warehouse: str, table: str, settings: dict[str, Any], dry_run: bool = False
) -> Timed:
    """`python -m jobs <operation> --config <yaml>` in a fresh process (its own Spark session, local[2]);
    the run record (JSON on stdout) is the result. Fails loudly on a non-zero exit."""
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as workdir:
        config = Path(workdir) / "job.yaml"
        config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": table, **settings}))
        command = [sys.executable, "-m", "jobs", operation, "--config", str(config)]
        if dry_run:
            command.append("--dry-run")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        start, cpu_start = time.perf_counter(), children_cpu_seconds()
        adopt_descendants()
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        reap_descendants()
        seconds, cpu = time.perf_counter() - start, children_cpu_seconds() - cpu_start
    if done.returncode != 0:
        raise RuntimeError(
            f"{operation} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    return Timed(seconds, json.loads(done.stdout), load_average(), cpu)


def prepare_java() -> None:
    """Compile the oracle once, outside any timing."""
    from tests.java.oracle import bridge_jar, compiled_classes

    compiled_classes(bridge_jar())


# Java as its users run it at scale: the default compilers and collector, and room for its
# in-memory set of used files (its orphan cleaning ran out of a 512 MiB heap at 1,000,000 files).
JAVA_PEER_OPTIONS = ("-Xmx4g",)


def run_java_process(request: str, **arguments: Any) -> Timed:
    """One JVM started, one request (`expire_snapshots`, `remove_orphan_files`, ...), the JVM stopped."""
    from tests.java.oracle import JavaPaimon

    log = Path(tempfile.mkdtemp(prefix="bench-java-")) / "java.log"
    start, cpu_start = time.perf_counter(), children_cpu_seconds()
    java = JavaPaimon(log, JAVA_PEER_OPTIONS)
    try:
        result = getattr(java, request)(**arguments)
    finally:
        java.close()
    seconds, cpu = time.perf_counter() - start, children_cpu_seconds() - cpu_start
    shutil.rmtree(log.parent, ignore_errors=True)
    return Timed(seconds, result, load_average(), cpu)


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


def ratio_line(what: str, java: Timed, ours: Timed) -> str:
    return (
        f"{what}: Java {java.seconds:.1f} s, {java.cpu_seconds:.1f} CPU-s ({java.load}), "
        f"ours {ours.seconds:.1f} s, {ours.cpu_seconds:.1f} CPU-s ({ours.load}); "
        f"ratio Java/ours = {java.seconds / ours.seconds:.2f} (whole processes, JVM and Spark start included)"
    )
