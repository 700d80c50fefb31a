"""Whether a file a job found missing went with a snapshot, tag or changelog that was expired.

Why: a live writer (Paimon's Java writers expire after each commit) can expire a root between our
job's listing and its read, also when its commit came *before* our run started: Java's expiry runs
after the commit and deletes, in this order, the expired snapshots' data files, then their manifests
and manifest lists, then the snapshot files, then writes `EARLIEST`. So "did anyone commit during
the run" (`live_writers.committed_since`) misses it; the soak saw remove-orphan-files fail on a
vanished manifest list and expire-snapshots on a vanished snapshot file with no commit in the run.

The question asked here instead: does anything still present name the missing file?
- `snapshot-N` / `changelog-N` below the branch's earliest one now: expired, a race.
- a tag file whose tag is gone now: deleted (tag expiry), a race.
- a file under `manifest/`: named by no snapshot, tag or changelog present now: a race. Named only
  by roots other than a branch's latest snapshot (roots an expiry may be deleting right now: Java
  deletes manifests before snapshot files), we watch those roots for `SETTLE_SECONDS`; if they all
  vanish it was a race. Named by a branch's latest snapshot, or by roots that stay: the table is
  broken (exit 2 stands), as for a table without any writer.
- data and index files: not judged here (that would read every manifest); `committed_since` only.

Two uses: a failed job's missing file is reported as a race (exit 3) instead of a broken table
(`live_writers.race_or_bad_input`); and a deleting job that read the retained roots leniently
(expire-tags, remove-orphan-files: `jobs.deletion.retained_read.judge_retained_read`) skips the
manifests `vanished_manifests` says no present root names, before it deletes anything. The second
use makes this a safety rule, so being named counts widely (any list or manifest a root or a
long-lived changelog may need) and every doubt (a root that cannot be read, a holder that stays
past the settle wait) answers "still named".
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs.runtime.errors import executor_error
from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.maintenance.read_memo import ReadMemoFileIO
from paimon_format.maintenance.references import (
    SnapshotSource,
    manifest_names,
    snapshot_metadata_files,
    snapshot_sources,
)
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table

log = logging.getLogger(__name__)

SETTLE_SECONDS = 5.0  # long enough for an expiry to go from its manifests to its snapshot files
POLL_SECONDS = 0.25

_MISSING = re.compile(r"(\S+): (?:file|snapshot \d+|changelog \d+|tag '[^']*') does not exist")
_BRANCH = r"^(?:branch/branch-(?P<branch>[^/]+)/)?"
_NUMBERED = re.compile(_BRANCH + r"(?P<dir>snapshot|changelog)/(?P=dir)-(?P<id>\d+)$")
_TAG = re.compile(_BRANCH + r"tag/tag-(?P<name>.+)$")


@dataclass(frozen=True)
class _Holder:
    """A root that names the missing file, with how to ask whether it still exists."""

    label: str
    exists: Callable[[], bool]


def missing_path(error: BaseException) -> str | None:
    """The path a missing-file error names (also one carried back from a Spark task)."""
    if isinstance(error, MissingFileError):
        return error.path
    remote = executor_error(error)
    error_class, text = remote if remote else (type(error), str(error))
    if not issubclass(error_class, (MissingFileError, SnapshotNotFoundError)):
        return None
    match = _MISSING.search(text)
    return match.group(1) if match else None


def vanished_root(table: Table, path: str, wait: Callable[[float], None] = time.sleep) -> str | None:
    """Why `path` is missing because its root was expired (a sentence for the run record), or None
    when something present still names it (or it is a data or index file: see the module doc)."""
    relative = _relative(table, path)
    if relative is None:
        return None
    try:
        numbered, tag = _NUMBERED.match(relative), _TAG.match(relative)
        if numbered:
            branch = table.for_branch(numbered["branch"] or "main")
            return _below_earliest(branch, numbered["dir"], int(numbered["id"]))
        if tag:
            gone = not table.for_branch(tag["branch"] or "main").tag_manager.tag_exists(tag["name"])
            return f"tag {tag['name']!r} was deleted during the run" if gone else None
        if relative.startswith("manifest/"):
            return _unnamed_manifest(table, os.path.basename(relative), wait)
    except Exception as error:  # judging the failure must never replace it: the original error stands
        log.debug("cannot tell whether %s went with an expired root: %s", path, error)
    return None


def _relative(table: Table, path: str) -> str | None:
    root = table.path.rstrip("/") + "/"
    return path[len(root) :] if path.startswith(root) else None


def _below_earliest(table: Table, kind: str, number: int) -> str | None:
    manager = table.snapshot_manager
    ids = manager.snapshot_ids() if kind == "snapshot" else manager.changelog_ids()
    if ids and number < ids[0]:
        return f"{kind} {number} was expired during the run (the earliest is now {ids[0]})"
    return None


def _unnamed_manifest(table: Table, name: str, wait: Callable[[float], None]) -> str | None:
    return vanished_manifests(table, [table.manifest_path(name)], wait)[table.manifest_path(name)]


def vanished_manifests(
    table: Table, paths: list[str], wait: Callable[[float], None] = time.sleep
) -> dict[str, str | None]:
    """{path: why it is missing} for files of the `manifest/` directory (lists, manifests, index
    manifests) found missing: a sentence when no snapshot, tag or changelog present now names it
    (after the settle wait for the roots naming it that an expiry may be deleting), else None (a
    present root still names it, it is not a manifest-directory file, or the question could not
    be answered: the caller must then treat it as missing from the table).

    One pass over the present roots answers for every path: a deletion job that read a live table
    may find several manifests gone with the same expired snapshots. Being named by a root counts
    widely (a long-lived changelog names its changelog list and manifests too), never narrowly.
    """
    verdicts: dict[str, str | None] = dict.fromkeys(paths)
    names: dict[str, str] = {}
    for path in paths:
        relative = _relative(table, path)
        if relative is not None and relative.startswith("manifest/") and relative.count("/") == 1:
            names[path] = relative[len("manifest/") :]
    if not names:
        return verdicts
    try:
        left = _holders_after_settling(table, set(names.values()), wait)
    except Exception as error:  # judging the failure must never replace it: the original error stands
        log.debug("cannot tell whether %s went with expired roots: %s", sorted(names.values()), error)
        return verdicts
    for path, name in names.items():
        if name in left and not left[name]:
            verdicts[path] = (
                f"{name} is named by no snapshot, tag or changelog any more: they were expired during the run"
            )
    return verdicts


def _holders_after_settling(
    table: Table, names: set[str], wait: Callable[[float], None]
) -> dict[str, set[str]]:
    """{name: labels of the roots still naming it} after waiting up to SETTLE_SECONDS for roots
    an expiry may be deleting; a name a branch's latest snapshot holds is left out (never vanished)."""
    holders, named_by, pinned = _holders(table, names)
    waiting = {name: labels for name, labels in named_by.items() if name not in pinned}
    for name in names - pinned - set(named_by):
        waiting[name] = set()  # named by no root present now
    deadline = time.monotonic() + SETTLE_SECONDS
    live = set().union(*waiting.values()) if waiting else set()
    while live and time.monotonic() < deadline:
        wait(POLL_SECONDS)
        live = {label for label in live if holders[label].exists()}
        waiting = {name: labels & live for name, labels in waiting.items()}
    return waiting


