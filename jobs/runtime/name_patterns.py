"""Names or globs of tags and branches, as delete-tag and delete-branch take them.

An exact name matches itself only; a pattern with `*`, `?` or `[` matches by `fnmatch` rules,
case-sensitive (Paimon's names are). A pattern matching nothing is an error with `strict: true`,
else a warning, and is listed in the run record either way (`details.unmatched`).
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Collection

from jobs.runtime.errors import BadInputError
from jobs.runtime.report import RunRecord

GLOB_CHARACTERS = "*?["


def check_name_patterns(value: list[str], what: str) -> list[str]:
    """Pydantic check of a list of names or globs: at least one, none blank or with a '/'."""
    if not value:
        raise ValueError(f"name at least one {what} or glob")
    for pattern in value:
        if not pattern.strip() or "/" in pattern:
            raise ValueError(f"{pattern!r} is no {what} name or glob (blank or with '/')")
    return value


def matching_names(
    names: list[str], patterns: list[str], never: Collection[str] = ()
) -> tuple[list[str], list[str]]:
    """(names matched by any pattern, sorted; patterns matching none); `never` matches no pattern."""
    matched: set[str] = set()
    unmatched: list[str] = []
    for pattern in patterns:
        if any(char in pattern for char in GLOB_CHARACTERS):
            found = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
        else:
            found = [pattern] if pattern in names else []
        found = [name for name in found if name not in never]
        if not found:
            unmatched.append(pattern)
        matched.update(found)
    return sorted(matched), unmatched


def report_unmatched(
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
    unmatched: list[str],
    message: str,
    strict: bool,
) -> None:
    """Record the patterns that matched nothing; with any, `message` is exit 2 when `strict`, else a
    warning."""
    record.details["unmatched"] = unmatched
    if not unmatched:
        return
    if strict:
        raise BadInputError(message + " (strict: true)")
    log.warning(message)
