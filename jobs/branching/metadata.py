"""Branch metadata as the branch jobs handle it: whole files copied between branch roots.

A branch is only metadata (`branch/branch-<name>/{schema,snapshot,tag,changelog}`): its data files,
manifests and manifest lists live in the table's own directories and are shared with main. So
creating, renaming or fast-forwarding a branch copies small JSON files, and every copy here is
idempotent (a file already holding the same bytes is left alone), so a rerun after a crash finishes
what the crashed run started.
"""

from __future__ import annotations

from jobs.deletion.deleter import remove_empty_dir
from jobs.runtime.errors import BadInputError
from paimon_format.branches import MAIN_BRANCH, branch_metadata_files, branch_root
from paimon_format.errors import MissingFileError
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table


def existing_branch(table: Table, name: str) -> Table:
    """The table's branch `name`; BadInputError naming the branches there are when it does not exist
    or is "main" where a branch is required."""
    names = table.branch_manager.branch_names()
    if name == MAIN_BRANCH:
        raise BadInputError(f"{table.path}: 'main' is the table itself, name a branch (branches: {names})")
    if name not in names:
        raise BadInputError(
            f"{table.branch_manager.branch_path(name)}: branch {name!r} does not exist "
            f"(branches: {', '.join(names) or 'none'})"
        )
    return table.for_branch(name)


def read_or_none(file_io: FileIO, path: str) -> bytes | None:
    try:
        return file_io.read_bytes(path)
    except MissingFileError:
        return None


def put_bytes(file_io: FileIO, path: str, data: bytes) -> bool:
    """Make `path` hold `data`: True when written, False when it already held those bytes. The write
    replaces the file atomically (a reader sees the old or the new content)."""
    if read_or_none(file_io, path) == data:
        return False
    file_io.write_bytes(path, data)
    return True


def branch_files(table: Table, name: str) -> dict[str, bytes]:
    """Every metadata file of branch `name` by its path relative to the branch root, with its bytes."""
    root = branch_root(table.file_io, table.path, name)
    return {
        relative: table.file_io.read_bytes(table.file_io.join(root, relative))
        for relative in branch_metadata_files(table.file_io, table.path, name)
    }


def remove_branch_directories(table: Table, name: str) -> int:
    """Remove the empty directories a deleted branch leaves (local disk, HDFS; object stores have
    none): deepest first, never recursively, so a file written meanwhile stops it. How many went."""
    file_io = table.file_io
    if file_io.protocol in ("s3", "gcs"):
        return 0
    root = branch_root(file_io, table.path, name)
    directories, pending = [root], [root]
    while pending:
        try:
            found = [s.path for s in file_io.list_dir(pending.pop()) if s.is_dir]
        except MissingFileError:
            continue
        directories.extend(found)
        pending.extend(found)
    return sum(remove_empty_dir(file_io, d) for d in sorted(directories, key=len, reverse=True))
