"""The frame without Spark: YAML configs, their errors, exit codes, the run record and the CLI."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from jobs.__main__ import main
from jobs.runtime.config import (
    ConfigError,
    StrictModel,
    TableJobConfig,
    interpolate,
    load_config,
    load_document,
)
from jobs.runtime.errors import (
    BadInputError,
    CommitRaceLost,
    SafetyRefusal,
    describe,
    exit_code_for,
)
from jobs.runtime.registry import OPERATIONS, Operation, OperationNotImplemented, load
from jobs.runtime.report import SAMPLE_LIMIT, ProgressLogger, RunRecord
from paimon_format import errors as format_errors
from paimon_format.model.options import InvalidOptionError

VALID = "warehouse: /data/wh/\ntable: db.events\n"


class SourceConfig(StrictModel):
    path: str
    format: str = "parquet"


class ExpireLikeConfig(TableJobConfig):
    """A config shaped like the operations' ones: scalars, a nested model, a union, a list."""

    retain_min: int = 10
    older_than: int | Literal["never"] = 3600
    source: SourceConfig | None = None
    partitions: list[dict[str, str]] = Field(default_factory=list)


def problem_lines(path: str, overrides: list[str] | None = None, model=ExpireLikeConfig) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, overrides, model)
    return str(caught.value).splitlines()


def test_a_valid_file_gives_the_model_with_defaults(config_file):
    config = load_config(config_file(VALID), [], ExpireLikeConfig)
    assert (config.warehouse, config.table, config.retain_min) == ("/data/wh", "db.events", 10)
    assert config.storage_options == {} and config.spark is None and not config.allow_unsafe_overwrite_commit


@pytest.mark.parametrize(
    ("warehouse", "expected"),
    [("memory://", "memory://"), ("s3://bucket/wh/", "s3://bucket/wh"), ("file:///", "file:///"), ("/", "/")],
)
def test_a_trailing_slash_is_dropped_but_never_the_protocol(config_file, warehouse, expected):
    config = load_config(config_file(f"warehouse: '{warehouse}'\ntable: db.t\n"), [], TableJobConfig)
    assert config.warehouse == expected


def test_bad_yaml_syntax_names_the_file_and_line(config_file):
    path = config_file("warehouse: /wh\ntable: db.t\nsource: [unclosed\n")
    (line,) = problem_lines(path)
    assert line.startswith(f"{path}: line ") and "invalid YAML" in line


def test_a_document_that_is_no_mapping_is_refused(config_file):
    path = config_file("- a\n- b\n")
    assert problem_lines(path) == [f"{path}: the top level must be a mapping of keys, got list"]


def test_a_missing_file_is_named(tmp_path):
    path = str(tmp_path / "absent.yaml")
    assert problem_lines(path) == [f"{path}: configuration file not found"]


def test_unknown_keys_are_errors_also_when_nested(config_file):
    path = config_file(VALID + "retain_mni: 3\nsource: {path: /in, fromat: csv}\n")
    assert sorted(problem_lines(path)) == [
        f"{path}: retain_mni: unknown key",
        f"{path}: source.fromat: unknown key",
    ]


def test_a_wrong_type_says_what_was_expected_and_what_was_given(config_file):
    path = config_file(VALID + "retain_min: many\n")
    (line,) = problem_lines(path)
    assert line.startswith(f"{path}: retain_min: Input should be a valid integer")
    assert line.endswith("got 'many'")


def test_missing_table_and_a_bad_table_name(config_file):
    path = config_file("warehouse: /wh\n")
    assert problem_lines(path) == [f"{path}: table: required key is missing"]
    (line,) = problem_lines(config_file("warehouse: /wh\ntable: nodot\n"))
    assert line.startswith(f"{path}: table: ") and "db.name" in line and "'nodot'" in line


def test_union_and_list_errors_point_at_keys_of_the_file_not_at_pydantic_tags(config_file):
    path = config_file(VALID + "older_than: soon\npartitions: [{dt: '2024-01-01'}, {dt: [1]}]\n")
    lines = problem_lines(path)
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}: older_than: ") and "; or " in lines[0]
    assert lines[1].startswith(f"{path}: partitions[1].dt: Input should be a valid string")


def test_every_problem_is_reported_one_line_each(config_file):
    path = config_file("table: x\nretain_min: []\nbogus: 1\n")
    keys = [line.split(": ")[1] for line in problem_lines(path)]
    assert sorted(keys) == ["bogus", "retain_min", "table", "warehouse"]


def test_dates_stay_the_text_the_user_wrote(config_file):
    path = config_file(VALID + "partitions: [{dt: 2024-05-14}]\n")
    assert load_config(path, [], ExpireLikeConfig).partitions == [{"dt": "2024-05-14"}]


def test_environment_variables_are_interpolated_with_defaults(config_file, monkeypatch):
    monkeypatch.setenv("WAREHOUSE", "s3://lake/wh")
    monkeypatch.delenv("RETAIN", raising=False)
    path = config_file(
        "warehouse: ${WAREHOUSE}\ntable: db.${TABLE_NAME:-events}\nretain_min: ${RETAIN:-5}\n"
        "storage_options: {key: '${WAREHOUSE}-${RETAIN:-}'}\n"
    )
    config = load_config(path, [], ExpireLikeConfig)
    assert (config.warehouse, config.table, config.retain_min) == ("s3://lake/wh", "db.events", 5)
    assert config.storage_options == {"key": "s3://lake/wh-"}


