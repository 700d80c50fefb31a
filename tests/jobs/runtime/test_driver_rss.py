"""The run record's driver peak is the driver's own, not its launcher's (#29: a driver started by a
2 GiB benchmark process reported 2,375 MiB, the benchmark's peak, through ru_maxrss)."""

from __future__ import annotations

import subprocess
import sys

_LAUNCHER = """
import subprocess, sys
ballast = bytearray(400 * 2**20)
ballast[:: 4096] = b"x" * len(ballast[:: 4096])  # touch every page: 400 MiB resident in the launcher
child = "from jobs.runtime.report import driver_peak_rss_mib; print(driver_peak_rss_mib())"
print(subprocess.run([sys.executable, "-c", child], check=True, capture_output=True, text=True).stdout)
"""


def test_driver_peak_is_its_own_not_the_launchers() -> None:
    out = subprocess.run([sys.executable, "-c", _LAUNCHER], check=True, capture_output=True, text=True)
    peak = int(out.stdout.strip())
    assert 0 < peak < 300, f"the child reported {peak} MiB: its launcher's 400 MiB leaked into its peak"
