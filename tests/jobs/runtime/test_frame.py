"""The frame on the shared local SparkSession: fake operations through `main()`, fan-out helpers,
and one end-to-end run through spark-submit (marked slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobs.__main__ import main
from jobs.runtime.errors import BadInputError, SafetyRefusal
from jobs.runtime.spark import assert_small, get_or_create_spark, parallelize_small, take_sample

CONFIG = "warehouse: {warehouse}\ntable: db.events\n"


def count_range_on_executors(context, config):
    """A fake operation: the work runs in Python on the executors, the driver sees one number."""
    rows = context.spark.range(100).rdd.mapPartitions(lambda part: [sum(1 for _ in part)]).sum()
    context.record.count("rows", rows)
    context.record.add_bytes("scanned", rows * 8)
    context.record.snapshot_ids["committed"] = 7
    context.record.sample("paths", [f"{config.warehouse}/f-{i}" for i in range(30)])


def run_cli(name: str, config: str, *extra: str, capsys) -> tuple[int, dict, str]:
    code = main([name, "--config", config, *extra])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else {}), captured.err


def test_an_operation_runs_on_the_shared_session_and_reports(
    spark_session, fake_operation, config_file, tmp_path, capsys
):
    name = fake_operation("fake-count", count_range_on_executors)
    config = config_file(CONFIG.format(warehouse=tmp_path / "wh"))
    code, record, err = run_cli(name, config, "--dry-run", capsys=capsys)
    assert code == 0, err
    assert record["operation"] == name and record["table"] == "db.events" and record["dry_run"] is True
    assert record["status"] == "done" and record["exit_code"] == 0 and record["error"] is None
    assert record["counts"] == {"rows": 100} and record["bytes"] == {"scanned": 800}
    assert record["snapshot_ids"] == {"committed": 7} and len(record["samples"]["paths"]) == 20
    assert record["started"] <= record["finished"] and record["duration_s"] >= 0
    assert f"[{name} db.events]" in err
    assert spark_session.range(3).count() == 3  # the frame did not stop the shared session


def test_the_context_hands_out_the_active_session(spark_session, fake_operation, config_file, capsys):
    seen = []
    name = fake_operation("fake-session", lambda context, config: seen.append(context.spark))
    assert main([name, "--config", config_file(CONFIG.format(warehouse="memory://wh"))]) == 0
    assert seen == [spark_session] and get_or_create_spark("any", {"spark.x": "1"}) is spark_session


def test_a_safety_refusal_exits_3(spark_session, fake_operation, config_file, capsys):
    def refuse(context, config):
        context.record.count("orphans", 900)
        raise SafetyRefusal("900 orphan candidates are 90% of the table, more than max_orphan_ratio 0.5")

    name = fake_operation("fake-refuse", refuse)
    code, record, err = run_cli(name, config_file(CONFIG.format(warehouse="/wh")), capsys=capsys)
    assert code == 3 and record["status"] == "refused" and record["exit_code"] == 3
    assert record["error"].startswith("900 orphan candidates") and record["counts"] == {"orphans": 900}
    assert "Traceback" not in err


def test_an_unexpected_error_exits_1_with_the_error_in_the_record(
    spark_session, fake_operation, config_file, capsys
):
    def crash(context, config):
        {}["missing"]

    name = fake_operation("fake-crash", crash)
    code, record, err = run_cli(name, config_file(CONFIG.format(warehouse="/wh")), capsys=capsys)
    assert code == 1 and record["status"] == "failed" and record["error"] == "'missing'"
    assert "Traceback" in err and "KeyError" in err


def test_a_bad_input_error_raised_on_an_executor_exits_2(spark_session, fake_operation, config_file, capsys):
    def fail_in_task(context, config):
        def check(value):
            if value == 42:
                raise BadInputError(f"row {value}: not a valid partition value")
            return value

        context.spark.range(50).rdd.map(lambda row: check(row.id)).count()

    name = fake_operation("fake-task-error", fail_in_task)
    code, record, _ = run_cli(name, config_file(CONFIG.format(warehouse="/wh")), capsys=capsys)
    assert code == 2
    assert record["error"] == "BadInputError in a Spark task: row 42: not a valid partition value"


def test_output_writes_the_record_to_a_file_and_nothing_to_stdout(
    spark_session, fake_operation, config_file, tmp_path, capsys
):
    name = fake_operation("fake-output", count_range_on_executors)
    output = tmp_path / "records" / "run.json"
    config = config_file(CONFIG.format(warehouse=tmp_path / "wh"))
    code, record, _ = run_cli(name, config, "--output", str(output), capsys=capsys)
    assert code == 0 and record == {}
    assert json.loads(output.read_text())["counts"] == {"rows": 100}


def test_parallelize_small_spreads_items_one_per_task_up_to_a_cap(spark_session):
    names = [f"manifest-{i}" for i in range(10)]
    rdd = parallelize_small(spark_session, names, num_slices=4)
    assert rdd.getNumPartitions() == 4 and sorted(rdd.collect()) == names
    assert parallelize_small(spark_session, names[:3]).getNumPartitions() == 3
    assert parallelize_small(spark_session, []).count() == 0
    with pytest.raises(SafetyRefusal, match="11 manifests would be held on the driver"):
        parallelize_small(spark_session, names + ["one more"], limit=10, what="manifests")


def test_assert_small_and_take_sample(spark_session):
    assert_small(10, 10, "partitions")
    with pytest.raises(SafetyRefusal, match="limit of 10"):
        assert_small(11, 10, "partitions")
    df = spark_session.range(1000).selectExpr("concat('f-', id) AS path")
    assert len(take_sample(df, "path")) == 20 and take_sample(df, "path", 3)[0].startswith("f-")


ENTRY = '''
"""Entry file of a test-only operation, as spark-submit runs it; `run` is pickled by value."""
import sys

from jobs.runtime.config import TableJobConfig
from jobs.runtime.registry import register

CONFIG_MODEL = TableJobConfig


def run(context, config):
    spark = context.spark
    pythons = spark.range(4).rdd.map(lambda _: sys.executable).distinct().collect()
    context.record.count("rows", spark.range(1000).rdd.map(lambda _: 1).sum())
    context.record.details.update(
        master=spark.sparkContext.master,
        executor_pythons=pythons,
        shuffle_partitions=spark.conf.get("spark.sql.shuffle.partitions"),
        ui_enabled=spark.sparkContext.getConf().get("spark.ui.enabled"),
    )


register("fake-submit", "__main__", "test only")

from jobs.entry import run_entry  # noqa: E402

run_entry("fake-submit")
'''


@pytest.mark.slow
def test_spark_submit_runs_a_thin_entry_file_and_keeps_its_master(tmp_path):
    """The frame keeps spark-submit's settings (a local default here would hijack a cluster run) and
    takes from the YAML `spark:` block only what spark-submit did not set."""
    entry = tmp_path / "fake_submit.py"
    entry.write_text(textwrap.dedent(ENTRY))
    config = tmp_path / "job.yaml"
    config.write_text(
        CONFIG.format(warehouse=tmp_path / "wh")
        + "spark: {spark.sql.shuffle.partitions: 3, spark.ui.enabled: true}\n"
    )
    output = tmp_path / "run.json"
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.update(
        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"
    )
    settings = ["spark.ui.enabled=false", "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1"]
    command = [str(bin_dir / "spark-submit"), "--master", "local[1]"]
    for setting in settings + ["spark.driver.extraJavaOptions=-XX:+UseSerialGC -XX:TieredStopAtLevel=1"]:
        command += ["--conf", setting]
    command += [str(entry), "--config", str(config), "--output", str(output)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text())
    assert record["operation"] == "fake-submit" and record["status"] == "done"
    assert record["counts"] == {"rows": 1000}
    assert record["details"].pop("driver_peak_rss_mib") > 0
    assert record["details"].pop("lock").endswith("/_maintenance/locks/db.events.lock")  # the table's lock
    assert record["details"] == {
        "master": "local[1]",
        "executor_pythons": [sys.executable],
        "shuffle_partitions": "3",  # from the YAML spark: block, which spark-submit did not set
        "ui_enabled": "false",  # spark-submit's --conf wins over the block
        "storage": {"throttled_requests": 0, "timed_out_requests": 0},
    }
    # spark-submit merges the Python driver's stderr into its stdout: hence --output for the record.
    logs = result.stdout + result.stderr
    assert "[fake-submit db.events]" in logs and "ignored: spark.ui.enabled" in logs


STOP_AND_RESTART = """
from pyspark import SparkContext

from jobs.runtime.spark import get_or_create_spark, stop_session

first = get_or_create_spark("first")
jvm = SparkContext._gateway.proc
assert first.range(3).count() == 3
stop_session(first)
assert jvm.poll() is not None, "the first JVM still runs after its session stopped"
second = get_or_create_spark("second")
assert SparkContext._gateway.proc.pid != jvm.pid
total = second.sparkContext.accumulator(0)
second.sparkContext.parallelize(range(5), 2).foreach(lambda x: total.add(x))
assert total.value == 10, total.value
stop_session(second)
print("restarted")
"""


@pytest.mark.slow
def test_a_stopped_session_takes_its_jvm_along_and_the_next_one_starts_its_own():
    """`stop_session` (what a job process does last) shuts down the JVM this process launched rather
    than leaving it to die after Python, and skips pyspark's wait on its accumulator server; a later
    session in the same process gets a new JVM with working accumulators, and the JVM hanging up on
    the old accumulator server prints no traceback."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, "-c", STOP_AND_RESTART], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("restarted")
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
