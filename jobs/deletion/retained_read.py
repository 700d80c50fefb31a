"""A lenient read of the retained roots on a live table: what it could not read is noted, not fatal.

Why: Paimon's Java writers expire their own snapshots and tags while our deletion jobs run. A job
that listed the retained roots and then reads their manifest lists, manifests and index manifests
can find some of them deleted (the soak saw expire-tags refused in 98 of 345 runs for that alone).
Failing is safe but makes the job fail most of the time on a live table. Reading leniently is safe
only together with the check the caller makes before it deletes anything: each missing file is
judged by `jobs.runtime.vanished_roots.vanished_manifests`, and the run goes on only when no root
present names it any more (the roots that named it were expired during the run, and with them
everything that only they needed); anything still named fails the run as a strict read would have.

What a lenient read notes, per retained root (rows of the retained readers, collected here):
- `missing`: a manifest-directory file (list, manifest, index manifest) that was not there;
- `vanished`: a root listed at planning and gone when read (it protects nothing any more: whoever
  deleted it judged its files against the roots present, and every present root is protected);
- `snapshot`: the lists, index manifest and statistics of a retained snapshot as the read saw them,
  so that a tag created during the run on that very snapshot is known to need nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.maintenance.references import (
    SNAPSHOT_ROOT,
    RootReferences,
    root_references,
    snapshot_root_references,
)
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MISSING, VANISHED, SNAPSHOT = "missing", "vanished", "snapshot"
NOTES = (MISSING, VANISHED, SNAPSHOT)
# The path of a reader's row that notes a missing manifest instead of a file it names. It sorts
# before every table-relative path and is never one (those start with a directory name).
MISSING_MARK = "\x00missing"
_SEPARATOR = "\x1f"

# (base manifest list, delta manifest list, index manifest, statistics), "" for none
Signature = tuple[str, str, str, str]


@dataclass
class RetainedRead:
    """What a lenient read of the retained side noted besides the paths it protects."""

    missing: list[str] = field(default_factory=list)  # paths of manifest-directory files not there
    vanished: list[str] = field(default_factory=list)  # "branch/kind/name" of roots gone when read
    snapshots: dict[tuple[str, int], Signature] = field(default_factory=dict)  # (branch, id): as read
    # branch: its newest snapshot among the roots listed for the read (its latest at planning)
    latest_at_plan: dict[str, int] = field(default_factory=dict)

    def covers(self, branch: str, tag: Snapshot) -> bool:
        """Whether the read took a retained snapshot of `branch` with the tag's id, lists, index
        manifest and statistics as a root: then it protected every file the tag needs (a tag needs
        exactly what its snapshot needs, less the changelog)."""
        return self.snapshots.get((branch, tag.id)) == signature(tag)

    def note_latest(self, roots: list[tuple[str, str, str]]) -> None:
        """Remember each branch's newest snapshot among the `roots` (branch, kind, name) read."""
        for branch, kind, name in roots:
            if kind == SNAPSHOT_ROOT and int(name) > self.latest_at_plan.get(branch, -1):
                self.latest_at_plan[branch] = int(name)


def signature(snapshot: Snapshot) -> Signature:
    return (
        snapshot.base_manifest_list or "",
        snapshot.delta_manifest_list or "",
        snapshot.index_manifest or "",
        snapshot.statistics or "",
    )


def read_retained_root(
    table: Table, branch: str, kind: str, name: str
) -> tuple[RootReferences | None, list[tuple[str, str]]]:
    """(what a retained root of `table`'s `branch` names, its notes as (what, value) rows). A
    missing manifest list gives no references and a `missing` note; other errors propagate."""
    branch_table = table.for_branch(branch)
    try:
        if kind == SNAPSHOT_ROOT:
            try:
                snapshot = branch_table.snapshot_manager.snapshot(int(name))
            except SnapshotNotFoundError:
                snapshot = None
            if snapshot is not None:
                value = _SEPARATOR.join((branch, name, *signature(snapshot)))
                return snapshot_root_references(branch_table, snapshot, True), [(SNAPSHOT, value)]
        found = root_references(branch_table, kind, name)  # a snapshot gone: handed over, or expired
    except MissingFileError as error:
        return None, [(MISSING, error.path)]
    return found, [] if found is not None else [(VANISHED, f"{branch}/{kind}/{name}")]


def collect_notes(F: Any, needs: DataFrame, read: RetainedRead) -> None:  # noqa: N803 - pyspark's functions
    """Add the notes of the retained roots' rows (`needs`: root, what, value; checkpointed) to `read`:
    one row per root at most, a small collect."""
    for row in needs.filter(F.col("what").isin(*NOTES)).select("what", "value").collect():
        what, value = row["what"], row["value"]
        if what == MISSING:
            read.missing.append(value)
        elif what == VANISHED:
            read.vanished.append(value)
        else:
            branch, snapshot_id, base, delta, index, statistics = value.split(_SEPARATOR)
            read.snapshots[(branch, int(snapshot_id))] = (base, delta, index, statistics)
