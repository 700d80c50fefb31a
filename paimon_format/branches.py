"""Branches of a table: `<table>/branch/branch-<name>`, each with its own schema, snapshot and tag dirs.

Branch "main" is the table root itself. Data files are shared: only metadata lives per branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paimon_format._listing import names_after_prefix

if TYPE_CHECKING:
    from paimon_format.storage.fileio import FileIO

MAIN_BRANCH = "main"
BRANCH_PREFIX = "branch-"


def branch_root(file_io: FileIO, table_path: str, branch: str) -> str:
    """Where the metadata directories of `branch` live (the table root for main or no branch)."""
    if not branch or branch == MAIN_BRANCH:
        return table_path
    return file_io.join(table_path, "branch", f"{BRANCH_PREFIX}{branch}")


class BranchManager:
    """Branches of a table: `<table>/branch/branch-<name>`, each with its own schema/snapshot/tag dirs."""

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")

    def __repr__(self) -> str:
        return f"BranchManager({self.table_path!r})"

    def branch_dir(self) -> str:
        return self.file_io.join(self.table_path, "branch")

    def branch_path(self, name: str) -> str:
        """Metadata root of branch `name` ("main" is the table root itself)."""
        return branch_root(self.file_io, self.table_path, name)

    def branch_names(self) -> list[str]:
        """Names of the branches other than main, sorted; [] when the table has none."""
        return names_after_prefix(self.file_io, self.branch_dir(), BRANCH_PREFIX, directories=True)

    def branch_exists(self, name: str) -> bool:
        return name == MAIN_BRANCH or name in self.branch_names()
