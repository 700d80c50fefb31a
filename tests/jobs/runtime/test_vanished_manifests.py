"""vanished_manifests: the rule a deleting job skips a missing manifest by (issue #28), so a present
root of any branch that names it must keep it "still named"."""

from __future__ import annotations

import os

from jobs.runtime import vanished_roots
from jobs.runtime.vanished_roots import vanished_manifests
from paimon_format.table import Table
from tests.support.table_states import branch_from_t2, build_sample_table


def test_a_root_of_main_keeps_a_manifest_named_when_the_job_works_on_a_branch(tmp_path, monkeypatch) -> None:
    table = build_sample_table(str(tmp_path), commits=3)
    branch = branch_from_t2(table)
    main = table.snapshot_manager
    named_by_main_1 = table.manifest_path(main.snapshot(1).delta_manifest_list)
    named_by_none = table.manifest_path("manifest-list-gone-0")
    os.remove(named_by_main_1)
    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 0.0)
    for judged_on in (table, branch, Table(branch.file_io, branch.path, "b")):
        verdicts = vanished_manifests(judged_on, [named_by_main_1, named_by_none], wait=lambda _s: None)
        assert verdicts[named_by_main_1] is None  # main's snapshot 1 still names it
        assert "named by no snapshot" in verdicts[named_by_none]
    os.remove(main.snapshot_path(1))  # main's expiry finished
    assert "named by no snapshot" in vanished_manifests(branch, [named_by_main_1])[named_by_main_1]
