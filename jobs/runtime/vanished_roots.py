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
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs.runtime.errors import executor_error
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.maintenance.references import (
    SnapshotSource,
    manifest_names,
    snapshot_metadata_files,
    snapshot_sources,
)
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
    holders, pinned = _holders(table, name)
    if pinned:
        return None
    deadline = time.monotonic() + SETTLE_SECONDS
    while holders and time.monotonic() < deadline:
        wait(POLL_SECONDS)
        holders = [holder for holder in holders if holder.exists()]
    if holders:
        return None
    return f"{name} is named by no snapshot, tag or changelog any more: they were expired during the run"


def _holders(table: Table, name: str) -> tuple[list[_Holder], bool]:
    """The roots that name manifest-directory file `name`, and whether one of them is a branch's
    latest snapshot (which no expiry deletes)."""
    holders: list[_Holder] = []
    latest: dict[str, int] = {}
    for source in snapshot_sources(table):
        if not _names(source, name):
            continue
        if source.kind == "snapshot":
            branch = source.table.branch
            if branch not in latest:
                latest[branch] = source.table.snapshot_manager.snapshot_ids()[-1]
            if int(source.name) >= latest[branch]:
                return [], True
        holders.append(_Holder(f"{source.kind} {source.name}", _exists(source)))
    return holders, False


def _names(source: SnapshotSource, name: str) -> bool:
    keeps_changelog = source.needs_changelog  # a tag's changelog is not its own: Java deletes it
    direct = {os.path.basename(path) for path in snapshot_metadata_files(source.snapshot, keeps_changelog)}
    if name in direct:
        return True
    if not name.startswith("manifest-") or name.startswith("manifest-list-"):
        return False
    try:
        return name in manifest_names(source.table, source.snapshot, keeps_changelog)
    except MissingFileError:
        return True  # its lists are gone already: an expiry is deleting it, count it as a holder


def _exists(source: SnapshotSource) -> Callable[[], bool]:
    manager, key = source.table.snapshot_manager, source.name
    if source.kind == "tag":
        return lambda: source.table.tag_manager.tag_exists(key)
    if source.kind == "changelog":
        return lambda: source.table.file_io.file_exists(manager.changelog_path(int(key)))
    return lambda: manager.snapshot_exists(int(key))
