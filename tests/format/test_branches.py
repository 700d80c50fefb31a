"""Branches: `branch/branch-<name>` directories and their metadata roots."""

from __future__ import annotations

from paimon_format.branches import BranchManager

# -- BranchManager ---------------------------------------------------------------------------------


def test_branches(file_io, table_root):
    branches = BranchManager(file_io, table_root)
    assert branches.branch_names() == []
    assert branches.branch_path("main") == table_root
    for name in ("dev", "b-2"):
        path = file_io.join(branches.branch_path(name), "schema", "schema-0")
        file_io.write_bytes(path, b"{}")
    file_io.write_bytes(file_io.join(branches.branch_dir(), "stray-file"), b"x")
    assert branches.branch_path("dev") == file_io.join(table_root, "branch", "branch-dev")
    assert branches.branch_names() == ["b-2", "dev"]
    assert (
        branches.branch_exists("dev") and branches.branch_exists("main") and not branches.branch_exists("x")
    )
