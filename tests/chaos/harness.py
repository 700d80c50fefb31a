"""The crash matrix: run a job with a fault, check the table, rerun it clean, check again.

Shared by `tests/chaos` (a small CI subset) and `scripts/chaos.py` (the large, time-bounded matrix).
A case is (job, fault): a storage fault from `paimon_format.storage.faults` (`write:3:halt`, `delete:1`, ...)
or a named crash step (`step:remove-orphan-files:listed`). Crashes are simulated in-process ("halt":
storage freezes at that operation, as if the process had died there, so no cleanup code can tidy up)
so that hundreds of cases share one SparkSession.

What each case proves (`CaseResult`):
* after the crash: every file the table references exists, and every snapshot that existed before
  still has exactly its files (readers are fine while nobody has rerun anything yet);
* after the rerun: pypaimon reads the latest snapshot and every tag with the rows of an uninterrupted
  run, every retained snapshot that existed before reads as before, nothing is committed twice;
* what the crash left behind is unreferenced and remove-orphan-files clears it.

A job joins the matrix with one line in `JOBS`. Counting a clean run (plan "none") tells how many
operations of each kind the job does, so the matrix covers every one of them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from jobs.runtime.registry import OPERATIONS
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.consumers import ConsumerManager
from paimon_format.data.writer import write_table_files
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage import faults
from paimon_format.storage.faults import FaultPlan, SimulatedCrash
from paimon_format.table import Table
from tests.support.merge_tables import build_mergeable_table
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    changelog_needs,
    fingerprint,
    listed_files,
    missing_needed,
    open_table,
    row_ids,
    unreferenced,
    view,
)


def _minutes_since(moment: str) -> int:
    """Minutes from `moment` (UTC) to now: an expiration time whose cutoff falls on that moment,
    give or take the length of the run."""
    import datetime as dt

    start = dt.datetime.fromisoformat(moment).replace(tzinfo=dt.timezone.utc)
    return int((dt.datetime.now(dt.timezone.utc) - start).total_seconds() // 60)


@dataclass(frozen=True)
class ChaosJob:
    """How to run one operation in the matrix: its YAML keys (`{source}` = an input directory), and
    whether it appends (a rerun after its commit landed would add the rows again, so the harness
    reruns an appending job only when its commit did not land, as an operator checking the table would)."""

    keys: dict[str, Any]
    appends: bool = False
    # a job that only deletes: after crash + rerun the table holds exactly the files an uninterrupted
    # run leaves (same set deleted, nothing more, nothing less)
    same_files: bool = False
    # the CLI operation, when the key names a variant of it (default: the key itself)
    operation: str = ""
    # ALTER TABLE SET on the variant's copy of the template before any run (`for_job`)
    table_options: dict[str, str] = field(default_factory=dict)
    # in the CI subset (`tests/chaos`, at its time budget); False: `scripts/chaos.py` only
    ci: bool = True
    # a function of this module run on the variant's copy of the template before any run (`for_job`),
    # by name: snapshots expired by hand, a branch, ...
    setup: str = ""
    # in the writer-vs-job race: False for a job that discards newer snapshots by design (rollback)
    races: bool = True
    # named crash steps the module declares as constants (`crash_steps` finds literal ones itself)
    named_steps: tuple[str, ...] = ()
    # fast-forward: main's snapshots from this id on become the branch's, so after a crash each holds
    # its old files or the branch's, and after the rerun they read as after an uninterrupted run
    # (its latest and tags are compared), not as before the job
    replaces_from: int | None = None


JOBS: dict[str, ChaosJob] = {
    "write": ChaosJob({"source": {"format": "parquet", "path": "{source}"}}, appends=True),
    "compact-manifests": ChaosJob({"mode": "full"}),
    # every partition's small files rewritten into one, one commit group each (partial progress: a
    # crash in group N keeps groups 1..N-1 committed, the rerun does the rest); the inputs stay for
    # the older snapshots
    "compact": ChaosJob(
        {"strategy": "full", "max_commit_bins": 1, "job_order": "partition-asc"},
        named_steps=tuple(
            f"compact:{step}#{group}"
            for group in (1, 2, 3)
            for step in ("after-files-written", "after-commit")
        ),
    ),
    "remove-orphan-files": ChaosJob({"older_than": "1h"}),
    "drop-partition": ChaosJob({"partitions": [{"dt": "2024-01-02"}]}),
    # exactly dt=2024-01-01 is past its expiration time (no max_expires: a rerun after the commit
    # landed must find nothing more to expire, as after an uninterrupted run)
    "expire-partitions": ChaosJob({"expiration_time": f"{_minutes_since('2024-01-01T12:00:00')} min"}),
    # keeps snapshots 5 and 6: expires 1-4, deleting the files snapshot 5's overwrite replaced (those
    # tag t2 does not hold), the expired manifest lists and the manifests only they named
    "expire-snapshots": ChaosJob({"retain_min": 2, "retain_max": 2}, same_files=True),
    # decoupled changelog retention (keeps 3 ids, snapshots keep 2): snapshots 1-4 become changelogs
    # 1-4 and changelogs 1-3 expire in the same run, 3 with the file of dt=2024-01-03 it appended
    # (snapshot 5 overwrote it); changelog 4 stays and keeps its own
    "expire-snapshots-decoupled": ChaosJob(
        {"retain_min": 2, "retain_max": 2},
        same_files=True,
        operation="expire-snapshots",
        table_options={"changelog.num-retained.min": "3", "changelog.num-retained.max": "3"},
        ci=False,
    ),
    # issue 17: tags, rollback, branch expiry. A tag on snapshot 4 (replace: a rerun after the tag
    # landed writes the same tag again)
    "create-tag": ChaosJob({"tag": "t_chaos", "snapshot": 4, "replace": True}, ci=False),
    # snapshots 1-2 expired before the run (as an expiry leaves them): deleting tag t2 deletes the
    # manifest lists only it still names, after its tag file (parked in tag-deletion/ for a rerun)
    "delete-tag": ChaosJob({"tags": ["t2"]}, same_files=True, setup="expire_first_two", ci=False),
    # the same through expiry: tag t2 was written before the run, older_than 1s expires it
    "expire-tags": ChaosJob({"older_than": "1s"}, same_files=True, setup="expire_first_two", ci=False),
    # back to snapshot 4: snapshots 5-6 go, and the files only they added (5's overwrite, 6's append)
    "rollback": ChaosJob(
        {"to_snapshot": 4},
        races=False,
        ci=False,
        named_steps=(
            "rollback:planned",
            "rollback:snapshot-deleted",
            "rollback:changelogs-and-tags-deleted",
            "rollback:files-deleted",
            "rollback:manifests-deleted",
            "rollback:manifest-lists-deleted",
        ),
    ),
    # main expires 1-4 as expire-snapshots does; branch b (from tag t2) expires its snapshots 2-3,
    # deleting the file only its overwritten snapshot 3 had, keeping main's and its tag's files
    "expire-snapshots-branches": ChaosJob(
        {"retain_min": 2, "retain_max": 2, "branches": "all"},
        same_files=True,
        operation="expire-snapshots",
        setup="branch_from_t2",
        ci=False,
    ),
    # issue 30: branches. A branch from tag t2 (a rerun finishes the unfinished branch of its own run)
    "create-branch": ChaosJob({"branch": "chaos", "tag": "t2"}, ci=False),
    # issue 30: _SUCCESS files for two partitions (a rerun marks them again, keeping creation times)
    "mark-partition-done": ChaosJob({"partitions": [{"dt": "2024-01-01"}, {"dt": "2024-01-02"}]}, ci=False),
    # everything but the schema goes (writers must be stopped, as for Paimon's procedure: no race)
    "purge-files": ChaosJob({"confirm": True}, same_files=True, races=False, ci=False),
    # branch b (from t2, its own commits) goes with the file only its overwritten snapshot 3 had; a
    # rerun after its metadata went finds no branch (strict: false: a warning, exit 0)
    "delete-branch": ChaosJob(
        {"branches": ["b"], "strict": False},
        setup="branch_from_t2",
        ci=False,
        named_steps=(
            "delete-branch:planned",
            "delete-branch:metadata-deleted",
            "delete-branch:files-deleted",
            "delete-branch:manifests-deleted",
            "delete-branch:manifest-lists-deleted",
        ),
    ),
    "rename-branch": ChaosJob(
        {"from_branch": "b", "to_branch": "c"},
        setup="branch_from_t2",
        ci=False,
        named_steps=("rename-branch:copied",),
    ),
    # issue 30 tags: t2 gets a new name (a rerun after the old name went finds it renamed: exit 0)
    "rename-tag": ChaosJob({"from_tag": "t2", "to_tag": "t2-renamed"}, ci=False),
    # t2 (its snapshot 2 expired) moves to snapshot 4: the lists only it named go after the overwrite
    "replace-tag": ChaosJob(
        {"tag": "t2", "snapshot": 4},
        same_files=True,
        setup="expire_first_two",
        ci=False,
        named_steps=(
            "replace-tag:old-tag-parked",
            "replace-tag:tag-replaced",
            "replace-tag:files-deleted",
            "replace-tag:manifests-deleted",
            "replace-tag:manifest-lists-deleted",
        ),
    ),
    # main becomes branch b: main's snapshots 2-6 are replaced by b's, the files only they used go
    "fast-forward": ChaosJob(
        {"branch": "b"},
        setup="branch_from_t2",
        races=False,
        replaces_from=2,
        ci=False,
        named_steps=(
            "fast-forward:planned",
            "fast-forward:schemas-copied",
            "fast-forward:snapshot-copied",
            "fast-forward:metadata-done",
            "fast-forward:files-deleted",
            "fast-forward:manifests-deleted",
            "fast-forward:manifest-lists-deleted",
        ),
    ),
    # issue 30: consumers. One consumer file written (a rerun writes the same bytes); two of three
    # consumers deleted one by one (a rerun deletes the rest)
    "reset-consumer": ChaosJob({"consumer_id": "chaos", "next_snapshot": 4}, ci=False),
    "clear-consumers": ChaosJob({"include": "etl-.*"}, setup="three_consumers", ci=False),
    # issue 30: branch b's own files (600-602, 660-662) join main in one APPEND snapshot; a rerun after
    # it landed finds nothing to add. On its own table (`mergeable_table`): the template's OVERWRITE
    # snapshot 5 is a history Paimon's merge refuses
    "merge-branch": ChaosJob(
        {"source_branch": "b"},
        setup="mergeable_table",
        ci=False,
        named_steps=("merge-branch:planned", "merge-branch:committed"),
    ),
    # issue 30: long-lived changelogs 1-4 (snapshots 1-4 expired into them); counted from snapshot 6,
    # retain_max 4 expires changelogs 1-2 with the files only they needed (3's dt=2024-01-03 file
    # stays: changelog 3 keeps it), 3-4 stay
    "expire-changelogs": ChaosJob(
        {"retain_max": 4, "retain_min": 1, "older_than": "2100-01-01 00:00:00"},
        same_files=True,
        table_options={"changelog.num-retained.min": "10", "changelog.num-retained.max": "10"},
        setup="expire_into_changelogs",
        ci=False,
        named_steps=(
            "expire-snapshots:changelog-planned",
            "expire-snapshots:changelog-files-deleted",
            "expire-snapshots:changelog-manifests-deleted",
            "expire-snapshots:changelog-manifest-lists-deleted",
            "expire-snapshots:changelog-deleted",
        ),
    ),
    # snapshot 1's manifest is lost: snapshot 6 is repaired into 7 without it, and snapshot 5's
    # overwrite manifest (deleting the dt=2024-01-03 file the lost manifest added) is rewritten
    # without that DELETE; snapshots 1-6 and tag t2 still name the lost manifest (the checks read
    # them with it put back: `lost_files_back`)
    "remove-unexisting-manifests": ChaosJob({"max_missing_ratio": 0.5}, setup="lose_a_manifest", ci=False),
}
OLD = time.time() - 3 * 86400  # mtime of the planted orphans: older than any older_than floor
ORPHAN_CLEANUP = {"older_than": "1s", "force": True}
_STEP = re.compile(r"crash_point\(\s*f?\"(\{OPERATION\}|[\w-]+):([\w-]+)\"")


def available_jobs(full: bool = False) -> list[str]:
    """The JOBS whose module is committed in this checkout (work in progress is left out); those
    of the CI subset unless `full` (the whole matrix of `scripts/chaos.py`)."""
    from jobs.runtime.registry import OPERATIONS

    found = []
    for name, job in JOBS.items():
        module = OPERATIONS[operation_of(name)].module.replace(".", "/") + ".py"
        if (full or job.ci) and Path(module).exists() and _tracked(module):
            found.append(name)
    return found


def operation_of(job: str) -> str:
    """The CLI operation a JOBS key runs."""
    return (JOBS[job].operation if job in JOBS else "") or job


def _tracked(path: str) -> bool:
    import subprocess

    result = subprocess.run(["git", "ls-files", "--error-unmatch", path], capture_output=True)
    return result.returncode == 0


def crash_steps(operation: str) -> list[str]:
    """The named crash points in the job's module (`crash_point("<op>:<step>")`), and those of a
    shared deletion it declares as `STEPS = TagSteps.of(OPERATION)` (delete-tag, expire-tags)."""
    import importlib

    from jobs.deletion.tags import TagSteps
    from jobs.runtime.registry import OPERATIONS

    job, operation = operation, operation_of(operation)
    module = OPERATIONS[operation].module
    path = Path(module.replace(".", "/") + ".py")
    steps = []
    for owner, step in _STEP.findall(path.read_text()):
        if owner in ("{OPERATION}", operation):
            steps.append(f"{operation}:{step}")
    declared = getattr(importlib.import_module(module), "STEPS", None)
    if isinstance(declared, TagSteps):
        steps.extend(dataclasses.astuple(declared))
    steps.extend(JOBS[job].named_steps if job in JOBS else ())
    return sorted(set(steps))


# -- the fixture every case copies ---------------------------------------------------------------


@dataclass
class Template:
    """A prepared warehouse, a Parquet source, and what readers saw before any job ran."""

    warehouse: str
    source: str
    rows_by_snapshot: dict[int, list[int]]
    rows_by_tag: dict[str, list[int]]
    files_by_snapshot: dict[int, set[str]]
    fingerprint: dict[str, str]


def prepare(workdir: str) -> Template:
    warehouse = os.path.join(workdir, "template", "wh")
    table = build_sample_table(warehouse, commits=4, rows_per_commit=6)
    replacement = batch(40, 2, days=1).set_column(1, "dt", pa.array([REPLACED_PARTITION] * 2))
    replace_partition(table, REPLACED_PARTITION, replacement)
    append_rows(table, batch(50, 6))
    plant_orphans(table)
    source = os.path.join(workdir, "template", "source")
    os.makedirs(source)
    pq.write_table(
        pa.table({"id": pa.array([900, 901, 902], pa.int64()), "dt": ["2024-01-01"] * 3, "v": list("abc")}),
        os.path.join(source, "part-0.parquet"),
    )
    state = view(warehouse)
    return Template(
        warehouse,
        source,
        {i: row_ids(rows) for i, rows in state.rows_by_snapshot.items()},
        {name: row_ids(rows) for name, rows in state.rows_by_tag.items()},
        snapshot_files(table),
        fingerprint(warehouse),
    )


def for_job(template: Template, job: str, workdir: str) -> Template:
    """The template as `job` starts from: a copy with its `table_options` set (a new schema, as an
    ALTER TABLE SET makes; snapshots and tags stay as they were) and its `setup` run, or the
    template itself."""
    spec = JOBS.get(job)
    if spec is None or not (spec.table_options or spec.setup):
        return template
    warehouse = shutil.copytree(template.warehouse, os.path.join(workdir, f"template-{job}", "wh"))
    table = open_table(warehouse)
    if spec.table_options:
        schema = table.schema
        altered = dataclasses.replace(
            schema, id=schema.id + 1, options={**schema.options, **spec.table_options}
        )
        if not table.schema_manager.commit_new_schema(altered):
            raise AssertionError(f"{job}: could not set {spec.table_options} on the template")
        table = open_table(warehouse)
    if spec.setup:
        globals()[spec.setup](table)
        table = open_table(warehouse)
    with lost_files_back(warehouse, warehouse):
        state = view(warehouse)
        files_by_snapshot = snapshot_files(table)
    return dataclasses.replace(
        template,
        warehouse=warehouse,
        rows_by_snapshot={i: row_ids(rows) for i, rows in state.rows_by_snapshot.items()},
        rows_by_tag={name: row_ids(rows) for name, rows in state.rows_by_tag.items()},
        files_by_snapshot=files_by_snapshot,
        fingerprint=fingerprint(warehouse),
    )


LOST = "lost"  # next to a variant's template warehouse: the files its setup took from the table


def lose_a_manifest(table: Table) -> None:
    """Snapshot 1's manifest (it added ids 0-5) taken away, kept in `LOST` for the checks."""
    from paimon_format.scan.snapshot_scan import data_manifests

    first = data_manifests(table, table.snapshot_manager.snapshot(1))[0].file_name
    stash = os.path.join(os.path.dirname(table.path.rsplit("/", 2)[0]), LOST, "manifest")
    os.makedirs(stash, exist_ok=True)
    shutil.move(table.manifest_path(first), os.path.join(stash, first))


