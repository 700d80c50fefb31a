"""The bad-input corpus: every job against broken configs and broken tables.

Each case runs the CLI (`jobs.__main__.main`, in-process on the shared SparkSession) and asserts the
contract of `jobs/runtime/errors.py`: exit 2 (bad input) or 3 (refused), a one-line cause in the run record
and on stderr that names what is wrong and where, and not one byte of the warehouse changed (nothing
half-written, nothing deleted). A new job joins the corpus by one line in `JOBS`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from jobs.__main__ import main
from tests.support.broken_tables import (
    a_manifest_of_the_latest_snapshot,
    latest_snapshot_path,
    truncated_manifest,
    unknown_schema_id,
)
from tests.support.table_states import (
    IDENTIFIER,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    row_ids,
    view,
)

# operation -> its YAML keys beyond warehouse/table (`{source}` is a small Parquet input directory).
JOBS: dict[str, dict] = {
    "compact": {"strategy": "full"},
    "compact-manifests": {"mode": "full"},
    "write": {"source": {"format": "parquet", "path": "{source}"}},
    "remove-orphan-files": {"older_than": "1h"},
    "drop-partition": {"partitions": [{"dt": "2024-01-02"}]},
    "expire-partitions": {"expiration_time": "1d", "max_expires": 1},
    # retain_max 1: the latest snapshot's delta (where the corpus breaks a manifest) decides what the
    # expired ones lost, so the job reads it; like Java, it reads no manifest it does not need
    "expire-snapshots": {"retain_min": 1, "retain_max": 1},
    "create-tag": {"tag": "new-tag"},
    # t2 tags snapshot 2, which exists: these read tag and snapshot files only, no manifest
    "delete-tag": {"tags": ["t2"]},
    "expire-tags": {"older_than": "1 ms"},
    "rollback": {"to_snapshot": 3},
    # issue 30 tags: t2 on snapshot 2 (which exists): tag and snapshot files only, no manifest
    "rename-tag": {"from_tag": "t2", "to_tag": "t2-renamed"},
    "replace-tag": {"tag": "t2", "snapshot": 4},
    "remove-unexisting-files": {"max_missing_ratio": 0.5},
    # issue 30: the corpus table has no branch; these stop at the table's checks or at the branch
    "create-branch": {"branch": "new-branch"},
    "delete-branch": {"branches": ["tmp-*"], "strict": False},
    "rename-branch": {"from_branch": "b", "to_branch": "c"},
    "fast-forward": {"branch": "b"},
    "merge-branch": {"source_branch": "b"},
    "mark-partition-done": {"partitions": [{"dt": "2024-01-02"}]},
    "purge-files": {"confirm": True},  # reads no manifest: it lists and deletes
    # checks manifests exist, never reads one (a missing one is what it repairs)
    "remove-unexisting-manifests": {"max_missing_ratio": 0.5},
    # consumers: reset-consumer reads the snapshot it points at (the latest, 4), clear-consumers none
    "reset-consumer": {"consumer_id": "stream-1", "next_snapshot": 4},
    "clear-consumers": {"include": "stream-.*"},
    # the corpus table has no long-lived changelog: it stops at the table's checks or finds none
    "expire-changelogs": {"retain_max": 1, "retain_min": 1},
}
# Branch jobs whose branch the corpus table lacks: exit 2 on a clean table, so no hint comparison.
NEEDS_A_BRANCH = {"rename-branch", "fast-forward", "merge-branch"}
# Jobs that read no manifest here, so the broken-manifest cases cannot reach them.
BRANCH_JOBS = {"create-branch", "delete-branch", *NEEDS_A_BRANCH}
CONSUMER_JOBS = {"reset-consumer", "clear-consumers", "expire-changelogs"}
REPAIR_JOBS = {"purge-files", "remove-unexisting-manifests"}
TAG_JOBS = {"create-tag", "delete-tag", "expire-tags", "rename-tag", "replace-tag"}
READS_NO_MANIFEST = {*TAG_JOBS, *REPAIR_JOBS, *CONSUMER_JOBS, *BRANCH_JOBS}
MANIFEST_CASES = {"truncated-manifest", "manifest-list-names-a-missing-manifest"}
# Jobs for which a table that does not exist yet is no error (write creates it).
CREATES_TABLES = {"write"}


@dataclass(frozen=True)
class Case:
    name: str
    # breaks the warehouse copy and/or the config document; returns the text that must be in the error
    apply: Callable[[str, dict], str]
    exit_code: int = 2
    raw_yaml: str | None = None  # the config file's text instead of the YAML dump of the document


def unknown_key(warehouse: str, config: dict) -> str:
    config["retain_mni"] = 3
    return "retain_mni: unknown key"


def wrong_type(warehouse: str, config: dict) -> str:
    config["allow_unsafe_overwrite_commit"] = "sometimes"
    return "allow_unsafe_overwrite_commit: Input should be a valid boolean"


def missing_table(warehouse: str, config: dict) -> str:
    config["table"] = "db.nope"
    return "db.db/nope"


def corrupt_snapshot(warehouse: str, config: dict) -> str:
    with open(latest_snapshot_path(warehouse), "w") as handle:
        handle.write('{"version": 3, "id": 4, "schemaId": ')
    return "snapshot/snapshot-4"


def missing_manifest(warehouse: str, config: dict) -> str:
    path = a_manifest_of_the_latest_snapshot(warehouse)
    os.remove(path)
    return os.path.basename(path)


def table_outside_the_warehouse(warehouse: str, config: dict) -> str:
    config["table"] = "db.t/../../../outside"
    return "table:"


def table_name_with_a_separator(warehouse: str, config: dict) -> str:
    config["table"] = "db./etc/passwd"
    return "database and table names cannot contain '/'"


def clear_text_credentials(warehouse: str, config: dict) -> str:
    config["storage_options"] = {"client_kwargs": {"region_name": "eu-west-1"}, "secret": "wJalrXUtnFEMI"}
    return "storage_options.secret: a credential in clear text"


def unset_variable(warehouse: str, config: dict) -> str:
    config["storage_options"] = {"secret": "${PAIMON_TEST_SURELY_UNSET_SECRET}"}
    return "environment variable PAIMON_TEST_SURELY_UNSET_SECRET is not set"


def malformed_yaml(warehouse: str, config: dict) -> str:
    return "line 2, column 6: invalid YAML"


def top_level_list(warehouse: str, config: dict) -> str:
    return "the top level must be a mapping"


CASES = [
    Case("malformed-yaml", malformed_yaml, raw_yaml="warehouse: [unclosed\ntable: db.t\n"),
    Case("top-level-list", top_level_list, raw_yaml="- warehouse\n- table\n"),
    Case("unknown-key", unknown_key),
    Case("wrong-type", wrong_type),
    Case("clear-text-credentials", clear_text_credentials),
    Case("unset-variable", unset_variable),
    Case("table-outside-the-warehouse", table_outside_the_warehouse),
    Case("table-name-with-a-separator", table_name_with_a_separator),
    Case("missing-table", missing_table),
    Case("corrupt-snapshot-json", corrupt_snapshot),
    Case("truncated-manifest", truncated_manifest),
    Case("manifest-list-names-a-missing-manifest", missing_manifest),
    Case("unknown-schema-id", unknown_schema_id),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("badinput") / "wh")
    build_sample_table(warehouse)
    return warehouse


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("source")
    pq.write_table(
        pa.table({"id": pa.array([100, 101], pa.int64()), "dt": ["2024-01-01"] * 2, "v": ["a", "b"]}),
        directory / "part-0.parquet",
    )
    return str(directory)


def job_config(operation: str, warehouse: str, source: str) -> dict:
    extra = json.loads(json.dumps(JOBS[operation]).replace("{source}", source))
    return {"warehouse": warehouse, "table": IDENTIFIER, **extra}


def run_cli(argv: list[str], capsys) -> tuple[int, dict, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.parametrize("operation", sorted(JOBS))
def test_bad_input_is_refused_with_one_clear_line_and_nothing_changed(
    spark_session, template, source, tmp_path, capsys, operation, case
):
    if case.name == "missing-table" and operation in CREATES_TABLES:
        pytest.skip(f"{operation} creates a missing table")
    if case.name in MANIFEST_CASES and operation in READS_NO_MANIFEST:
        pytest.skip(f"{operation} reads no manifest of this table (tags on live snapshots)")
    if case.name == "manifest-list-names-a-missing-manifest" and operation == "rollback":
        pytest.skip("rollback drops the broken snapshot 4 (the dropped side is read leniently): a repair")
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    config = job_config(operation, warehouse, source)
    expected = case.apply(warehouse, config)
    before = fingerprint(warehouse)
    config_path = tmp_path / "job.yaml"
    config_path.write_text(case.raw_yaml if case.raw_yaml is not None else yaml.safe_dump(config))

    for dry_run in (["--dry-run"], []):
        code, record, err = run_cli([operation, "--config", str(config_path), *dry_run], capsys)
        assert code == case.exit_code, (record["error"], err[-2000:])
        cause = record["error"]
        assert "\n" not in cause and expected in cause, cause
        assert "Traceback" not in err and cause in err
        if case.raw_yaml is not None or "config" in cause or cause.startswith(str(config_path)):
            assert str(config_path) in cause  # config problems name the file
        assert fingerprint(warehouse) == before, "a refused run changed the warehouse"


WRONG_HINTS = {
    "latest-hint-beyond-the-last-snapshot": ("LATEST", "99"),
    "latest-hint-behind": ("LATEST", "1"),
    "latest-hint-garbage": ("LATEST", "four"),
    "earliest-hint-missing-snapshot": ("EARLIEST", "7"),
}


# operation -> what readers see after a run on an untouched copy of the module's template
_CLEAN_RESULTS: dict[str, tuple] = {}


@pytest.mark.parametrize("hint", sorted(WRONG_HINTS))
@pytest.mark.parametrize("operation", sorted(JOBS))
def test_wrong_hint_files_are_ignored_never_trusted(
    spark_session, template, source, tmp_path, capsys, operation, hint
):
    """Hints are only hints (Java treats them so too): a wrong one must not change what a job does.
    The job's result equals the result on an untouched copy."""
    if operation in NEEDS_A_BRANCH:
        pytest.skip(f"{operation} needs a branch the corpus table does not have")
    results = {}
    for variant in ("clean", "wrong"):
        if variant == "clean" and operation in _CLEAN_RESULTS:
            results[variant] = _CLEAN_RESULTS[operation]  # one clean run per job serves every hint
            continue
        warehouse = copy_warehouse(template, str(tmp_path / variant))
        if variant == "wrong":
            name, text = WRONG_HINTS[hint]
            with open(f"{warehouse}/db.db/t/snapshot/{name}", "w") as handle:
                handle.write(text)
        config_path = tmp_path / f"{variant}.yaml"
        config_path.write_text(yaml.safe_dump(job_config(operation, warehouse, source)))
        code, record, err = run_cli([operation, "--config", str(config_path)], capsys)
        assert code == 0, (record["error"], err[-2000:])
        state = view(warehouse)
        results[variant] = (
            state.latest,
            {i: row_ids(rows) for i, rows in state.rows_by_snapshot.items()},
            {t: row_ids(rows) for t, rows in state.rows_by_tag.items()},
        )
        _CLEAN_RESULTS.setdefault(operation, results["clean"])
    assert results["wrong"] == results["clean"]