def _holders(table: Table, names: set[str]) -> tuple[dict[str, _Holder], dict[str, set[str]], set[str]]:
    """The roots present now that name any of the manifest-directory files `names`: (holders by
    label, {name: labels naming it}, the names a branch's latest snapshot names: no expiry deletes
    that snapshot, so those are not vanishing)."""
    holders: dict[str, _Holder] = {}
    named_by: dict[str, set[str]] = {}
    pinned: set[str] = set()
    latest: dict[str, int] = {}
    # every branch's roots: main's too when the job works on a branch (`snapshot_sources` starts
    # from the table it is given and adds the other branches)
    for source in snapshot_sources(table.for_branch(MAIN_BRANCH)):
        named = _named_among(source, names)
        if not named:
            continue
        if source.kind == "snapshot":
            branch = source.table.branch
            if branch not in latest:
                latest[branch] = source.table.snapshot_manager.snapshot_ids()[-1]
            if int(source.name) >= latest[branch]:
                pinned |= named
                continue
        label = f"{source.table.branch} {source.kind} {source.name}"
        holders[label] = _Holder(label, _exists(source))
        for name in named:
            named_by.setdefault(name, set()).add(label)
    return holders, named_by, pinned


def _named_among(source: SnapshotSource, names: set[str]) -> set[str]:
    """Which of `names` the root names: its lists, index manifest and statistics directly, and the
    data (and changelog) manifests its lists name. A snapshot that keeps its changelog and a
    long-lived changelog name their changelog list and manifests too (wider than a changelog's
    reads: never narrower). A tag's changelog is not its own: Java deletes it."""
    with_changelog = source.needs_changelog or source.kind == "changelog"
    direct = {os.path.basename(path) for path in snapshot_metadata_files(source.snapshot, with_changelog)}
    named = names & direct
    manifests = {n for n in names - named if n.startswith("manifest-") and not n.startswith("manifest-list-")}
    if not manifests:
        return named
    try:
        return named | (manifests & set(manifest_names(source.table, source.snapshot, with_changelog)))
    except MissingFileError:
        return named | manifests  # its lists are gone already: an expiry is deleting it, count it a holder


def _exists(source: SnapshotSource) -> Callable[[], bool]:
    """Asks the store whether the root's file is still there (never a run's read memo, which knows
    it present since it was read: the question is whether another writer deleted it since)."""
    table, key = source.table, source.name
    if source.kind == "tag":
        path = table.tag_manager.tag_path(key)
    elif source.kind == "changelog":
        path = table.snapshot_manager.changelog_path(int(key))
    else:
        path = table.snapshot_manager.snapshot_path(int(key))

    def exists() -> bool:
        forget_reads_of(table.file_io, path)
        return table.file_io.file_exists(path)

    return exists


def forget_reads_of(file_io: FileIO, path: str) -> None:
    if isinstance(file_io, ReadMemoFileIO):
        file_io.forget(path)