@contextmanager
def lost_files_back(template_warehouse: str, warehouse: str) -> Iterator[None]:
    """The files the template's setup took from the table back in `warehouse` while the checks read
    it (the older snapshots still name them: a repair leaves those as they are), gone again after:
    the job and its rerun must find them missing. Nothing when the setup took nothing."""
    stash = os.path.join(os.path.dirname(template_warehouse), LOST)
    lost = [os.path.relpath(os.path.join(d, n), stash) for d, _, names in os.walk(stash) for n in names]
    root = open_table(warehouse).path if lost else ""
    for relpath in lost:
        shutil.copyfile(os.path.join(stash, relpath), os.path.join(root, relpath))
    try:
        yield
    finally:
        for relpath in lost:
            os.remove(os.path.join(root, relpath))


def expire_into_changelogs(table: Table) -> None:
    """Snapshots 1-4 expired by our expire-snapshots (retain 2); the variant's changelog retention
    (10) keeps them all as long-lived changelogs."""
    from pyspark.sql import SparkSession  # Spark only for the variants that need it

    from jobs.expire_snapshots import ExpiryRequest, expire_snapshots

    spark = SparkSession.builder.getOrCreate()
    expire_snapshots(
        spark, table, ExpiryRequest(retain_min=2, retain_max=2, older_than="2100-01-01 00:00:00")
    )


