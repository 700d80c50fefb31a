"""A real Spark standalone cluster (a master and a worker from the installed pyspark, loopback only)
runs the write job with the venv archive: the executors have only what the archive holds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.deploy.conftest import spark_submit_command, spark_submit_env
from tests.support.pypaimon_reads import pypaimon_rows

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition, what: str, processes: list, log: Path, timeout: float = 180) -> None:
    """Poll `condition`; fail at once (with the log's tail) when one of the daemons has exited."""
    deadline = time.monotonic() + timeout
    while not condition():
        if any(process.poll() is not None for process in processes) or time.monotonic() > deadline:
            raise AssertionError(f"no {what}: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def workers_alive(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
            state = json.load(response)
    except OSError:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@pytest.fixture
def standalone_cluster(request, tmp_path):
    """(master URL, worker work dir) of a master and one worker; both are stopped in a finalizer."""
    import pyspark

    spark_home = str(Path(pyspark.__file__).parent)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    env = spark_submit_env(SPARK_HOME=spark_home, SPARK_NO_DAEMONIZE="1")
    env.update(SPARK_DAEMON_JAVA_OPTS="-XX:+UseSerialGC", SPARK_DAEMON_MEMORY="256m")
    work = tmp_path / "worker-work"
    processes: list[subprocess.Popen] = []

    def stop() -> None:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)

    request.addfinalizer(stop)
    master_log = open(tmp_path / "master.log", "w")  # noqa: SIM115 - closed with the process
    request.addfinalizer(master_log.close)
    processes.append(
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui_port),
            ],
            env=env,
            stdout=master_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    master = f"spark://127.0.0.1:{port}"
    wait_until(lambda: _listening(ui_port), "the master's web UI", processes, tmp_path / "master.log")
    worker_log = open(tmp_path / "worker.log", "w")  # noqa: SIM115
    request.addfinalizer(worker_log.close)
    processes.append(
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "1g",
                "--webui-port",
                str(worker_ui),
                "--work-dir",
                str(work),
                master,
            ],
            env=env,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    wait_until(
        lambda: workers_alive(ui_port) >= 1, "a worker to register", processes, tmp_path / "worker.log"
    )
    return master, work


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_job_on_a_standalone_cluster_with_the_venv_archive(packaged, standalone_cluster, tmp_path):
    master, work = standalone_cluster
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(
        pa.table({"id": [1, 2, 3], "dt": ["a", "b", "a"], "v": ["x", "y", "z"]}), source / "p.parquet"
    )
    warehouse = tmp_path / "wh"
    (tmp_path / "write.yaml").write_text(
        f"warehouse: {warehouse}\ntable: db.events\nsource: {{format: parquet, path: {source}}}\n"
        "create: {partition_keys: [dt], primary_keys: [id, dt], options: {bucket: '2'}}\n"
    )
    # The command docs/cluster.md shows, with the driver in client mode on this machine.
    command = spark_submit_command(
        master,
        "./environment/bin/python",
        "spark.executor.memory=512m",
        "spark.executor.cores=1",
        driver_python=packaged.python,
    )
    command += [
        "--archives",
        f"{packaged.archive}#environment",
        packaged.entry("write"),
        "--config",
        "write.yaml",
    ]
    result = subprocess.run(
        command, cwd=tmp_path, env=spark_submit_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    record = json.loads(result.stdout)
    assert record["status"] == "done" and record["snapshot_ids"]["committed"] == 1
    assert record["counts"]["rows_written"] == 3
    # the executors ran in the worker's work dir, from the unpacked archive
    unpacked = list(work.glob("app-*/*/environment/bin/python"))
    assert unpacked, f"no unpacked archive under {work}: {sorted(str(p) for p in work.rglob('*'))[:20]}"
    assert sorted(pypaimon_rows(str(warehouse), "db.events"), key=lambda row: row["id"]) == [
        {"id": 1, "dt": "a", "v": "x"},
        {"id": 2, "dt": "b", "v": "y"},
        {"id": 3, "dt": "a", "v": "z"},
    ]
