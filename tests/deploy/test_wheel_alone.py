"""The built wheel alone (no test extras) runs a primary-key write and `maintain` under spark-submit,
and each run's stdout is exactly one JSON document, the run record."""

from __future__ import annotations

import json
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.deploy.conftest import spark_submit_command, spark_submit_env
from tests.support.pypaimon_reads import pypaimon_rows

pytestmark = pytest.mark.slow


def test_the_wheel_alone_writes_and_maintains_with_json_on_stdout(packaged, tmp_path):
    probe = subprocess.run(
        [
            packaged.python,
            "-c",
            "import jobs, importlib.util as u; print(jobs.__file__, u.find_spec('pypaimon'))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.split() == [
        f"{packaged.venv}/lib/python{_version(packaged)}/site-packages/jobs/__init__.py",
        "None",
    ]

    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(
        pa.table({"id": [1, 2, 3, 2], "dt": ["a", "b", "a", "b"], "v": ["w", "x", "y", "z"]}),
        source / "p.parquet",
    )
    warehouse = tmp_path / "wh"
    (tmp_path / "write.yaml").write_text(
        f"warehouse: {warehouse}\ntable: db.events\nsource: {{format: parquet, path: {source}}}\n"
        "create: {partition_keys: [dt], primary_keys: [id, dt], options: {bucket: '2'}}\n"
    )
    (tmp_path / "maintain.yaml").write_text(f"warehouse: {warehouse}\ntables: ['db.*']\n")
    env = spark_submit_env()
    base = spark_submit_command("local[2]", packaged.python)

    write = subprocess.run(
        [*base, packaged.entry("write"), "--config", "write.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert write.returncode == 0, write.stdout[-2000:] + write.stderr[-4000:]
    record = json.loads(write.stdout)  # the whole of stdout is the record
    assert record["status"] == "done" and record["snapshot_ids"]["committed"] == 1
    assert record["counts"]["rows_written"] == 3  # key (2, b) twice in the input: the last one wins
    assert "committed snapshot 1" in write.stderr, "progress lines stay, on stderr"
    assert " INFO SparkContext" not in write.stderr.split('Setting Spark log level to "WARN"')[-1]

    maintain = subprocess.run(
        [*base, packaged.entry("maintain"), "--config", "maintain.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert maintain.returncode == 0, maintain.stdout[-2000:] + maintain.stderr[-4000:]
    record = json.loads(maintain.stdout)
    operations = record["details"]["tables"]["db.events"]["operations"]
    assert [op["operation"] for op in operations] == [
        "expire-snapshots",
        "compact-manifests",
        "remove-orphan-files",
    ]
    assert all(op["status"] == "done" for op in operations)
    assert sorted(pypaimon_rows(str(warehouse), "db.events"), key=lambda row: row["id"]) == [
        {"id": 1, "dt": "a", "v": "w"},
        {"id": 2, "dt": "b", "v": "z"},
        {"id": 3, "dt": "a", "v": "y"},
    ]


def _version(packaged) -> str:
    result = subprocess.run(
        [packaged.python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()