def expire_first_two(table: Table) -> None:
    """Snapshots 1 and 2 gone as an expiry leaves them: their snapshot files and snapshot 1's lists
    (snapshot 2's are tag t2's; appends delete no data file). Tag t2 now holds an expired snapshot."""
    manager = table.snapshot_manager
    first = manager.snapshot(1)
    for name in (first.base_manifest_list, first.delta_manifest_list):
        table.file_io.delete(table.manifest_path(name))
    for snapshot_id in (1, 2):
        table.file_io.delete(manager.snapshot_path(snapshot_id))
    manager.write_earliest_hint(3)


def mergeable_table(table: Table) -> None:
    """The table replaced by one Paimon's branch merge accepts (`merge_tables.build_mergeable_table`:
    append-only histories from snapshot 1, `branch-merge.enabled`), with the template's orphans."""
    warehouse = table.path.rsplit("/", 2)[0]
    shutil.rmtree(table.path)
    plant_orphans(build_mergeable_table(warehouse))


def three_consumers(table: Table) -> None:
    """Streaming consumers etl-1 and etl-2 (clear-consumers' `etl-.*` deletes them) and audit."""
    consumers = ConsumerManager(table.file_io, table.path)
    for consumer_id, next_snapshot in (("etl-1", 3), ("etl-2", 5), ("audit", 2)):
        consumers.reset_consumer(consumer_id, next_snapshot)


