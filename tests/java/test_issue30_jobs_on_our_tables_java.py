"""Issue 30's branch and tag jobs on a table WE wrote, read by Paimon's Java before and after.

The Java-written side is covered by test_branch_jobs_java.py and test_tag_procedures_java.py (with
differentials where the bundle has the procedure); this is the other half of "works on our tables
and on Java-written ones": our sample table (tests/support/table_states: snapshots 1-4, tag t2 on 2,
branch b from t2 with an append, an overwrite and another append). After each job Java reads every
remaining snapshot, tag and branch as it read them before, the new state as the issue says (a created
branch as its source, a renamed branch or tag as before, a replaced tag as its new snapshot, a
fast-forwarded main as the branch, a rolled-back main as the target), and no file a remaining root
needs is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from paimon_format.table import Table
from tests.java.helpers import java_reads, run_job
from tests.java.oracle import JavaPaimon
from tests.support.table_states import (
    IDENTIFIER,
    branch_from_t2,
    build_sample_table,
    copy_warehouse,
    missing_needed,
    open_table,
)

pytestmark = pytest.mark.java

Ref = tuple[str, str]
SNAPSHOTS = {("snapshot", str(i)) for i in range(1, 5)}

# operation, its keys, the refs it changes (not compared with before), {new ref: the ref it reads as before}
CASES: list[tuple[str, dict[str, Any], set[Ref], dict[Ref, Ref]]] = [
    ("create-branch", {"branch": "c", "tag": "t2"}, set(), {("branch", "c"): ("tag", "t2")}),
    ("create-branch", {"branch": "c"}, set(), {("branch", "c"): ("snapshot", "4")}),
    ("delete-branch", {"branches": ["b"]}, {("branch", "b")}, {}),
    (
        "rename-branch",
        {"from_branch": "b", "to_branch": "c"},
        {("branch", "b")},
        {("branch", "c"): ("branch", "b")},
    ),
    ("fast-forward", {"branch": "b"}, SNAPSHOTS, {("main", ""): ("branch", "b")}),
    ("rename-tag", {"from_tag": "t2", "to_tag": "t9"}, {("tag", "t2")}, {("tag", "t9"): ("tag", "t2")}),
    ("replace-tag", {"tag": "t2", "snapshot": 4}, {("tag", "t2")}, {("tag", "t2"): ("snapshot", "4")}),
    ("rollback", {"to_snapshot": 3}, {("snapshot", "4")}, {("main", ""): ("snapshot", "3")}),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("issue30_ours") / "wh")
    branch_from_t2(build_sample_table(warehouse))
    return warehouse


@pytest.mark.parametrize(
    ("operation", "keys", "changed", "new_state"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_java_reads_our_table_after_the_job(
    spark_session,
    java_paimon: JavaPaimon,
    template: str,
    tmp_path: Path,
    operation: str,
    keys: dict[str, Any],
    changed: set[Ref],
    new_state: dict[Ref, Ref],
) -> None:
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    path = open_table(warehouse).path
    before = java_reads(java_paimon, path)
    before[("main", "")] = java_paimon.read(path)

    code, record = run_job(tmp_path / "run", operation, {"warehouse": warehouse, "table": IDENTIFIER, **keys})
    assert code == 0, record.get("error")

    after = java_reads(java_paimon, path)
    after[("main", "")] = java_paimon.read(path)
    for ref, source in new_state.items():
        assert after[ref] == before[source], f"{operation}: Java reads {ref} not as {source} read before"
    for ref, rows in before.items():
        if ref not in changed and ref not in new_state:
            assert after.get(ref) == rows, f"{operation}: Java reads {ref} otherwise than before"
    gone = {ref for ref in changed if ref not in new_state and ref[0] != "snapshot"}
    assert not gone & set(after), f"{operation}: {gone & set(after)} still there"
    for branch in [None, *(name for kind, name in after if kind == "branch")]:
        assert not missing_needed(open_table(warehouse) if branch is None else _branch(warehouse, branch))


def _branch(warehouse: str, name: str) -> Table:
    table = open_table(warehouse)
    return Table(table.file_io, table.path, name)
