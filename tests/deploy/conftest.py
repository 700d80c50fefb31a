"""What a cluster gets from `scripts/package`, built once per test session (slow tests only).

`Packaged.venv` is the virtual environment the archive is packed from: the wheel and its declared
dependencies and nothing else (no pyspark, no test extras), so a job that runs with it proves the
wheel's dependencies are complete. pyspark comes from the cluster, here the dev venv's pyspark
via spark-submit (which puts its own pyspark.zip on the driver's and executors' PYTHONPATH).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Packaged:
    dist: Path
    venv: Path
    wheel: Path
    archive: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def entry(self, operation: str) -> str:
        return str(self.dist / "entry" / f"{operation.replace('-', '_')}.py")


@pytest.fixture(scope="session")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> Packaged:
    root = tmp_path_factory.mktemp("package")
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "DIST_DIR": str(root / "dist"),
        "BUILD_DIR": str(root / "build"),
        "PIP_NO_COMPILE": "1",  # build time over first-import speed: the archive is used once here
        "COMPRESS_LEVEL": "1",
    }
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "package")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    dist = root / "dist"
    (wheel,) = dist.glob("paimon_jobs-*-py3-none-any.whl")
    (archive,) = dist.glob("paimon_jobs-*-venv.tar.gz")
    return Packaged(dist, root / "build" / "venv", wheel, archive)


def spark_submit_env(**extra: str) -> dict[str, str]:
    """The environment of a spark-submit from the dev venv's pyspark, with nothing of this checkout:
    no PYTHONPATH, no PYSPARK_PYTHON (the --conf spark.pyspark.* settings say which Python)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
    return env


def spark_submit_command(master: str, python: str, *conf: str, driver_python: str | None = None) -> list[str]:
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", master]
    settings = [
        f"spark.pyspark.python={python}",
        f"spark.pyspark.driver.python={driver_python or python}",
        "spark.driver.host=127.0.0.1",
        "spark.driver.bindAddress=127.0.0.1",
        "spark.ui.enabled=false",
        "spark.driver.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        *conf,
    ]
    for setting in settings:
        command += ["--conf", setting]
    return command