def branch_from_t2(table: Table) -> None:
    """Branch b from tag t2 with its own commits (`table_states.branch_from_t2`)."""
    from tests.support.table_states import branch_from_t2 as make_branch

    make_branch(table)


REPLACED_PARTITION = "2024-01-03"  # snapshot 5 overwrites it: files an expiry of snapshots 3-4 deletes


def replace_partition(table: Table, partition: str, data: pa.Table) -> int:
    """An OVERWRITE snapshot replacing one partition's files with `data` (drops files for expiry)."""
    latest = table.snapshot_manager.latest()
    first_sequence = latest.total_record_count + 1000
    written = write_table_files(table.file_io, table.path, table.schema, data, first_sequence)
    messages = [CommitMessage(part, bucket, -1, files) for part, bucket, files in written]
    snapshot = SnapshotCommit(table).overwrite(
        messages, lambda part: table.partition_values(part)[0] == partition
    )
    return snapshot.id


def plant_orphans(table: Table) -> None:
    """Old files no snapshot references (a crashed writer's leftovers) for remove-orphan-files to find."""
    root = table.path
    names = [
        "dt=2024-01-01/bucket-0/data-00000000-0000-4000-8000-000000000001-0.parquet",
        "manifest/manifest-00000000-0000-4000-8000-000000000002-0",
    ]
    for name in names:
        path = os.path.join(root, name)
        with open(path, "wb") as handle:
            handle.write(b"orphan")
        os.utime(path, (OLD, OLD))