def test_every_unset_variable_without_default_is_named_with_its_key(config_file, monkeypatch):
    monkeypatch.delenv("NO_SUCH_WH", raising=False)
    monkeypatch.delenv("NO_SUCH_PATH", raising=False)
    path = config_file("warehouse: ${NO_SUCH_WH}\ntable: db.t\nsource: {path: '${NO_SUCH_PATH}'}\n")
    lines = problem_lines(path)
    assert [line.split(": ")[1] for line in lines] == ["warehouse", "source.path"]
    assert "environment variable NO_SUCH_WH is not set" in lines[0]


def test_set_overrides_nested_keys_with_yaml_scalars(config_file):
    path = config_file(VALID + "retain_min: 3\nsource: {path: /in}\n")
    config = load_config(
        path,
        ["retain_min=7", "source.format=orc", "older_than=never", "partitions=[{dt: 2024-05-14}]"],
        ExpireLikeConfig,
    )
    assert config.retain_min == 7 and config.older_than == "never"
    assert config.source == SourceConfig(path="/in", format="orc")
    assert config.partitions == [{"dt": "2024-05-14"}]


def test_set_creates_missing_parents_and_beats_the_file(config_file):
    config = load_config(config_file(VALID), ["source.path=/other", "table=db.other"], ExpireLikeConfig)
    assert config.source.path == "/other" and config.table == "db.other"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("retain_min", "--set: 'retain_min': expected key=value"),
        ("=5", "--set: '=5': expected key=value"),
        ("retain_min.deeper=1", "--set: retain_min.deeper: retain_min is not a mapping"),
    ],
)
def test_malformed_set_is_a_config_error(config_file, override, expected):
    path = config_file(VALID + "retain_min: 3\n")
    (line,) = problem_lines(path, [override])
    assert line.startswith(expected)


def test_a_set_key_the_model_does_not_know_is_reported_as_unknown(config_file):
    path = config_file(VALID)
    assert problem_lines(path, ["retainmin=3"]) == [f"{path}: retainmin: unknown key"]


# -- exit codes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (BadInputError("x"), 2),
        (ConfigError("x"), 2),
        (SafetyRefusal("x"), 3),
        (CommitRaceLost("x"), 3),
        (format_errors.CommitConflictError("x"), 3),
        (format_errors.CommitRetriesExhaustedError("x"), 3),
        (format_errors.CorruptFileError("/p", "bad"), 2),
        (format_errors.MissingFileError("/p"), 2),
        (format_errors.TableNotFoundError("x"), 2),
        (format_errors.SnapshotNotFoundError("x"), 2),
        (format_errors.InvalidTableStateError("x"), 2),
        (format_errors.UnsupportedOperationError("x"), 2),
        (InvalidOptionError("bucket", "x", "not a number"), 2),
        (format_errors.StorageError("x"), 1),
        (RuntimeError("x"), 1),
        (KeyError("x"), 1),
    ],
)
def test_exit_codes(error, code):
    assert exit_code_for(error) == code


def spark_wrapper(text: str) -> Exception:
    """An exception shaped like the one Spark raises on the driver for an executor's Python error."""
    wrapper = type("PythonException", (Exception,), {"__module__": "pyspark.errors.exceptions.captured"})
    return wrapper(text)


def test_an_error_raised_in_a_spark_task_keeps_its_exit_code_and_a_short_message():
    error = spark_wrapper(
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in f\nValueError: first\n\nDuring handling...\n'
        "paimon_format.errors.CorruptFileError: s3://b/m-1: truncated block\n\tat org.apache.spark..."
    )
    assert exit_code_for(error) == 2
    assert describe(error) == "CorruptFileError in a Spark task: s3://b/m-1: truncated block"
    assert exit_code_for(spark_wrapper("jobs.runtime.errors.SafetyRefusal: too many")) == 3
    assert exit_code_for(spark_wrapper("jobs.runtime.errors.NoSuchThing: ?")) == 1
    assert exit_code_for(RuntimeError("paimon_format.errors.CorruptFileError: not from Spark")) == 1


# -- run record and progress --------------------------------------------------------------------------


def test_run_record_samples_are_capped_and_counts_add_up():
    record = RunRecord(operation="x", table="db.t")
    record.sample("deleted", [f"f{i}" for i in range(15)])
    record.sample("deleted", [f"g{i}" for i in range(15)])
    record.count("files", 2)
    record.count("files", 3)
    record.add_bytes("deleted", 10)
    record.finish("done", exit_code=0)
    document = json.loads(record.to_json())
    assert len(document["samples"]["deleted"]) == SAMPLE_LIMIT
    assert document["counts"] == {"files": 5} and document["bytes"] == {"deleted": 10}
    assert document["status"] == "done" and document["duration_s"] >= 0
    assert not any(key.startswith("_") for key in document)


