"""Branches of a table: `<table>/branch/branch-<name>`, each with its own schema, snapshot and tag dirs.

Branch "main" is the table root itself. Data files are shared: only metadata lives per branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paimon_format._listing import names_after_prefix
from paimon_format.errors import MissingFileError

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


def validate_branch_name(name: str) -> None:
    """ValueError naming the problem: blank, "main", a number, or with a slash (Paimon's rules, plus
    the slash, which would put the branch's metadata in another directory)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"branch name must not be blank, got {name!r}")
    if name == MAIN_BRANCH:
        raise ValueError(f"{MAIN_BRANCH!r} is the table itself, not a branch to create, rename or delete")
    if name.isdigit():
        raise ValueError(f"branch name must not be a number, got {name!r}")
    if "/" in name:
        raise ValueError(f"branch name must not contain '/', got {name!r}")


def branch_metadata_files(file_io: FileIO, table_path: str, name: str) -> list[str]:
    """Paths relative to the branch's root of every file under `branch/branch-<name>`, sorted; [] when
    the directory does not exist. Any other listing failure propagates (an unreadable branch is no
    empty branch)."""
    root = branch_root(file_io, table_path.rstrip("/"), name)
    try:
        statuses = list(file_io.list_files_recursive(root))
    except MissingFileError:
        return []
    prefix = root.rstrip("/") + "/"
    return sorted(status.path[len(prefix) :] for status in statuses if status.path.startswith(prefix))