def snapshot_files(table: Table) -> dict[int, set[str]]:
    manager = table.snapshot_manager
    return {
        i: {e.file.file_name for e in live_entries(table, manager.snapshot(i))}
        for i in manager.snapshot_ids()
    }


# -- running a job -------------------------------------------------------------------------------


def write_config(job: str, warehouse: str, template: Template, path: str, extra: dict | None = None) -> str:
    keys = json.loads(json.dumps(JOBS[job].keys if job in JOBS else {}).replace("{source}", template.source))
    # No table lock: the matrix counts and crashes the table's own storage operations (a lock's
    # create would become a delete-only job's "commit point"), and a halted run's lock would refuse
    # the rerun for its ttl. The lock's crash behaviour is tested in tests/jobs/test_run_lock.py.
    unlocked = {"lock": {"enabled": False}} if OPERATIONS[operation_of(job)].takes_lock else {}
    config = {"warehouse": warehouse, "table": IDENTIFIER, **unlocked, **keys, **(extra or {})}
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle)
    return path


def run_job(operation: str, config: str, record_path: str) -> tuple[int | str, dict]:
    """Run the CLI in-process; "crash" when a simulated crash ended it."""
    from jobs.__main__ import main

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        code: int | str = main(
            [operation, "--config", config, "--output", record_path, "--log-level", "ERROR"]
        )
    except SimulatedCrash:
        # a dead process leaves no log handlers behind; this one lives on, so restore its logging
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        return "crash", {}
    try:
        with open(record_path) as handle:
            return code, json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return code, {}


def count_operations(job: str, template: Template, workdir: str) -> dict[str, int]:
    """How many reads, writes, lists, deletes and creates a clean run of `job` makes (all processes)."""
    warehouse = shutil.copytree(template.warehouse, os.path.join(workdir, f"count-{job}", "wh"))
    state = os.path.join(workdir, f"count-{job}", "faults")
    plan = FaultPlan.parse("none", state)
    config = write_config(job, warehouse, template, os.path.join(workdir, f"count-{job}", "job.yaml"))
    with faults.injected(plan):
        code, record = run_job(operation_of(job), config, os.path.join(workdir, f"count-{job}", "run.json"))
        if code != 0:
            raise AssertionError(f"clean run of {job} failed ({code}): {record.get('error')}")
        try:
            with open(os.path.join(state, "counts.json")) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return {}


@dataclass
class Reference:
    """An uninterrupted run: what readers see afterwards, and how many snapshots it committed."""

    latest_rows: list[int]
    rows_by_tag: dict[str, list[int]]
    snapshot_ids: list[int]
    new_snapshots: int
    files: set[str] = field(default_factory=set)  # table-relative paths of every file afterwards
    changelog_ids: list[int] = field(default_factory=list)  # long-lived changelogs afterwards
    branch_snapshot_ids: dict[str, list[int]] = field(default_factory=dict)  # every branch's, afterwards


def reference_run(job: str, template: Template, workdir: str) -> Reference:
    base = os.path.join(workdir, f"reference-{job}")
    warehouse = shutil.copytree(template.warehouse, os.path.join(base, "wh"))
    code, record = run_job(
        operation_of(job), write_config(job, warehouse, template, f"{base}/job.yaml"), f"{base}/run.json"
    )
    if code != 0:
        raise AssertionError(f"clean run of {job} failed ({code}): {record.get('error')}")
    with lost_files_back(template.warehouse, warehouse):
        state = view(warehouse)
    ids = sorted(state.rows_by_snapshot)
    return Reference(
        row_ids(state.latest_rows),
        {name: row_ids(rows) for name, rows in state.rows_by_tag.items()},
        ids,
        len([i for i in ids if i not in template.rows_by_snapshot]),
        comparable_files(open_table(warehouse)),
        open_table(warehouse).snapshot_manager.changelog_ids(),
        branch_snapshot_ids(open_table(warehouse)),
    )


def branch_snapshot_ids(table: Table) -> dict[str, list[int]]:
    return {
        name: table.for_branch(name).snapshot_manager.snapshot_ids()
        for name in table.branch_manager.branch_names()
    }


HINTS = {"snapshot/LATEST", "snapshot/EARLIEST"}


def comparable_files(table: Table) -> set[str]:
    """Every file of the table apart from the hints (which only speed up reads, and may lag)."""
    return listed_files(table) - HINTS


# -- one case ------------------------------------------------------------------------------------


