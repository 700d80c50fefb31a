"""Listing the metadata directories of a table (snapshot/, tag/, branch/, consumer/, ...).

Shared by the snapshot, schema, tag, branch and consumer managers. A directory that does not exist is
empty (a table without tags); any other listing failure propagates, because treating an unreadable
directory as empty would make a table look empty and its files look unreferenced.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from paimon_format.errors import MissingFileError

if TYPE_CHECKING:
    from paimon_format.storage.file_status import FileStatus
    from paimon_format.storage.fileio import FileIO


def basename(path: str) -> str:
    """The last component of a path (`.../tag/tag-t1` -> `tag-t1`)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def list_or_empty(file_io: FileIO, directory: str) -> list[FileStatus]:
    """Entries of `directory`; [] only when it does not exist (a table without tags, snapshots...).

    Every other failure propagates: treating an unreadable directory as empty would make a table
    look empty and its files look unreferenced.
    """
    try:
        return file_io.list_dir(directory)
    except MissingFileError:
        return []


def names_after_prefix(file_io: FileIO, directory: str, prefix: str, directories: bool = False) -> list[str]:
    """What follows `prefix` in the names of the files (or, with `directories`, the subdirectories)
    of `directory` that start with it, sorted; [] when the directory does not exist."""
    names = []
    for status in list_or_empty(file_io, directory):
        base = basename(status.path)
        if base.startswith(prefix) and len(base) > len(prefix) and bool(status.is_dir) == directories:
            names.append(base[len(prefix) :])
    return sorted(names)


def numbered_ids(file_io: FileIO, directory: str, pattern: re.Pattern[str]) -> list[int]:
    """The numbers (`pattern`'s first group) of the files in `directory` whose names match `pattern`,
    sorted; [] when the directory does not exist. A name that does not match (a temp file of an
    in-flight write, a hint) is not counted."""
    ids = []
    for status in list_or_empty(file_io, directory):
        match = pattern.match(basename(status.path))
        if match and not status.is_dir:
            ids.append(int(match.group(1)))
    return sorted(ids)
