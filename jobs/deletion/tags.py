"""Deleting tags and the files only they used: shared by delete-tag and expire-tags (issue #17).

Paimon's TagManager.deleteTag deletes the tag file, then (when the tagged snapshot itself has
expired) the files that neither the neighbouring tags nor the earliest snapshot use. Here the
"neither" is wider and exact: the files the deleted tags need (`roots.dropped_root_candidates`:
their lists, manifests, index manifests, statistics, index files and live data and changelog files)
minus everything every snapshot, every other tag, every branch and every long-lived changelog needs
(on a table with decoupled changelog retention also what each retained snapshot needs as the
changelog it becomes), read on the executors and joined there; the driver holds tag names and counts.

Order (Paimon's): plan; then the tag files; then the files in expire-snapshots' stages (data, changelog
and index files; manifests, index manifests, statistics; manifest lists). The tag file goes first so
that no reader ever opens a tag whose files are half gone. A crash after the tag files went and
before (or while) their files go leaves those files unreferenced: a rerun does not find the tag any
more, and remove-orphan-files clears them (they are orphans by its rules).

On a live table (Paimon's Java writers commit, create tags and expire snapshots and tags while this
runs; issue #28) the safety argument is: a file goes only if no root present when it goes needs it.
The plan protects every root listed at planning; what changes until the deletes is handled so:
1. A tag created since planning (the tags of every branch are listed again right before the file
   deletes): if the plan read its snapshot as a retained root with the same lists, index manifest
   and statistics (`RetainedRead.covers`), it needs nothing the plan did not protect. Any other new
   tag is read now, strictly, like a retained root, and what it needs leaves the candidates before
   any file goes (`_protect_new_tags`); a read that fails, tags that keep appearing, or a branch
   created since planning stop the run (exit 3: the tag files are gone, their files left for a
   rerun or remove-orphan-files; the parked copies make a rerun finish them).
2. A root listed at planning and gone when read protects nothing: whoever deleted it judged its
   files against the roots present, and every present root is protected (`retained_roots_vanished`
   in the run record). A tag to delete that is gone when parked was deleted by someone else: it
   counts as already absent, its planned files still go (they are judged like the rest).
3. A manifest list, manifest or index manifest missing while reading the retained roots is noted
   by the lenient read (`jobs.deletion.retained_read`), and judged after the read and before
   anything is deleted (also in a dry run): it may be skipped only when no snapshot, tag or
   changelog present names it any more (`vanished_manifests`: the roots that named it were
   expired during the run, and nothing present needs what only they needed). One still named
   fails the run as a strict read would have (MissingFileError: exit 3 when a writer committed
   during the run, else exit 2).
The window left: a tag created between the last listing and the deletes (milliseconds; the same
window Paimon's own expiry has).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.deletion.context import DeletionContext
from jobs.deletion.expire_candidates import future_changelog_roots
from jobs.deletion.retained_read import RetainedRead, judge_retained_read, signature
from jobs.deletion.roots import Root, dropped_root_candidates, retained_needs
from jobs.deletion.stages import FILES, StageTotals, delete_stages, report_candidates_if_any
from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.live_writers import missing_file
from jobs.runtime.report import SAMPLE_LIMIT
from jobs.runtime.vanished_roots import forget_reads_of, vanished_manifests
from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.maintenance.references import PENDING_TAG_ROOT, TAG_ROOT
from paimon_format.model.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
)
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Rounds of reading tags created during the run before the run gives up (exit 3): each round reads
# the tags that appeared during the previous one.
NEW_TAG_ROUNDS = 3


@dataclass(frozen=True)
class TagSteps:
    """The crash points of the calling operation (`<operation>:<step>`)."""

    planned: str
    tags_deleted: str
    files: str
    manifests: str
    lists: str

    @staticmethod
    def of(operation: str) -> TagSteps:
        return TagSteps(
            f"{operation}:planned",
            f"{operation}:tags-deleted",
            f"{operation}:files-deleted",
            f"{operation}:manifests-deleted",
            f"{operation}:manifest-lists-deleted",
        )


def delete_tags(deletion: DeletionContext, tags: dict[str, Snapshot], steps: TagSteps) -> None:
    """Delete the `tags` (name -> tagged snapshot, as read when chosen) of the branch of
    `deletion.table` and the files only they used.

    Spark (`deletion.spark`) is only started when a deleted tag's snapshot has expired. A tag on a
    snapshot that still exists shares every file with it (Paimon skips the file cleanup then too).
    """
    table, record, log = deletion.table, deletion.record, deletion.log
    manager = table.tag_manager
    names = sorted(tags)
    unfinished = manager.pending_deletion_names()  # parked by interrupted runs: finished here
    _record_tags_to_delete(deletion, tags, unfinished)
    if not names and not unfinished:
        log.info("no tag to delete")
        record.count("tags_deleted", 0)
        return
    with_files = _tags_on_expired_snapshots(table, tags, names)
    # Only a plan of files needs the roots as they were at plan time (`_protect_new_tags`): a run
    # that deletes tag files alone lists no tags or branches again.
    at_plan = _tag_roots(table) if with_files or unfinished else None
    read = RetainedRead()
    candidates = _plan_tag_files(deletion, names, with_files, unfinished, read)
    try:
        if candidates is not None:
            _judge_retained_read(deletion, read)
        totals = report_candidates_if_any(candidates, record, log)
        crash_point(steps.planned)
        if deletion.dry_run:
            log.info("dry run: nothing deleted")
            record.count("tags_deleted", 0)
            return
        parked = _delete_tag_files(deletion, tags, with_files, unfinished)
        crash_point(steps.tags_deleted)
        if candidates is not None and at_plan is not None:
            planned = candidates
            candidates, totals = _protect_new_tags(deletion, candidates, totals, at_plan, names, read)
            if candidates is not planned:
                planned.unpersist()
            delete_stages(deletion, candidates, totals, "", (steps.files, steps.manifests, steps.lists))
        for key in parked:
            manager.finish_deletion(key)
        record.count("unfinished_deletions_finished", len(unfinished))
    finally:
        if candidates is not None:
            candidates.unpersist()


def _record_tags_to_delete(
    deletion: DeletionContext, tags: dict[str, Snapshot], unfinished: list[str]
) -> None:
    manager = deletion.table.tag_manager
    names = sorted(tags)
    record = deletion.record
    record.count("tags_to_delete", len(names))
    record.count("unfinished_deletions", len(unfinished))
    record.sample("tags_to_delete", [manager.tag_path(name) for name in names[:SAMPLE_LIMIT]])
    record.details["tags_to_delete"] = {name: tags[name].id for name in names[:SAMPLE_LIMIT]}
    if unfinished:
        deletion.log.warning(
            "finishing %d tag deletions an interrupted run left: %s", len(unfinished), unfinished[:10]
        )


def _plan_tag_files(
    deletion: DeletionContext,
    names: list[str],
    with_files: list[str],
    unfinished: list[str],
    read: RetainedRead,
) -> DataFrame | None:
    """The candidates of the tags on expired snapshots and of the unfinished deletions (None when
    there are none, and Spark is not started): what they need minus what every other root needs,
    read leniently: `read` receives what the read of the other roots noted (to be judged by
    `_judge_retained_read` before anything is deleted)."""
    table = deletion.table
    branch = table.branch  # a branch's tags live under branch/branch-<name>/tag/
    dropped = [(branch, TAG_ROOT, name) for name in with_files]
    dropped += [(branch, PENDING_TAG_ROOT, key) for key in unfinished]
    if not dropped:
        return None
    doomed = set(names)

    def keep_root(root_branch: str, kind: str, name: str) -> bool:
        return not (root_branch == branch and kind == TAG_ROOT and name in doomed)

    extra = future_changelog_roots(table, 0) if _changelog_options(table) else []
    deletion.log.info("planning the files of %d tags on expired snapshots", len(dropped))
    return dropped_root_candidates(deletion.spark, table, dropped, keep_root, extra, deletion.log, read)


def _judge_retained_read(deletion: DeletionContext, read: RetainedRead) -> None:
    """Before anything is deleted: every manifest the lenient read found missing must be named by no
    root present now (module docstring, 3.), else the run fails as a strict read would have
    (`retained_read.judge_retained_read`, shared with remove-orphan-files). Counts the roots gone
    when read and the manifests skipped (`retained_roots_vanished`, `retained_manifests_vanished`)."""
    judge_retained_read(deletion.table, deletion.record, deletion.log, read, "retained_", vanished_manifests)


def _delete_tag_files(
    deletion: DeletionContext, tags: dict[str, Snapshot], with_files: list[str], unfinished: list[str]
) -> list[str]:
    """Delete the tag files; a tag whose files go too is parked first (`tag-deletion/`), so that an
    interrupted run's rerun still finds what to delete. Returns every parked key to finish.

    Every parking comes before any tag file goes, and the tag files go together (one DeleteObjects
    on S3): their order among themselves does not matter, each tag is a root of its own. A crash
    or a failed delete in between leaves tags that are still there (expired again by a rerun) and
    parked copies that the rerun finishes. A tag found gone when parked was deleted by someone else
    (Java's tag expiry): nothing to park or delete, it counts as `tags_already_absent`. On S3 a tag
    deleted by someone else after parking counts as deleted (DeleteObjects does not say which keys
    existed); elsewhere as `tags_already_absent`. A tag another writer pointed at another snapshot
    since planning (replaced, or deleted and created again) stops the run first (`_tags_now`)."""
    manager = deletion.table.tag_manager
    names = sorted(tags)
    now = _tags_now(deletion.table, tags)
    parked = list(unfinished)
    absent = 0
    paths: list[str] = []
    for name in names:
        if now[name] is None:  # deleted by someone else since planning
            absent += 1
            continue
        if name in with_files:
            parked.append(manager.park_for_deletion(name, now[name]))
        paths.append(manager.tag_path(name))
    deleted = set(deletion.table.file_io.delete_many(paths)) if paths else set()
    gone = sum(1 for path in paths if path in deleted)
    deletion.record.count("tags_deleted", gone)
    if absent + len(paths) > gone:
        deletion.record.count("tags_already_absent", absent + len(paths) - gone)
    deletion.log.info("deleted %d tag files", len(names))
    return parked


def _tags_now(table: Table, tags: dict[str, Snapshot]) -> dict[str, bytes | None]:
    """Each tag file as the store has it now (None: gone), read past the run's memo; exit 3 before
    anything is parked or deleted when one points at another snapshot than planned: the plan's
    files are not the new tag's, and the tag is another writer's now."""
    manager = table.tag_manager
    names = sorted(tags)

    def read(name: str) -> bytes | None:
        path = manager.tag_path(name)
        forget_reads_of(table.file_io, path)
        try:
            return table.file_io.read_bytes(path)
        except MissingFileError:
            return None

    # read at once (on an object store each read is a round trip), judged after every read
    now = dict(zip(names, map_in_flight(read, names, table.file_io.io_parallelism), strict=True))
    for name in names:
        data, planned, path = now[name], tags[name], manager.tag_path(name)
        if data is None:
            continue
        current = Snapshot.from_json(data, path)
        if current.id != planned.id or signature(current) != signature(planned):
            raise SafetyRefusal(
                f"{path}: tag {name!r} now points at snapshot {current.id}, not {planned.id} as when this "
                "job planned: another writer replaced it; nothing was deleted: run the job again"
            )
    return now


@dataclass(frozen=True)
class _TagRoots:
    """The tags of every branch, and the branches, as listed at one moment."""

    tags: frozenset[tuple[str, str]]  # (branch, tag name)
    branches: frozenset[str]


def _tag_roots(table: Table) -> _TagRoots:
    """List the branches and the tags of main and of every branch (one listing each)."""
    branches = table.branch_manager.branch_names()
    tags = {
        (branch, name)
        for branch in [MAIN_BRANCH, *branches]
        for name in table.for_branch(branch).tag_manager.tag_names()
    }
    return _TagRoots(frozenset(tags), frozenset(branches))


def _protect_new_tags(
    deletion: DeletionContext,
    candidates: DataFrame,
    totals: StageTotals,
    at_plan: _TagRoots,
    deleted: list[str],
    read: RetainedRead,
) -> tuple[DataFrame, StageTotals]:
    """Right before any file goes: the candidates less what the tags created since planning need
    (module docstring, 1.), with their stage totals; exit 3 when that cannot be made sure of.

    A new tag on a snapshot the plan read with the same lists needs nothing more; any other new
    tag is read now like a retained root (`retained_needs`, strictly, on the same session) and its
    needs leave the candidates. Tags created during that read are looked at in the next round. A
    tag of a name this run `deleted` that is there again was created anew: it is a new tag too.
    """
    table, record = deletion.table, deletion.record
    seen = set(at_plan.tags) - {(table.branch, name) for name in deleted}
    for _ in range(NEW_TAG_ROUNDS):
        now = _tag_roots(table)
        new_branches = now.branches - at_plan.branches
        if new_branches:
            raise SafetyRefusal(
                f"{table.path}: branches {sorted(new_branches)} were created while this job ran; the tag "
                "files are deleted and their files left for now: run the job again to finish (it plans "
                "again with the new ones)"
            )
        new = sorted(now.tags - seen)
        if not new:
            return candidates, totals
        seen |= set(new)
        to_read = [root for branch, name in new if (root := _uncovered(table, read, branch, name))]
        record.count("new_tags", len(new))
        record.count("new_tags_read", len(to_read))
        deletion.log.info(
            "%d tags created during the run, %d of them to read: %s", len(new), len(to_read), new
        )
        if to_read:
            candidates, totals = _without_needs_of(deletion, candidates, totals, to_read)
    raise SafetyRefusal(
        f"{table.path}: tags kept being created while this job ran ({NEW_TAG_ROUNDS} rounds); the tag "
        "files are deleted and their files left for now: run the job again to finish"
    )


def _uncovered(table: Table, read: RetainedRead, branch: str, name: str) -> Root | None:
    """The root to read for a new tag, or None when it needs nothing the plan did not protect: the
    plan read its snapshot as is (`RetainedRead.covers`), or the tag is gone again."""
    try:
        tag = table.for_branch(branch).tag_manager.tag(name)
    except SnapshotNotFoundError:
        return None
    return None if read.covers(branch, tag) else (branch, TAG_ROOT, name)


def _without_needs_of(
    deletion: DeletionContext, candidates: DataFrame, totals: StageTotals, roots: list[Root]
) -> tuple[DataFrame, StageTotals]:
    """`candidates` less everything `roots` need, read strictly (a failed read: exit 3), checkpointed,
    with their stage totals; the run record counts the candidates kept."""
    table, spark = deletion.table, deletion.spark
    try:
        needed = retained_needs(
            spark, table, candidates.filter(f"stage = {FILES}"), lambda *_: False, roots, deletion.log
        )
        kept = candidates.join(needed, "path", "left_anti").localCheckpoint(eager=True)
    except Exception as error:
        if not missing_file(error):
            raise
        raise SafetyRefusal(
            f"{table.path}: cannot read what the tags created during this run need ({error}); the tag "
            "files are deleted and their files left for now: run the job again to finish"
        ) from error
    after = _stage_totals(kept)
    before, left = sum(n for n, _ in totals.values()), sum(n for n, _ in after.values())
    deletion.record.count("candidates_kept_for_new_tags", before - left)
    return kept, after


def _stage_totals(candidates: DataFrame) -> StageTotals:
    """{stage: (files, bytes)} of the candidates (as `report_candidates` counts them)."""
    rows = candidates.groupBy("stage").agg({"path": "count", "size": "sum"}).collect()
    return {row["stage"]: (row["count(path)"], row["sum(size)"] or 0) for row in rows}


def _tags_on_expired_snapshots(table: Table, tags: dict[str, Snapshot], names: list[str]) -> list[str]:
    """Of `names`, the tags whose snapshot is gone (or differs): their files may go with them. The
    snapshots are read with `io_parallelism` reads in flight, one small read per tag."""
    there = map_in_flight(
        lambda name: _snapshot_still_there(table, tags[name]), names, table.file_io.io_parallelism
    )
    return [name for name, still_there in zip(names, there, strict=True) if not still_there]


def _snapshot_still_there(table: Table, tagged: Snapshot) -> bool:
    """The tagged snapshot exists with the same manifest lists: it needs every file the tag needs."""
    manager = table.snapshot_manager
    if not manager.snapshot_exists(tagged.id):
        return False
    return manager.snapshot(tagged.id).base_manifest_list == tagged.base_manifest_list


def _changelog_options(table: Table) -> bool:
    """True when the table may keep long-lived changelogs: protect what retained snapshots will need
    as changelogs (wider than needed when the retention is not actually decoupled; never narrower)."""
    options = table.schema.options
    return any(
        key in options
        for key in (CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX, CHANGELOG_TIME_RETAINED)
    )