@dataclass
class CaseResult:
    job: str
    fault: str
    exit_code: int | str = 0
    injected: int = 0  # faults that actually hit
    untouched: bool = False  # the failed run left every byte as it was: its rerun is the reference run
    rerun: bool = False
    orphans_checked_by_job: bool = False
    lost_files: list[str] = field(default_factory=list)  # referenced but missing, at any check
    lost_commits: list[str] = field(default_factory=list)  # rows/snapshots/tags not as they must be
    double_commits: int = 0
    orphans_left: list[str] = field(default_factory=list)  # leftovers orphan cleaning would not clear
    problems: list[str] = field(default_factory=list)  # anything else wrong (e.g. a rerun failing)

    @property
    def ok(self) -> bool:
        return not (
            self.lost_files or self.lost_commits or self.double_commits or self.orphans_left or self.problems
        )


def run_case(
    job: str, fault: str, template: Template, reference: Reference, workdir: str, run_orphan_job: bool = False
) -> CaseResult:
    """Run `job` with `fault`, check, rerun clean, check against `reference`, check the leftovers.

    Leftovers are judged by remove-orphan-files' own rule (`judge_file`); with `run_orphan_job` the
    job itself runs and must leave nothing unreferenced behind.
    """
    result = CaseResult(job, fault)
    case_dir = tempfile.mkdtemp(prefix="case-", dir=workdir)
    try:
        warehouse = shutil.copytree(template.warehouse, os.path.join(case_dir, "wh"))
        config = write_config(job, warehouse, template, os.path.join(case_dir, "job.yaml"))
        plan = FaultPlan.parse(
            "none" if fault.startswith("step:") else fault, os.path.join(case_dir, "faults")
        )
        step = fault.removeprefix("step:") if fault.startswith("step:") else None
        with faults.injected(plan), faults.halt_at_step(step, plan) if step else nullcontext():
            result.exit_code, _ = run_job(operation_of(job), config, os.path.join(case_dir, "crashed.json"))
            result.injected = len(faults.hits(plan))
        if result.exit_code != 0 and fingerprint(warehouse) == template.fingerprint:
            result.untouched = True
            return result
        table = open_table(warehouse)
        with lost_files_back(template.warehouse, warehouse):
            _check_after_crash(table, template, reference, result)

        landed = table.snapshot_manager.latest_id() != max(template.rows_by_snapshot)
        if result.exit_code != 0 and not (JOBS[job].appends and landed):
            result.rerun = True
            code, record = run_job(operation_of(job), config, os.path.join(case_dir, "rerun.json"))
            if code != 0:
                result.problems.append(f"rerun exited {code}: {record.get('error')}")
        with lost_files_back(template.warehouse, warehouse):
            _check_final(warehouse, template, reference, result)
            _check_leftovers(warehouse, template, case_dir, result, run_orphan_job)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)
    return result


def _check_after_crash(table: Table, template: Template, reference: Reference, result: CaseResult) -> None:
    """Before any rerun, readers of every snapshot an uninterrupted run keeps, and of every tag, are
    fine. Snapshots (and long-lived changelogs) an uninterrupted run expires may be half-deleted:
    expiry deletes their files before their snapshot (changelog) files, as Paimon does, and the
    rerun finishes them."""
    expiring = frozenset(template.files_by_snapshot) - frozenset(reference.snapshot_ids)
    template_changelogs = open_table(template.warehouse).snapshot_manager.changelog_ids()
    expiring_changelogs = frozenset(template_changelogs) - frozenset(reference.changelog_ids)
    expiring_branch = frozenset(
        (name, snapshot_id)
        for name, ids in branch_snapshot_ids(open_table(template.warehouse)).items()
        for snapshot_id in ids
        if snapshot_id not in reference.branch_snapshot_ids.get(name, ())
    )
    try:
        result.lost_files += sorted(missing_needed(table, expiring, expiring_branch, expiring_changelogs))
        kept = [i for i in table.snapshot_manager.changelog_ids() if i in reference.changelog_ids]
        result.lost_files += missing_changelog_needs(table, kept)
        present = set(table.snapshot_manager.snapshot_ids())
        replaced = JOBS[result.job].replaces_from if result.job in JOBS else None
        for snapshot_id, files in template.files_by_snapshot.items():
            if snapshot_id in expiring or snapshot_id not in present:
                continue
            if replaced is not None and snapshot_id >= replaced:
                continue
            if snapshot_files_of(table, snapshot_id) != files:
                result.lost_commits.append(f"after the crash, snapshot {snapshot_id} changed its files")
    except Exception as error:  # noqa: BLE001 - an unreadable table is the finding itself
        result.problems.append(f"after the crash the table is unreadable: {type(error).__name__}: {error}")


def snapshot_files_of(table: Table, snapshot_id: int) -> set[str]:
    return {e.file.file_name for e in live_entries(table, table.snapshot_manager.snapshot(snapshot_id))}


