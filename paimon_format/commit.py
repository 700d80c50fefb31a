"""SnapshotCommit: the one place that creates snapshots (seed 003, spec §9).

Every job that changes a table ends here, on the driver: writers hand over commit messages (files
added and deleted per partition and bucket), and this module turns them into manifests, manifest
lists and one new `snapshot-N`, created with create-if-absent so two writers can never both win
the same id. A lost race is retried on top of the new latest snapshot, after checking that our
commit did not land already; a conflict (deleting a file that is no longer live) is final.

Cleanup rule: files this attempt wrote are removed only when the attempt definitely failed (lost
race, conflict). After an uncertain failure (the snapshot write raised) they stay: they may be
referenced by a snapshot that did land, and orphan-file removal clears them otherwise.

Writers that can replace our snapshot: our create-if-absent never replaces a file, but Paimon's
Java writer on local disk claims `snapshot-N` by `exists()` then `rename()` (LocalFileIO: a check
and a move under a lock that holds only inside its own JVM), and rename(2) replaces a target that
appeared in between. So where such a writer can exist (local disk; a store committed by
exists-check-then-write under `allow_unsafe_overwrite_commit`) a won commit reads `snapshot-N` back
and, when it is another writer's, counts as a lost race (see `_replaced_by_another_writer`).

The conflict check and what an attempt builds on are `commit_conflicts`; the manifests, manifest
lists and index manifest an attempt writes are `commit_files`.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from paimon_format import __version__
from paimon_format.commit_conflicts import AttemptContext, PartitionFilter, check_conflicts
from paimon_format.commit_files import AttemptFiles, CommitFileNames, IndexEntryFilter
from paimon_format.errors import CommitRetriesExhaustedError, PaimonFormatError, SnapshotNotFoundError
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    DataFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
)
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.storage.in_flight import both
from paimon_format.table import Table

log = logging.getLogger(__name__)

SIDES_MIN_PARALLELISM = 8  # see SnapshotCommit._sides_at_once

BATCH_COMMIT_IDENTIFIER = 2**63 - 1
WRITER_VERSION = f"paimon-jobs-{__version__}"

# a foreign writer that committed within this many seconds is taken as live (S3 warning)
_LIVE_WRITER_SECONDS = 3600

APPEND = "APPEND"
COMPACT = "COMPACT"
OVERWRITE = "OVERWRITE"


@dataclass
class CommitMessage:
    """Files one writer task added or removed in one partition and bucket."""

    partition: bytes
    bucket: int
    total_buckets: int
    new_files: list[DataFileMeta] = field(default_factory=list)
    deleted_files: list[DataFileMeta] = field(default_factory=list)
    changelog_files: list[DataFileMeta] = field(default_factory=list)

    def entries(self) -> list[ManifestEntry]:
        adds = [
            ManifestEntry(ADD, self.partition, self.bucket, self.total_buckets, f) for f in self.new_files
        ]
        deletes = [
            ManifestEntry(DELETE, self.partition, self.bucket, self.total_buckets, f)
            for f in self.deleted_files
        ]
        return deletes + adds

    def changelog_entries(self) -> list[ManifestEntry]:
        return [
            ManifestEntry(ADD, self.partition, self.bucket, self.total_buckets, f)
            for f in self.changelog_files
        ]


def _index_dropper(
    partitions: PartitionFilter | None, entries: IndexEntryFilter | None
) -> IndexEntryFilter | None:
    """One test for the index entries a commit leaves out: those of replaced partitions, or named."""
    if partitions is None and entries is None:
        return None
    return lambda entry: bool(
        (partitions is not None and partitions(entry.partition)) or (entries is not None and entries(entry))
    )


def _every_partition(_partition: bytes) -> bool:
    return True


@dataclass
class IndexUpdate:
    """Index entries a data commit changes in the same snapshot (a dynamic-bucket write's HASH files).

    `drop` leaves entries of the latest snapshot out, `add` joins the new index manifest, and
    `check_base` runs on every attempt with the snapshot it commits on top of: it raises
    `CommitConflictError` when another writer changed what the new entries were computed from.
    """

    add: Sequence[IndexManifestEntry] = ()
    drop: IndexEntryFilter | None = None
    check_base: Callable[[AttemptContext], None] | None = None


# Builds the delta entries of an attempt from the snapshot it commits on top of.
DeltaBuilder = Callable[[AttemptContext], list[ManifestEntry]]
# Replaces the base manifests of an attempt (manifest compaction); gets the latest's data manifests.
BaseRewriter = Callable[[AttemptContext, list[ManifestFileMeta]], list[ManifestFileMeta]]


@dataclass
class PrewrittenDelta:
    """Delta manifests a job already wrote (on Spark executors), to be named by the next snapshot.

    Large deltas (dropping partitions with millions of files) cannot pass through the driver as
    entries; the job writes them and hands over only the manifest metadata and the change in the
    table's record count. The commit never deletes these files; the job owns them.
    """

    manifests: list[ManifestFileMeta]
    record_count_delta: int
    # changelog manifests written alongside (a compaction's changelog files), and their rows
    changelog_manifests: list[ManifestFileMeta] = field(default_factory=list)
    changelog_record_count: int = 0


# Gives the pre-written delta manifests of an attempt; may raise to stop (e.g. the base moved too far).
PrewrittenDeltaBuilder = Callable[[AttemptContext], PrewrittenDelta]


class _LostRace(Exception):
    pass


@dataclass(frozen=True)
class _CommitRequest:
    """One call of `SnapshotCommit.commit`: what every attempt of it builds and writes."""

    build_delta: DeltaBuilder
    kind: str
    identifier: int
    changelog: Sequence[ManifestEntry]
    check_conflicts: bool
    allow_empty: bool
    rewrite_base: BaseRewriter | None
    properties: dict[str, str] | None
    prewritten_delta: PrewrittenDeltaBuilder | None
    drop_index_of: IndexEntryFilter | None
    add_index_entries: Sequence[IndexManifestEntry]
    total_record_count: int | None = None


class SnapshotCommit:
    """Commits changes to one table (one branch) as new snapshots."""

    def __init__(
        self,
        table: Table,
        commit_user: str | None = None,
        options: dict[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.table = table
        self.commit_user = commit_user or str(uuid.uuid4())
        self._option_overrides = dict(options or {})
        self._sleep = sleep
        self._names = CommitFileNames()
        # attempts that did not land (lost races, replaced snapshots), and the ids of the snapshots
        # this committer created that another writer's file then replaced (both for the race tests)
        self.lost_races = 0
        self.replaced_snapshots: list[int] = []

    # -- public entry points -----------------------------------------------------------------

    def append(
        self,
        messages: Sequence[CommitMessage],
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        properties: dict[str, str] | None = None,
        *,
        index: IndexUpdate | None = None,
    ) -> Snapshot | None:
        """Commit new files (an APPEND); deletions in the messages turn it into a checked commit.

        `index` replaces index entries in the same snapshot (a dynamic-bucket write's HASH files).
        """
        delta = [entry for message in messages for entry in message.entries()]
        changelog = [entry for message in messages for entry in message.changelog_entries()]
        has_deletes = any(entry.kind == DELETE for entry in delta)
        index = index or IndexUpdate()

        def build(ctx: AttemptContext) -> list[ManifestEntry]:
            if index.check_base is not None:
                index.check_base(ctx)
            return delta

        return self.commit(
            build,
            kind=OVERWRITE if has_deletes else APPEND,
            identifier=identifier,
            changelog=changelog,
            check_conflicts=has_deletes,
            properties=properties,
            drop_index_entries=index.drop,
            add_index_entries=index.add,
        )

    def overwrite(
        self,
        messages: Sequence[CommitMessage],
        partition_filter: PartitionFilter | None = None,
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        properties: dict[str, str] | None = None,
        *,
        index: IndexUpdate | None = None,
    ) -> Snapshot | None:
        """Replace every live file accepted by `partition_filter` (None: the whole table) with the new files.

        The files to delete are recomputed on each attempt from the snapshot it commits on top
        of, so a concurrent append to another partition is kept and one to a replaced partition
        is replaced too.
        """
        new_entries = [entry for message in messages for entry in message.entries()]
        changelog = [entry for message in messages for entry in message.changelog_entries()]
        index = index or IndexUpdate()

        def build(ctx: AttemptContext) -> list[ManifestEntry]:
            if index.check_base is not None:
                index.check_base(ctx)
            deletes = [entry.as_delete() for entry in ctx.live_entries(partition_filter)]
            return deletes + new_entries

        return self.commit(
            build,
            kind=OVERWRITE,
            identifier=identifier,
            changelog=changelog,
            properties=properties,
            drop_index_of=partition_filter or _every_partition,
            drop_index_entries=index.drop,
            add_index_entries=index.add,
        )

    def commit(
        self,
        build_delta: DeltaBuilder,
        kind: str,
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        changelog: Sequence[ManifestEntry] = (),
        check_conflicts: bool | None = None,
        allow_empty: bool = False,
        rewrite_base: BaseRewriter | None = None,
        properties: dict[str, str] | None = None,
        prewritten_delta: PrewrittenDeltaBuilder | None = None,
        drop_index_of: PartitionFilter | None = None,
        drop_index_entries: IndexEntryFilter | None = None,
        add_index_entries: Sequence[IndexManifestEntry] = (),
        total_record_count: int | None = None,
    ) -> Snapshot | None:
        """Run commit attempts until one lands, the changes conflict, or the retry budget is spent.

        Returns the new snapshot, or None when there was nothing to commit (an empty batch commit
        creates no snapshot, as in Paimon's `snapshot.ignore-empty-commit`). `prewritten_delta`
        adds manifests written elsewhere to the delta (before those of `build_delta`); the
        conflict check covers only the entries of `build_delta`. `drop_index_of` names the
        partitions an overwrite replaces: their index files (hash index, deletion vectors) leave
        the new snapshot's index manifest, as in Paimon, since the files they describe are gone.
        `drop_index_entries` removes single index entries (a compaction's deletion vectors of the
        files it rewrote). `add_index_entries` joins the new snapshot's index manifest (index files
        written before the commit, e.g. a deletion-vector file rewritten without a lost file's vector).
        `total_record_count` replaces previous total + delta as the new snapshot's total (a repair that
        drops manifests recounts the rows of the files left; its delta is empty).
        """
        request = _CommitRequest(
            build_delta=build_delta,
            kind=kind,
            identifier=identifier,
            changelog=changelog,
            check_conflicts=kind in (COMPACT, OVERWRITE) if check_conflicts is None else check_conflicts,
            allow_empty=allow_empty,
            rewrite_base=rewrite_base,
            properties=properties,
            prewritten_delta=prewritten_delta,
            drop_index_of=_index_dropper(drop_index_of, drop_index_entries),
            add_index_entries=add_index_entries,
            total_record_count=total_record_count,
        )
        options = self._options()
        started = time.monotonic()
        last_seen_latest: int | None = None
        attempt = 0
        while True:
            if attempt == 0:
                latest, schema = self._latest_and_schema()
                self._warn_if_foreign_writer_on_s3(latest)
            else:  # whether our last attempt landed is asked first: no other read may fail it
                latest = self.table.snapshot_manager.latest()
                landed = self._find_landed(last_seen_latest, latest, identifier, kind)
                if landed is not None:
                    log.info("%s: commit already landed as snapshot %d", self.table.path, landed.id)
                    return landed
                schema = self._latest_schema()
            last_seen_latest = latest.id if latest else None
            try:
                return self._attempt(latest, schema, request)
            except _LostRace:
                self.lost_races += 1
                attempt += 1
                self._give_up_or_wait(attempt, started, options)

    # -- one attempt ---------------------------------------------------------------------------

    def _latest_and_schema(self) -> tuple[Snapshot | None, TableSchema]:
        """The latest snapshot and the latest schema (listed now, each file read once), read at once:
        on an object store each is a chain of round trips and neither needs the other. The
        snapshot's failure is raised first; three requests may be in flight, or one by one."""
        parallelism = self.table.file_io.io_parallelism
        return both(
            self.table.snapshot_manager.latest, self._latest_schema, parallelism if parallelism >= 3 else 1
        )

    def _latest_schema(self) -> TableSchema:
        return self.table.latest_schema() or self.table.schema

    def _attempt(
        self, latest: Snapshot | None, schema: TableSchema, request: _CommitRequest
    ) -> Snapshot | None:
        """Build the delta on top of `latest`, write the new snapshot's files, and try to create it.

        Returns the snapshot (None: nothing to commit); raises `_LostRace` when another writer
        took the id (this attempt's files are removed then) and `CommitConflictError` when the
        delta no longer applies.
        """
        ctx = AttemptContext(self.table, latest, schema)
        delta = list(request.build_delta(ctx))
        prewritten = request.prewritten_delta(ctx) if request.prewritten_delta is not None else None
        if not (delta or request.changelog or request.allow_empty or (prewritten and prewritten.manifests)):
            return None
        if request.check_conflicts:
            check_conflicts(ctx, delta)

        options = CoreOptions({**ctx.schema.options, **self._option_overrides})
        files = AttemptFiles(self.table, self._names, options, ctx.schema)
        try:
            snapshot = self._write_snapshot_files(ctx, request, delta, prewritten, files)
        except BaseException:
            files.remove()
            raise
        try:
            won = self.table.snapshot_manager.try_commit(snapshot)
        except PaimonFormatError as error:
            return self._resolve_uncertain(snapshot, error)
        if not won:
            log.info("%s: lost the race for snapshot %d, retrying", self.table.path, snapshot.id)
            files.remove()
            raise _LostRace()
        self._write_latest_hint(snapshot.id)
        if self._replaced_by_another_writer(snapshot):
            raise _LostRace()  # the files this attempt wrote stay (orphans): see the method
        return snapshot

    def _write_snapshot_files(
        self,
        ctx: AttemptContext,
        request: _CommitRequest,
        delta: list[ManifestEntry],
        prewritten: PrewrittenDelta | None,
        files: AttemptFiles,
    ) -> Snapshot:
        """Write the manifests and manifest lists of the next snapshot and describe it (not created yet).

        The base list (after merging the previous manifests), the delta list (after its manifests),
        the changelog list and the index manifest need nothing from each other, so they are written
        at once: on an object store that is one chain of round trips instead of four. A failure on
        any side is raised after every side ended; each file written is in `files` for its removal.
        """
        latest = ctx.latest

        def base_side() -> tuple[str, int]:
            previous = data_manifests(self.table, latest) if latest else []
            if request.rewrite_base is not None:
                return files.write_list(request.rewrite_base(ctx, previous))
            return files.write_list(files.merged_base(previous))

        def delta_side() -> tuple[str, int]:
            return files.write_list(
                (prewritten.manifests if prewritten else []) + files.write_manifests(delta)
            )

        def changelog_side() -> tuple[str | None, int | None, int | None]:
            if prewritten is None:
                return files.write_changelog(request.changelog, [], 0)
            return files.write_changelog(
                request.changelog, prewritten.changelog_manifests, prewritten.changelog_record_count
            )

        def index_side() -> str | None:
            return files.index_manifest(latest, request.drop_index_of, request.add_index_entries)

        at_once = self.table.file_io.io_parallelism if self._sides_at_once() else 1
        ((base_list, base_size), (delta_list, delta_size)), (changelog, index_manifest) = both(
            lambda: both(base_side, delta_side, at_once),
            lambda: both(changelog_side, index_side, at_once),
            at_once,
        )
        changelog_list, changelog_size, changelog_rows = changelog
        delta_rows = sum(e.file.row_count if e.kind == ADD else -e.file.row_count for e in delta)
        if prewritten is not None:
            delta_rows += prewritten.record_count_delta
        previous_total = latest.total_record_count if latest else 0
        if request.total_record_count is not None:
            previous_total = request.total_record_count - delta_rows
        return Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=ctx.schema.id,
            base_manifest_list=base_list,
            base_manifest_list_size=base_size,
            delta_manifest_list=delta_list,
            delta_manifest_list_size=delta_size,
            changelog_manifest_list=changelog_list,
            changelog_manifest_list_size=changelog_size,
            index_manifest=index_manifest,
            commit_user=self.commit_user,
            commit_identifier=request.identifier,
            commit_kind=request.kind,
            time_millis=int(time.time() * 1000),
            total_record_count=previous_total + delta_rows,
            delta_record_count=delta_rows,
            changelog_record_count=changelog_rows,
            watermark=latest.watermark if latest else None,
            statistics=latest.statistics if latest and latest.schema_id == ctx.schema.id else None,
            next_row_id=latest.next_row_id if latest else None,
            properties=request.properties or None,
            uuid=str(uuid.uuid4()),
            writer_version=WRITER_VERSION,
        )

    def _sides_at_once(self) -> bool:
        """Whether an attempt writes its sides on threads: where a round trip costs (an in-flight
        limit of SIDES_MIN_PARALLELISM or more: object stores). The base side's merge keeps up to the
        limit of manifest reads in flight while the other three sides send one request each, so a
        commit may briefly hold three requests more than the limit; on local disk (limit 4) the
        sides go one after another, and a fault injected at the N-th write hits the same file in
        every run."""
        return self.table.file_io.io_parallelism >= SIDES_MIN_PARALLELISM

    # -- retries and their bookkeeping ---------------------------------------------------------

    def _give_up_or_wait(self, attempt: int, started: float, options: CoreOptions) -> None:
        """After lost race number `attempt`: raise when the retry budget is spent, else back off."""
        elapsed_ms = (time.monotonic() - started) * 1000
        timeout_ms = options.commit_timeout_ms
        if attempt > options.commit_max_retries or (timeout_ms is not None and elapsed_ms > timeout_ms):
            raise CommitRetriesExhaustedError(
                f"{self.table.path}: commit failed after {attempt} attempts "
                f"({elapsed_ms:.0f} ms); other writers kept winning the next snapshot id"
            ) from None
        self._sleep(self._backoff_seconds(attempt, options))

    def _resolve_uncertain(self, snapshot: Snapshot, error: Exception) -> Snapshot:
        """The snapshot write raised: find out whether it landed before deciding anything."""
        try:
            landed = self.table.snapshot_manager.snapshot(snapshot.id)
        except SnapshotNotFoundError:
            log.warning("%s: snapshot %d write failed (%s); retrying", self.table.path, snapshot.id, error)
            raise _LostRace() from error
        if landed.uuid == snapshot.uuid:
            self._write_latest_hint(snapshot.id)
            return landed
        raise _LostRace() from error

    def _replaced_by_another_writer(self, snapshot: Snapshot) -> bool:
        """Read back the `snapshot-N` we just created: True when another writer's file replaced it.

        Why: a writer that claims an id by check-then-rename (Paimon's Java `LocalFileIO`, whose
        lock holds only inside its own JVM) may have checked before our create and moves its file
        over ours after it. Its snapshot is then N and ours is lost, so the commit retries at the
        next id like a lost race. Ordering: create `snapshot-N` (ours, by hard link), write the
        `LATEST` hint, read back. A rival's move that lands after the read-back escapes (its check
        and move are microseconds apart inside one lock, so it needs its thread to stall between
        them: `scripts/commit_race.py` measures how often none of this is noticed). A crash before
        the read-back leaves our snapshot, or the rival's in its place, as a lost race would.

        The files this attempt wrote are not removed: for a moment `snapshot-N` was ours, and a
        writer that read it then may have built `N+1` on its manifests. They are orphans unless
        such a snapshot names them, and remove-orphan-files tells which. Skipped where no writer
        can replace our file: S3 (a conditional put; Paimon's Java writers on S3 are unsafe
        without Paimon's catalog lock, which this check could not make safe, docs/safety.md) and
        `memory://` (one process). A read-back that fails is logged and the commit stands: we did
        create the file, and failing a landed commit would make a rerun commit it twice.
        """
        file_io = self.table.file_io
        if file_io.protocol in ("s3", "memory") or not (
            file_io.protocol == "file" or file_io.allow_unsafe_overwrite_commit
        ):
            return False
        try:
            landed = self.table.snapshot_manager.snapshot(snapshot.id)
        except PaimonFormatError as error:
            log.warning(
                "%s: could not read back snapshot %d after creating it (%s); assuming it is ours",
                self.table.path,
                snapshot.id,
                error,
            )
            return False
        if landed.uuid == snapshot.uuid:
            return False
        self.replaced_snapshots.append(snapshot.id)
        log.warning(
            "%s, created by this commit, was replaced by another writer's snapshot (commit user %s, "
            "kind %s): a writer whose rename is not atomic across processes (Paimon's LocalFileIO); "
            "retrying at the next id, the files of the lost attempt are left to remove-orphan-files",
            self.table.snapshot_manager.snapshot_path(snapshot.id),
            landed.commit_user,
            landed.commit_kind,
        )
        return True

    def _warn_if_foreign_writer_on_s3(self, latest: Snapshot | None) -> None:
        """Warn when a writer other than ours committed the latest snapshot on S3 within the hour.

        Our conditional put never replaces a snapshot, but Paimon's Java commit on S3 renames by
        copy after an exists() check, guarded only by Paimon's catalog lock (`lock.enabled`), which
        we do not take: a Java writer committing at the same moment can replace the snapshot this
        commit creates, and the read-back that catches that on local disk is not done on S3 (see
        `_replaced_by_another_writer`). Java's snapshots carry no `writerVersion`; ours always do.
        """
        if self.table.file_io.protocol != "s3" or latest is None:
            return
        if (latest.writer_version or "").startswith("paimon-jobs"):
            return
        age_s = time.time() - latest.time_millis / 1000
        if age_s < _LIVE_WRITER_SECONDS:
            log.warning(
                "%s: snapshot %d was committed %.0f s ago by another writer (commit user %s), most likely "
                "Paimon's Java writer: on S3 its commit can replace the snapshot this job creates without "
                "either side noticing; run committing jobs while Java's writers are stopped "
                "(docs/safety.md, concurrent writers)",
                self.table.path,
                latest.id,
                age_s,
                latest.commit_user,
            )

    def _find_landed(
        self, last_seen: int | None, latest: Snapshot | None, identifier: int, kind: str
    ) -> Snapshot | None:
        """Our commit may have landed in an attempt that looked failed: look for it before retrying."""
        if latest is None:
            return None
        start = (last_seen or 0) + 1
        for snapshot_id in range(latest.id, start - 1, -1):
            try:
                candidate = self.table.snapshot_manager.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                continue
            if (
                candidate.commit_user == self.commit_user
                and candidate.commit_identifier == identifier
                and candidate.commit_kind == kind
            ):
                return candidate
        return None

    def _backoff_seconds(self, attempt: int, options: CoreOptions) -> float:
        wait_ms = min(options.commit_min_retry_wait_ms * 2 ** (attempt - 1), options.commit_max_retry_wait_ms)
        return wait_ms * (1 + random.random() * 0.2) / 1000

    def _write_latest_hint(self, snapshot_id: int) -> None:
        try:
            self.table.snapshot_manager.write_latest_hint(snapshot_id)
        except PaimonFormatError as error:  # only a hint: readers fall back to listing
            log.warning("%s: could not write the LATEST hint: %s", self.table.path, error)

    def _options(self) -> CoreOptions:
        """The retry budget and waits: the handle's schema's options (an attempt lists the latest)."""
        return CoreOptions({**self.table.schema.options, **self._option_overrides})
