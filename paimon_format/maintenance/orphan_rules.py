"""Which files in a table directory orphan cleaning may delete, judged by where they are and their name.

Being unreferenced is necessary but not sufficient: a file is a deletion candidate only when Paimon
itself would have written it at that place (a data file in a bucket directory, a manifest in
`manifest/`, ...). Everything else is either *protected* (metadata whose presence is its meaning:
snapshot, schema, tag, changelog and consumer files, hints) or *foreign* (a file Paimon would not
write, e.g. a user's notes, a `_SUCCESS` mark): both are reported, never deleted. The only deletable
files in the protected directories are the hidden temp files an interrupted atomic write left
behind (`.snapshot-5.<uuid>.tmp`); the age filter keeps in-flight ones.

Pure functions on table-relative paths, so executors and unit tests use them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from paimon_format.model.options import CoreOptions
from paimon_format.storage.paths import (
    BUCKET_DIR_RE,
    CHANGELOG_DATA,
    DATA,
    DEFAULT_CHANGELOG_FILE_PREFIX,
    DEFAULT_DATA_FILE_PREFIX,
    INDEX,
    INDEX_MANIFEST,
    MANIFEST,
    MANIFEST_LIST,
    STATISTICS,
    TEMP,
    TEMP_FILE_RE,
    classify_file,
    classify_in_bucket,
)

DELETABLE = "deletable"  # deleted when unreferenced and older than older_than
PROTECTED = "protected"  # Paimon metadata that is never an orphan by its name alone
FOREIGN = "foreign"  # not a file Paimon writes at this place: reported, never deleted

# Kinds an unreferenced file may be deleted as, when it sits in the table root's own layout.
_DELETABLE_KINDS = frozenset(
    {DATA, CHANGELOG_DATA, INDEX, MANIFEST, MANIFEST_LIST, INDEX_MANIFEST, STATISTICS}
)


@dataclass(frozen=True)
class FileNaming:
    """The file-name prefixes a table writes with (`data-file.prefix`, `changelog-file.prefix`)."""

    data_file_prefix: str = DEFAULT_DATA_FILE_PREFIX
    changelog_file_prefix: str = DEFAULT_CHANGELOG_FILE_PREFIX

    @staticmethod
    def of(options: dict[str, str]) -> FileNaming:
        core = CoreOptions(options)
        return FileNaming(core.data_file_prefix, core.changelog_file_prefix)


@dataclass(frozen=True)
class Judgement:
    """What orphan cleaning may do with one file: `rule` is DELETABLE/PROTECTED/FOREIGN, `kind` says why."""

    rule: str
    kind: str


def judge_file(relative_path: str, naming: FileNaming = FileNaming()) -> Judgement:
    """The orphan rule for a table-relative path (see the module docstring).

    Anything under `branch/` other than a temp file is kept: branches share the root's manifests and
    data, so a Paimon-looking file there was not written by Paimon and is not ours to judge.
    """
    kind = classify_file(relative_path, naming.data_file_prefix, naming.changelog_file_prefix)
    if kind is None:
        return Judgement(FOREIGN, "unknown")
    if kind == TEMP:
        return Judgement(DELETABLE, TEMP)
    if kind in _DELETABLE_KINDS and not relative_path.lstrip("/").startswith("branch/"):
        return Judgement(DELETABLE, kind)
    if kind in _DELETABLE_KINDS:
        return Judgement(FOREIGN, kind)
    if kind == "success-file":
        return Judgement(FOREIGN, kind)
    return Judgement(PROTECTED, kind)


def directory_judge(relative_dir: str, naming: FileNaming = FileNaming()) -> Callable[[str], Judgement]:
    """`judge_file` for the files of one directory, with what depends on the directory decided once.

    A listing judges every file it finds; in a bucket directory (where nearly all of a table's files
    are) only the name's patterns are left to check, which is a third of `judge_file`'s cost.
    Any other directory judges each full path with `judge_file`. Same results as `judge_file`
    (tests/format/maintenance/test_orphans.py compares both on every rule's example).
    """
    directory = relative_dir.strip("/")
    parts = directory.split("/") if directory else []
    if not parts or not BUCKET_DIR_RE.fullmatch(parts[-1]):
        return lambda name: judge_file(f"{directory}/{name}" if directory else name, naming)
    found_rule = FOREIGN if parts[0] == "branch" else DELETABLE
    by_kind = {kind: Judgement(found_rule, kind) for kind in (DATA, CHANGELOG_DATA, INDEX)}
    temp, unknown = Judgement(DELETABLE, TEMP), Judgement(FOREIGN, "unknown")
    data_prefix, changelog_prefix = naming.data_file_prefix, naming.changelog_file_prefix

    def judge_in_bucket(name: str) -> Judgement:
        if TEMP_FILE_RE.fullmatch(name):
            return temp
        kind = classify_in_bucket(name, data_prefix, changelog_prefix)
        return unknown if kind is None else by_kind[kind]

    return judge_in_bucket


# Ages below this need `force`: a writer may be between writing a file and committing it.
OLDER_THAN_FLOOR_MS = 3_600_000


def cutoff_ms(started_ms: int, older_than_ms: int, force: bool) -> int:
    """Files modified before this instant may be deleted.

    Measured from the job's start (before listing), so no file written during the run qualifies.
    """
    if older_than_ms < 0:
        raise ValueError(f"older_than must not be negative, got {older_than_ms} ms")
    if older_than_ms < OLDER_THAN_FLOOR_MS and not force:
        raise ValueError(
            f"older_than of {older_than_ms} ms is below the floor of 1 hour: a running writer's files "
            "could be deleted before it commits them (set force: true only when no writer runs)"
        )
    return started_ms - older_than_ms


def exceeds_ratio(candidates: int, listed: int, max_ratio: float) -> bool:
    """The circuit breaker: more than `max_ratio` of the listed files would be deleted."""
    return listed > 0 and candidates / listed > max_ratio
