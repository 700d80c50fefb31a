"""The 5-minute Java soak (issue #28) as a background process of the test session.

Why in the background: the soak is 5 minutes of Paimon's Java commits under our maintenance; run
in line it would add those 5 minutes to CI's wall time. Started when collection ends (only if a test
of tests/java/test_soak.py is selected), it runs `scripts/soak.py` in a process of its own, with its
own JVM and SparkSession (never the session's `java_paimon` pipe), while the rest of the suite
runs; its tests are moved to the end of the session, where they wait for the process to exit (an
exit, not a sleep) and assert on its `--json` figures. It runs under `nice`, so the suite's own tests
keep the CPU they had, and the soak takes what they leave idle.

Crash ordering: the soak writes only under its own temp directory; the JSON is renamed into place
last, so a process that died midway leaves no result and the test fails with its output. A session
that ends before the soak does (a failure with -x, Ctrl-C) terminates its process group.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SOAK_TESTS = "tests/java/test_soak.py"
MINUTES = 5.0
HUNG_AFTER_S = int(MINUTES * 60 * 6)  # a guard against a hang, never an assertion on speed
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BackgroundSoak:
    process: subprocess.Popen[bytes]
    workdir: Path

    @property
    def warehouse(self) -> str:
        return str(self.workdir / "warehouse")

    @property
    def output(self) -> Path:
        return self.workdir / "soak.out"

    def wait(self) -> tuple[int, dict[str, Any] | None, str]:
        """(exit code, the JSON figures or None, the printout) once the process has ended; a soak
        still running long after its minutes is hung: stopped, and reported without figures."""
        try:
            code = self.process.wait(timeout=HUNG_AFTER_S)
        except subprocess.TimeoutExpired:
            kill(self.process)
            return (
                -1,
                None,
                f"hung: stopped after {HUNG_AFTER_S} s\n" + self.output.read_text(errors="replace"),
            )
        result = self.workdir / "result.json"
        figures = json.loads(result.read_text()) if result.exists() else None
        return code, figures, self.output.read_text(errors="replace")

    def ledgers(self) -> dict[str, Any]:
        with open(self.workdir / "ledgers.pickle", "rb") as f:
            return pickle.load(f)  # our own soak's file, written by the process this session started


_KEY = pytest.StashKey[BackgroundSoak]()


def _soak_items(items: list[pytest.Item]) -> list[pytest.Item]:
    return [item for item in items if item.nodeid.startswith(SOAK_TESTS)]


def order_last(items: list[pytest.Item]) -> None:
    """Move the soak's tests to the end of the session: their wait then overlaps the whole suite."""
    soak = _soak_items(items)
    if soak:
        items[:] = [item for item in items if item not in soak] + soak


def start(session: pytest.Session) -> None:
    """Start the soak if one of its tests is selected (after -k/-m deselection)."""
    if session.config.option.collectonly or not _soak_items(session.items):
        return
    workdir = Path(tempfile.mkdtemp(prefix="paimon-ci-soak-"))
    command = [
        "nice",
        "-n",
        "10",
        sys.executable,
        str(ROOT / "scripts" / "soak.py"),
        f"--minutes={MINUTES}",
        f"--warehouse={workdir / 'warehouse'}",
        "--checkpoint-seconds=60",
        "--orphan-older-than-seconds=60",
        f"--json={workdir / 'result.json'}",
        f"--ledgers={workdir / 'ledgers.pickle'}",
    ]
    with open(workdir / "soak.out", "wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "TMPDIR": str(workdir)},
        )  # TMPDIR: scripts/soak.py's own work directory (logs) goes under `workdir` too
    session.config.stash[_KEY] = BackgroundSoak(process, workdir)


def stop(session: pytest.Session, exitstatus: int) -> None:
    """At the session's end: a soak still running (its tests never waited) is terminated; its
    directory (tables, logs) is removed after a passing session and kept for inspection otherwise."""
    soak = session.config.stash.get(_KEY, None)
    if soak is None:
        return
    if soak.process.poll() is None:
        kill(soak.process)
    if exitstatus == 0:
        shutil.rmtree(soak.workdir, ignore_errors=True)


def kill(process: subprocess.Popen[bytes]) -> None:
    """The soak's process group (its Python, the writer's JVM, its Spark JVM), as started here."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def background_soak(config: pytest.Config) -> BackgroundSoak:
    soak = config.stash.get(_KEY, None)
    if soak is None:
        pytest.fail("the background soak was not started (tests/conftest.py's collection hooks)")
    return soak
