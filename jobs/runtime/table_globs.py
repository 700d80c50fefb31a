"""Which tables of a warehouse a maintenance run covers: names and globs such as `db.*`, `*.events_*`.

A nightly run over hundreds of tables must not need the list spelt out, and must notice when a
pattern stops matching (a renamed database), so every pattern reports what it matched. Tables are
found the way a filesystem catalog finds them: `<warehouse>/<db>.db/<table>` directories that hold a
`schema/` directory. Listing happens on the driver; it is one `list_dir` per database, and a
warehouse holds thousands of tables at most, never millions of files.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.runtime.errors import BadInputError
from paimon_format.errors import MissingFileError
from paimon_format.storage.fileio import FileIO

GLOB_CHARACTERS = frozenset("*?[")
DATABASE_SUFFIX = ".db"


def is_glob(pattern: str) -> bool:
    return any(character in GLOB_CHARACTERS for character in pattern)


def split_pattern(pattern: str) -> tuple[str, str]:
    """`db.table` -> (db, table); the database part never contains a dot (it names `<db>.db`)."""
    database, separator, table = pattern.partition(".")
    if not separator or not database or not table:
        raise ValueError(f"must look like 'db.name' or a glob such as 'db.*', got {pattern!r}")
    return database, table


def matches(pattern: str, identifier: str) -> bool:
    """Whether `db.table` matches a name or glob, database and table parts matched separately."""
    pattern_db, pattern_table = split_pattern(pattern)
    database, _, table = identifier.partition(".")
    return fnmatch.fnmatchcase(database, pattern_db) and fnmatch.fnmatchcase(table, pattern_table)


@dataclass
class Resolution:
    """The tables a list of patterns selects, in a stable order, and what each pattern matched."""

    tables: list[str] = field(default_factory=list)
    matched: dict[str, int] = field(default_factory=dict)  # pattern -> tables it matched

    @property
    def unmatched(self) -> list[str]:
        return [pattern for pattern, count in self.matched.items() if count == 0]


def resolve_tables(
    warehouse: str,
    patterns: Sequence[str],
    exclude: Sequence[str] = (),
    storage_options: dict[str, Any] | None = None,
) -> Resolution:
    """The tables selected by `patterns` minus `exclude`, sorted.

    Exact names are taken as given, without a listing: a missing table then fails on its own when
    maintained (reported per table), which is what an explicitly named table deserves. Globs are
    matched against the tables found by listing. A missing or unreadable warehouse is bad input.
    """
    file_io = FileIO.for_path(warehouse, storage_options)
    resolution = Resolution(matched={pattern: 0 for pattern in patterns})
    selected: set[str] = set()
    globs = [pattern for pattern in patterns if is_glob(pattern)]
    if not file_io.exists(warehouse):
        raise BadInputError(f"warehouse {warehouse} does not exist")
    found = list_tables(file_io, warehouse, globs) if globs else []
    for pattern in patterns:
        hits = [name for name in found if matches(pattern, name)] if is_glob(pattern) else [pattern]
        resolution.matched[pattern] += len(hits)
        selected.update(hits)
    resolution.tables = sorted(
        name for name in selected if not any(matches(pattern, name) for pattern in exclude)
    )
    return resolution


def list_tables(file_io: FileIO, warehouse: str, globs: Sequence[str] = ("*.*",)) -> list[str]:
    """`db.table` of every table under the warehouse whose database matches one of `globs`."""
    database_globs = [split_pattern(pattern)[0] for pattern in globs]
    try:
        entries = file_io.list_dir(warehouse)
    except MissingFileError:
        raise BadInputError(f"warehouse {warehouse} does not exist") from None
    tables = []
    for entry in entries:
        name = entry.path.rstrip("/").rsplit("/", 1)[-1]
        if not entry.is_dir or not name.endswith(DATABASE_SUFFIX):
            continue
        database = name[: -len(DATABASE_SUFFIX)]
        if not database or not any(fnmatch.fnmatchcase(database, g) for g in database_globs):
            continue
        for candidate in file_io.list_dir(entry.path):
            table = candidate.path.rstrip("/").rsplit("/", 1)[-1]
            if candidate.is_dir and file_io.exists(file_io.join(candidate.path, "schema")):
                tables.append(f"{database}.{table}")
    return sorted(tables)