def _check_final(warehouse: str, template: Template, reference: Reference, result: CaseResult) -> None:
    if result.problems:
        return
    try:
        state = view(warehouse)
        table = open_table(warehouse)
        result.lost_files += sorted(missing_needed(table))
        manager = table.snapshot_manager
        # decoupled: every retained snapshot becomes such a changelog when it expires
        future = manager.snapshot_ids() if decoupled_changelog(result.job) else []
        result.lost_files += missing_changelog_needs(table, manager.changelog_ids(), future)
    except Exception as error:  # noqa: BLE001
        result.problems.append(
            f"after the rerun pypaimon cannot read the table: {type(error).__name__}: {error}"
        )
        return
    if row_ids(state.latest_rows) != reference.latest_rows:
        result.lost_commits.append(
            f"latest snapshot {state.latest} rows differ from an uninterrupted run "
            f"({len(state.latest_rows)} vs {len(reference.latest_rows)} rows)"
        )
    for name, rows in reference.rows_by_tag.items():
        if name not in state.rows_by_tag:
            result.lost_commits.append(f"tag {name} is gone")
        elif row_ids(state.rows_by_tag[name]) != rows:
            result.lost_commits.append(f"tag {name} reads different rows")
    replaced = JOBS[result.job].replaces_from if result.job in JOBS else None
    for snapshot_id, rows in state.rows_by_snapshot.items():
        if replaced is not None and snapshot_id >= replaced:
            continue
        if (
            snapshot_id in template.rows_by_snapshot
            and row_ids(rows) != template.rows_by_snapshot[snapshot_id]
        ):
            result.lost_commits.append(f"snapshot {snapshot_id} reads different rows than before the job")
    for snapshot_id in reference.snapshot_ids:
        if snapshot_id in template.rows_by_snapshot and snapshot_id not in state.rows_by_snapshot:
            result.lost_commits.append(f"snapshot {snapshot_id} is gone but an uninterrupted run keeps it")
    new = len([i for i in state.rows_by_snapshot if i not in template.rows_by_snapshot])
    result.double_commits = max(0, new - reference.new_snapshots)
    if JOBS[result.job].same_files:
        _check_same_files(warehouse, reference, result)


def decoupled_changelog(job: str) -> bool:
    """The job's table keeps changelogs longer than snapshots (its `table_options` say so)."""
    return job in JOBS and any(key.startswith("changelog.") for key in JOBS[job].table_options)


def missing_changelog_needs(
    table: Table, changelog_ids: list[int], snapshot_ids: tuple[int, ...] | list[int] = ()
) -> list[str]:
    """Files the given long-lived changelogs need (by the independent oracle `changelog_needs`) that
    are gone: a streaming reader of a retained changelog must find all of them. `snapshot_ids`:
    retained snapshots of a decoupled table, which become changelogs when they expire (Paimon's
    decoupled expiry keeps the append-origin files their deltas delete until then)."""
    manager = table.snapshot_manager
    roots = [("changelog", i, manager.changelog) for i in changelog_ids]
    roots += [("snapshot", i, manager.snapshot) for i in snapshot_ids]
    listed = listed_files(table)
    missing = []
    for kind, root_id, read in roots:
        try:
            needs = changelog_needs(table, read(root_id))
        except Exception as error:  # noqa: BLE001 - a changelog whose lists are gone is the finding
            missing.append(f"{kind} {root_id} as changelog: unreadable ({type(error).__name__}: {error})")
            continue
        missing += [f"{path} ({kind} {root_id} needs it as changelog)" for path in sorted(needs - listed)]
    return missing


def _check_same_files(warehouse: str, reference: Reference, result: CaseResult) -> None:
    """A deleting job, crashed and rerun, deletes exactly what an uninterrupted run deletes."""
    files = comparable_files(open_table(warehouse))
    kept_wrongly = sorted(files - reference.files)
    deleted_wrongly = sorted(reference.files - files)
    remaining = open_table(warehouse).snapshot_manager.snapshot_ids()
    if remaining != sorted(reference.snapshot_ids):
        result.lost_commits.append(
            f"snapshots {remaining} remain, an uninterrupted run keeps {sorted(reference.snapshot_ids)}"
        )
    result.lost_files += [f"{path} (an uninterrupted run keeps it)" for path in deleted_wrongly]
    if kept_wrongly:
        result.problems.append(
            f"{len(kept_wrongly)} files an uninterrupted run deletes are left, e.g. {kept_wrongly[:3]}"
        )


_KEPT_STATE = ("success-file", "consumer")  # unreferenced by any root, yet state orphan cleaning keeps


def _check_leftovers(
    warehouse: str, template: Template, case_dir: str, result: CaseResult, run_orphan_job: bool
) -> None:
    """Leftovers must be unreferenced files remove-orphan-files deletes (by its rule, or by running it)."""
    from paimon_format.maintenance.orphan_rules import DELETABLE, judge_file

    left = unreferenced(open_table(warehouse))
    # a partition's _SUCCESS file is mark-partition-done's output, which orphan cleaning keeps (foreign);
    # a consumer file is a streaming reader's position, no root references it and it stays (Paimon too)
    result.orphans_left = sorted(
        p for p in left if judge_file(p).rule != DELETABLE and judge_file(p).kind not in _KEPT_STATE
    )
    if not (run_orphan_job and left and not result.problems and "remove-orphan-files" in available_jobs()):
        return
    _age_everything(warehouse)
    config = write_config(
        "remove-orphan-files", warehouse, template, os.path.join(case_dir, "orphans.yaml"), ORPHAN_CLEANUP
    )
    code, record = run_job("remove-orphan-files", config, os.path.join(case_dir, "orphans.json"))
    result.orphans_checked_by_job = True
    if code != 0:
        result.problems.append(f"remove-orphan-files exited {code}: {record.get('error')}")
        return
    table = open_table(warehouse)
    result.orphans_left = sorted(p for p in unreferenced(table) if judge_file(p).kind not in _KEPT_STATE)
    result.lost_files += sorted(missing_needed(table))