def test_progress_logger_logs_at_a_steady_rate_and_at_the_end(caplog):
    logger = logging.getLogger("test.progress")
    with caplog.at_level(logging.INFO, logger="test.progress"):
        quiet = ProgressLogger(logger, "files listed", interval_s=3600)
        for _ in range(1000):
            quiet.add(1, nbytes=10)
        quiet.done()
        chatty = ProgressLogger(logger, "files deleted", interval_s=0)
        chatty.add(5)
        chatty.add(5)
        chatty.done()
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "files listed: 1,000 (10,000 bytes) in total",
        "files deleted: 5 so far",
        "files deleted: 10 so far",
        "files deleted: 10 in total",
    ]


# -- the CLI without Spark ----------------------------------------------------------------------------


def test_cli_config_error_exits_2_with_a_record_and_tagged_log_lines(config_file, fake_operation, capsys):
    ran = []
    name = fake_operation("fake-config", lambda context, config: ran.append(config), ExpireLikeConfig)
    path = config_file(VALID + "retain_min: many\nbogus: 1\n")
    assert main([name, "--config", path]) == 2
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["status"] == "failed" and record["exit_code"] == 2 and record["operation"] == name
    assert f"{path}: retain_min: Input should be a valid integer" in record["error"]
    assert f"{path}: bogus: unknown key" in record["error"]
    error_lines = [line for line in captured.err.splitlines() if " ERROR " in line]
    assert len(error_lines) == 2 and all(f"[{name} -]" in line for line in error_lines)
    assert ran == []


def test_cli_runs_a_spark_free_operation_and_logs_with_operation_and_table(
    config_file, fake_operation, capsys
):
    def run(context, config):
        logging.getLogger("paimon_format.somewhere").info("a line from the format layer")
        context.record.count("retain_min", config.retain_min)
        context.record.details["dry_run_seen"] = context.dry_run

    name = fake_operation("fake-plain", run, ExpireLikeConfig)
    assert main([name, "--config", config_file(VALID), "--set", "retain_min=4", "--dry-run"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["details"].pop("driver_peak_rss_mib") > 0
    assert record["counts"] == {"retain_min": 4} and record["details"] == {
        "dry_run_seen": True,
        "lock": "not taken (dry run)",  # the table's lock, only looked at
        # every record counts its run's 503 SlowDown answers and requests that got no answer
        "storage": {"throttled_requests": 0, "timed_out_requests": 0},
    }
    assert record["dry_run"] is True and record["table"] == "db.events" and record["error"] is None
    assert f"[{name} db.events] paimon_format.somewhere: a line from the format layer" in captured.err
    assert all(f"[{name} " in line for line in captured.err.splitlines())


def test_cli_registered_but_unimplemented_operation_exits_2(config_file, monkeypatch, capsys):
    monkeypatch.setitem(OPERATIONS, "not-yet", Operation("not-yet", "jobs.no_such_module", "later"))
    assert main(["not-yet", "--config", config_file(VALID)]) == 2
    record = json.loads(capsys.readouterr().out)
    assert record["error"] == "operation not-yet is not implemented yet (no module jobs.no_such_module)"


def test_cli_unknown_operation_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["no-such-operation", "--config", "x.yaml"])
    assert caught.value.code == 2


def test_cli_handlers_do_not_pile_up_over_runs(config_file, fake_operation, capsys):
    name = fake_operation("fake-noop", lambda context, config: None)
    before = list(logging.getLogger().handlers)
    for _ in range(3):
        assert main([name, "--config", config_file(VALID)]) == 0
    assert logging.getLogger().handlers == before


def test_an_unwritable_output_still_prints_the_record_and_fails(
    config_file, fake_operation, tmp_path, capsys
):
    name = fake_operation("fake-out", lambda context, config: None)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([name, "--config", config_file(VALID), "--output", str(blocker / "record.json")]) == 1
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "done" and record["exit_code"] == 1


def test_python_m_jobs_help_lists_every_operation():
    help_text = subprocess.run(
        [sys.executable, "-m", "jobs", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in ("write", "expire-snapshots", "remove-orphan-files", "compact-manifests"):
        assert f"\n  {name} " in help_text
    assert "drop-partition" in help_text and "expire-partitions" in help_text


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "paimon-jobs"
    if not script.exists():
        pytest.skip("package not installed with its console scripts")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert "expire-snapshots" in result.stdout


@pytest.mark.parametrize("path", sorted(Path(__file__).parents[3].glob("conf/*.yaml")), ids=lambda p: p.name)
def test_example_configs_are_valid(path, monkeypatch):
    """Against the operation's model once it exists; until then the keys every job has."""
    monkeypatch.delenv("WAREHOUSE", raising=False)
    try:
        # conf/report.yaml is a maintain file: `python -m jobs report` reads its tables and report block
        model = load("maintain" if path.stem == "report" else path.stem).CONFIG_MODEL
    except OperationNotImplemented:
        document = interpolate(load_document(str(path)), str(path))
        TableJobConfig.model_validate(
            {key: document[key] for key in TableJobConfig.model_fields if key in document}
        )
    else:
        load_config(path, [], model)