def _age_everything(warehouse: str) -> None:
    """Make every file look old, so older_than does not keep a crash's fresh leftovers."""
    for directory, _, files in os.walk(warehouse):
        for name in files:
            os.utime(os.path.join(directory, name), (OLD, OLD))


# -- the matrix ----------------------------------------------------------------------------------


def fault_cases(job: str, counts: dict[str, int], actions: tuple[str, ...] = ("halt", "fail")) -> list[str]:
    """Every counted operation of a clean run, hit once per action, plus every named crash step."""
    cases = []
    for operation in faults.OPERATIONS:
        for nth in range(1, counts.get(operation, 0) + 1):
            cases.extend(f"{operation}:{nth}:{action}" for action in actions)
    cases.extend(f"step:{step}" for step in crash_steps(job))
    return cases


# -- races ---------------------------------------------------------------------------------------

RACE_PARTITION = "2024-01-05"  # the writer's rows go here: no job in JOBS drops or expires it
_WRITER = """
import json, os, sys
import pyarrow as pa
from paimon_format.commit import SnapshotCommit
from tests.support.table_states import append_rows, open_table
warehouse, first_id, stop_file, min_commits, max_commits, partition = sys.argv[1:7]
first_id, min_commits, max_commits = int(first_id), int(min_commits), int(max_commits)
table = open_table(warehouse)
committer = SnapshotCommit(table)
commits = []
while len(commits) < min_commits or (len(commits) < max_commits and not os.path.exists(stop_file)):
    ids = [first_id + 2 * len(commits), first_id + 2 * len(commits) + 1]
    data = pa.table({"id": pa.array(ids, pa.int64()), "dt": [partition] * 2, "v": ["race"] * 2})
    commits.append({"snapshot": append_rows(table, data, committer), "ids": ids})
    if len(commits) == 1:
        print("ready", flush=True)
print(json.dumps({"user": committer.commit_user, "commits": commits}), flush=True)
"""


@dataclass
class RaceResult:
    job: str
    rounds: int = 0
    writer_commits: int = 0
    job_failures: list[str] = field(default_factory=list)
    races_lost: int = 0  # the job gave up with exit 3 after the writer kept winning: allowed, nothing changed
    lost_commits: list[str] = field(default_factory=list)
    lost_files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.job_failures or self.lost_commits or self.lost_files)


def race(
    job: str,
    template: Template,
    reference: Reference,
    workdir: str,
    rounds: int = 2,
    max_writer_commits: int = 12,
) -> RaceResult:
    """A writer process commits in a loop while `job` runs, `rounds` times on one table.

    Afterwards every commit the writer made is in the snapshot history (or, for a job that expires
    snapshots, its rows are in the latest snapshot), the latest snapshot holds all the writer's rows
    plus exactly what an uninterrupted run of the job leaves, and no referenced file is missing.
    """
    import subprocess
    import sys

    result = RaceResult(job)
    base = tempfile.mkdtemp(prefix=f"race-{job}-", dir=workdir)
    warehouse = shutil.copytree(template.warehouse, os.path.join(base, "wh"))
    config = write_config(job, warehouse, template, os.path.join(base, "job.yaml"))
    written: list[int] = []
    history: list[tuple[int, str]] = []
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    for round_ in range(rounds):
        stop = os.path.join(base, f"stop-{round_}")
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                warehouse,
                str(100_000 + round_ * 10_000),
                stop,
                "2",
                str(max_writer_commits),
                RACE_PARTITION,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = writer.stdout.readline().strip()  # blocks until the writer's first commit landed
        code, record = (
            run_job(operation_of(job), config, os.path.join(base, f"run-{round_}.json"))
            if ready == "ready"
            else (None, {})
        )
        open(stop, "w").close()
        out, err = writer.communicate(timeout=300)
        if ready != "ready" or writer.returncode != 0:
            result.job_failures.append(f"writer failed: {err.strip().splitlines()[-1:]}")
            continue
        if code == 3:
            result.races_lost += 1
        elif code != 0:
            result.job_failures.append(f"round {round_}: {job} exited {code}: {record.get('error')}")
        report = json.loads(out.strip().splitlines()[-1])
        result.rounds += 1
        result.writer_commits += len(report["commits"])
        for commit in report["commits"]:
            written.extend(commit["ids"])
            history.append((commit["snapshot"], report["user"]))
    table = open_table(warehouse)
    manager = table.snapshot_manager
    present = set(manager.snapshot_ids())
    for snapshot_id, user in history:
        if snapshot_id in present and manager.snapshot(snapshot_id).commit_user != user:
            result.lost_commits.append(f"snapshot {snapshot_id} is not the writer's commit")
    with lost_files_back(template.warehouse, warehouse):
        state = view(warehouse)
    latest = row_ids(state.latest_rows)
    missing = sorted(set(written) - set(latest))
    if missing:
        result.lost_commits.append(f"{len(missing)} rows the writer committed are not in the latest snapshot")
    others = sorted(set(latest) - set(written))
    allowed = [reference.latest_rows] + (
        [template.rows_by_snapshot[max(template.rows_by_snapshot)]] if result.races_lost == rounds else []
    )
    if others not in allowed:
        result.lost_commits.append(
            "the rows besides the writer's differ from an uninterrupted run of the job"
        )
    with lost_files_back(template.warehouse, warehouse):
        result.lost_files = sorted(missing_needed(table))
    shutil.rmtree(base, ignore_errors=True)
    return result
