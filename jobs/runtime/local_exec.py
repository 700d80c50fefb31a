"""Small tables maintained in the driver process: the choice between Spark and `LocalSession`.

A maintenance job over a small table spends most of its time in Spark's per-job cost, not in storage
calls. The jobs that support it (expire-snapshots, compact-manifests `order: partition`,
remove-orphan-files, drop-partition, expire-partitions) wrap their
work in `run_where_it_fits`: it sizes the table from a few metadata reads and hands the same job
function either a `jobs.runtime.local_frame.LocalSession` (the work runs in this process, same code, same
safety checks) or the SparkSession. The run record says which (`details.executed_in`) and why
(`details.placement`). A table that fits the driver's limits below runs there when the driver is also
estimated faster (`jobs.runtime.placement`): on an object store the requests a run needs and their
latency, measured on the sizing reads themselves, decide; on local disk the rows it reads against
Spark's start-up.

Sizing is cheap and bounded: per branch one directory listing of snapshots, tags and changelogs and
the latest snapshot's manifest lists (their entry counts), never a manifest. That cannot see a file
only an old snapshot or tag names, nor orphans, so the local run itself is bounded too: no frame may
hold more than `row_limit` rows. A frame past it aborts the local run before it grows (LocalLimitExceeded)
and the job runs again on Spark, from the start. Every job plans completely before its first
deletion or commit, so an abort almost always comes before anything changed; one that comes later
(expire-snapshots' changelog phase after its snapshot phase) is a crash followed by a rerun, which
every one of these jobs is built to survive: the rerun plans from what is left.

expire-snapshots is sized by its work as well (`names_bound`): it reads the expiring snapshots'
deltas and names what the retained roots need, not every file of the table, so a table of a million
files expiring a few snapshots runs in the driver when the roots times the manifests they name fit
the row limit (`TableSize.names_fit`); Spark's start-up alone costs more than such an expiry.

drop-partition and expire-partitions are sized by their scan (`scan_bound`): on a latest snapshot
whose manifest lists count no DELETE entry their scan streams (one manifest's entries at a time, a
summary per partition, the DELETEs written as they go, 8 bytes per dropped file for the duplicate
check), so the driver reads up to `local_max_scan_entries` entries itself: decoding them (~60,000
per CPU-second) costs less than Spark's start-up and first job up to about half a million
(`TableSize.scan_fits`). drop-partition reads only the manifests whose partition stats may hold its
selection, so only theirs count (`TableSize.scan_entries`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from jobs.runtime.local_frame import LocalLimitExceeded, LocalSession
from jobs.runtime.placement import (
    LatencyProbe,
    Work,
    estimate,
    listing_pages,
    spark_parallelism,
    spark_start_s,
)
from jobs.runtime.report import RunRecord
from paimon_format.branches import MAIN_BRANCH
from paimon_format.maintenance.references import keeps_changelog
from paimon_format.manifest.codec import read_manifest_list
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.snapshot import Snapshot
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.runtime.registry import JobContext

# remove-orphan-files on a table of 200,000 files and 200 manifests runs in the driver (4.6 s, against
# Spark's 4.3 s start-up plus its own work); the row limit they make, 2 x 500,000 rows, caps a frame.
DEFAULT_MAX_ENTRIES = 250_000
DEFAULT_MAX_FILES = 250_000
DEFAULT_MAX_SCAN_ENTRIES = 500_000
MAX_BRANCHES_SIZED = 64  # more branches than this: not a small table, without reading them all
ENGINE_DRIVER, ENGINE_SPARK = "driver", "spark"


class LocalRunOptions(BaseModel):
    """The keys of a job that can run a small table in the driver process."""

    local: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="auto: tables within local_max_entries / local_max_files run in the driver process "
        "without Spark jobs when that is estimated faster (requests x their latency, rows read, Spark's "
        "start-up); always: every table does; never: always Spark",
    )
    local_max_entries: int = Field(
        default=DEFAULT_MAX_ENTRIES,
        ge=0,
        description="at most this many manifest entries (latest snapshots) plus snapshots, tags, changelogs",
    )
    local_max_files: int = Field(
        default=DEFAULT_MAX_FILES, ge=0, description="at most this many live data files (latest snapshots)"
    )
    local_max_scan_entries: int = Field(
        default=DEFAULT_MAX_SCAN_ENTRIES,
        ge=0,
        description="drop-partition, expire-partitions: a latest snapshot without DELETE entries is "
        "scanned in the driver up to this many manifest entries (streamed, not held)",
    )


@dataclass(frozen=True)
class TableSize:
    """What a table's metadata says about its size, from the latest snapshot of each branch."""

    manifest_entries: int  # ADD and DELETE entries the latest snapshots' manifest lists count
    live_files: int  # added minus deleted files of the latest snapshots' base and delta lists
    roots: int  # snapshots, tags and long-lived changelogs: each is read by the jobs
    branches: int
    manifests: int = 0  # manifests the latest snapshots' lists name
    deleted_entries: int = 0  # DELETE entries the latest snapshots' base and delta lists count
    # what a partition job's scan reads: the main branch's latest data manifests that may hold a
    # wanted partition (all of them without a `may_hold` test), their entries and DELETE entries
    scan_entries: int = 0
    scan_deleted_entries: int = 0
    scan_manifests: int = 0

    def fits(self, max_entries: int, max_files: int) -> bool:
        return (
            self.branches <= MAX_BRANCHES_SIZED
            and self.manifest_entries + self.roots <= max_entries
            and self.live_files <= max_files
        )

    def scan_fits(self, max_scan_entries: int) -> bool:
        """Whether a partition job's scan streams in the driver: no DELETE entry to merge (each
        task drops what it reads) and at most `max_scan_entries` entries to read."""
        return self.scan_deleted_entries == 0 and self.scan_entries <= max_scan_entries

    def names_fit(self, max_entries: int, max_files: int) -> bool:
        """Whether naming what every root needs fits a local run: each root's lists and the manifests
        they name (the latest snapshots' count stands for each root's), one row each."""
        return self.branches <= MAX_BRANCHES_SIZED and self.roots * (self.manifests + 3) <= row_limit(
            max_entries, max_files
        )


def measure(
    table: Table,
    may_hold: Callable[[ManifestFileMeta], bool] | None = None,
    probe: LatencyProbe | None = None,
) -> TableSize:
    """Size the table from its directory listings and latest manifest lists (see the module docstring).

    `may_hold`: a partition job's manifest test (`paimon_format.scan.partition_pruning`): its scan reads
    only the main branch's data manifests it passes, so only those count as `scan_entries`.
    `probe`: times the storage calls sizing makes (the store's latency, without a request of its own).
    Read errors propagate: a table whose metadata cannot be read is not "small", it is broken.
    """
    origin = table  # the job's own handle: its open check's latest and its list cache are shared
    if probe is not None:
        table = Table(probe.wrap(table.file_io), table.path, table.branch)
    scan_entries = scan_deleted = scan_manifests = 0
    all_branches, roots, latest_of = _roots_and_latest(table, origin.snapshot_manager.handed_over())
    # more branches than are sized: only the main branch's scan is counted (the table does not fit)
    branches = all_branches if len(all_branches) <= MAX_BRANCHES_SIZED else [MAIN_BRANCH]
    latest = latest_of[MAIN_BRANCH]
    # every latest snapshot's lists at once (on an object store each read waits a round trip)
    lists = [
        (branch, counts_files, name)
        for branch in branches
        if (snapshot := latest_of[branch]) is not None
        for name, counts_files in (
            (snapshot.base_manifest_list, True),
            (snapshot.delta_manifest_list, True),
            # a branch's copy of a tag keeps no changelog: Java's expiry may have deleted its list
            (
                snapshot.changelog_manifest_list
                if keeps_changelog(table.for_branch(branch), snapshot)
                else None,
                False,
            ),
        )
        if name
    ]

    def read(item: tuple[str, bool, str]) -> list[ManifestFileMeta]:
        if item[0] == MAIN_BRANCH:  # read once for sizing and the job's plan (a list never changes)
            return origin.manifest_list(item[2])
        branch_table = table.for_branch(item[0])
        return read_manifest_list(branch_table.file_io, branch_table.manifest_path(item[2]))

    entries = files = manifests = deleted = 0
    parallelism = table.file_io.io_parallelism
    for (branch, counts_files, _name), metas in zip(
        lists, map_in_flight(read, lists, parallelism), strict=True
    ):
        for meta in metas:
            manifests += 1
            entries += meta.num_added_files + meta.num_deleted_files
            if counts_files:
                files += meta.num_added_files - meta.num_deleted_files
                deleted += meta.num_deleted_files
            if (
                branch == MAIN_BRANCH
                and counts_files
                and latest is not None
                and (may_hold is None or may_hold(meta))
            ):
                scan_manifests += 1
                scan_entries += meta.num_added_files + meta.num_deleted_files
                scan_deleted += meta.num_deleted_files
    if len(all_branches) > MAX_BRANCHES_SIZED:
        return TableSize(0, 0, 0, len(all_branches), 0, 0, scan_entries, scan_deleted, scan_manifests)
    return TableSize(
        entries, files, roots, len(branches), manifests, deleted, scan_entries, scan_deleted, scan_manifests
    )


def _roots_and_latest(
    table: Table, handed_over: tuple[Snapshot | None] | None
) -> tuple[list[str], int, dict[str, Snapshot | None]]:
    """The table's branches (main first), the roots (snapshots, long-lived changelogs, tags) of
    those sized and each one's latest snapshot: the main branch's listings and latest read go out
    with the listing of branch/, the other branches' after it, all at once within each wave.
    `handed_over`: the main branch's latest as the job's open check read it (no second read)."""
    parallelism = table.file_io.io_parallelism
    names: list[str] = []
    roots, latest_of = 0, {MAIN_BRANCH: handed_over[0] if handed_over else None}

    def list_branches() -> list[str]:
        names.extend(table.branch_manager.branch_names())
        return []

    def wave(branches: list[str], first: list[Callable[[], Any]]) -> None:
        nonlocal roots
        calls: list[tuple[str, Callable[[], Any]]] = [(MAIN_BRANCH, call) for call in first]
        for branch in branches:
            branch_table = table.for_branch(branch)
            manager = branch_table.snapshot_manager
            calls += [(branch, manager.snapshot_ids), (branch, manager.changelog_ids)]
            calls.append((branch, branch_table.tag_manager.tag_names))
            if branch != MAIN_BRANCH or handed_over is None:
                calls.append((branch, lambda m=manager: (m.latest(),)))
        # a latest read sends two requests at once: half as many calls in flight keeps the bound
        at_once = max(1, parallelism // 2)
        for (branch, _call), found in zip(
            calls, map_in_flight(lambda call: call[1](), calls, at_once), strict=True
        ):
            if isinstance(found, tuple):
                latest_of[branch] = found[0]
            else:
                roots += len(found)

    wave([MAIN_BRANCH], [list_branches])  # the branch listing adds no root: it returns []
    sized = names if len(names) + 1 <= MAX_BRANCHES_SIZED else []
    latest_of.update(dict.fromkeys(sized))
    if sized:
        wave(sized, [])
    return [MAIN_BRANCH, *names], roots, latest_of


def row_limit(max_entries: int, max_files: int) -> int:
    """The most rows one frame of a local run may hold: room for the listing and the entries read."""
    return 2 * (max_entries + max_files)


def run_where_it_fits(
    context: JobContext,
    table: Table,
    config: Any,
    job: Callable[[SparkSession], None],
    allowed: bool = True,
    names_bound: bool = False,
    scan_bound: bool = False,
    may_hold: Callable[[ManifestFileMeta], bool] | None = None,
    lists_files: bool = False,
) -> None:
    """Run `job(session)` in the driver process when the table fits there and the driver is estimated
    faster (`jobs.runtime.placement`), else on Spark.
    `allowed` False: this run needs Spark whatever the table's size (e.g. it reads an inventory).
    `names_bound`: the job's work is bounded by naming what each root needs (`TableSize.names_fit`)
    plus what its own plan reads, not by the table's file count (expire-snapshots: a large table
    expiring a few snapshots); a table that fits so is tried in the driver too, and a plan that
    outgrows the row limit there goes to Spark as any other. `scan_bound`: the job is a partition
    scan that streams on a snapshot without DELETE entries (`TableSize.scan_fits`), reading the
    manifests `may_hold` passes (all without it). `lists_files`: the job lists every file of the
    table (remove-orphan-files), so its rows and listing requests count too.

    `job` reads and fills `context.record`; during a local attempt that is a scratch record, merged
    into the real one when the attempt ends (also when it fails, so a failure's record shows what
    ran), and dropped when the attempt is abandoned for Spark (LocalLimitExceeded).
    """
    record: RunRecord = context.record
    mode = getattr(config, "local", "never") if allowed else "never"
    limit: int | None = None
    if mode == "auto":
        size, placement = place(table, config, names_bound, scan_bound, may_hold, lists_files)
        record.details["table_size"] = asdict(size)
        record.details["placement"] = placement
        context.log.info("%s: %s", placement["engine"], placement["reason"])
        if placement["engine"] == ENGINE_SPARK:
            mode = "never"
        limit = row_limit(config.local_max_entries, config.local_max_files)
        if scan_bound:  # a streaming scan's frames: a row per partition at most, never one per file
            limit = max(limit, 2 * config.local_max_scan_entries)
    else:
        engine = ENGINE_DRIVER if mode == "always" else ENGINE_SPARK
        reason = f"local: {mode}" if allowed else "this run needs Spark (it reads or writes through Spark)"
        record.details["placement"] = {"engine": engine, "reason": reason}
    if mode != "never":
        scratch = RunRecord(operation=record.operation, table=record.table, dry_run=record.dry_run)
        context.record = scratch
        try:
            job(LocalSession(row_limit=limit))
        except LocalLimitExceeded as error:
            context.log.info("not small after all (%s): running on Spark", error)
            record.details["local_abandoned"] = str(error)
        except BaseException:
            _merge(record, scratch, ENGINE_DRIVER)
            raise
        else:
            _merge(record, scratch, ENGINE_DRIVER)
            return
        finally:
            context.record = record
    record.details["executed_in"] = ENGINE_SPARK
    job(context.spark)


def place(
    table: Table,
    config: Any,
    names_bound: bool = False,
    scan_bound: bool = False,
    may_hold: Callable[[ManifestFileMeta], bool] | None = None,
    lists_files: bool = False,
) -> tuple[TableSize, dict[str, Any]]:
    """The table's size and where its run goes (`details.placement`: engine, reason, the bound it
    fits by, latency_ms, requests, rows, driver_s, spark_s): the driver when the table fits its row
    limit and the driver is estimated faster; a table past the limits goes to Spark whatever the
    estimate."""
    probe = LatencyProbe()
    size = measure(table, may_hold, probe)
    fits_by = _fits_by(size, config, names_bound, scan_bound)
    work = work_of(size, fits_by or "size", lists_files, table.file_io.protocol)
    guess = estimate(
        work,
        probe.latency_s,
        table.file_io.io_parallelism,
        spark_parallelism(getattr(config, "spark", None)),
        spark_start_s(),
    )
    if fits_by is None:
        engine = ENGINE_SPARK
        reason = (
            "larger than the driver's limits (local_max_entries, local_max_files, local_max_scan_entries)"
        )
    else:
        engine = ENGINE_DRIVER if guess.driver_faster else ENGINE_SPARK
        reason = guess.reason()
    return size, {"engine": engine, "reason": reason, "fits_by": fits_by, **asdict(guess)}


def _fits_by(size: TableSize, config: Any, names_bound: bool, scan_bound: bool) -> str | None:
    """Which bound keeps the run within the driver's row limit: the job's own (names, scan) before the
    table's size, since the job's own says what it reads; None when none does."""
    if names_bound and size.names_fit(config.local_max_entries, config.local_max_files):
        return "names"
    if scan_bound and size.scan_fits(config.local_max_scan_entries):
        return "scan"
    if size.fits(config.local_max_entries, config.local_max_files):
        return "size"
    return None


def work_of(size: TableSize, fits_by: str, lists_files: bool, protocol: str) -> Work:
    """The requests and rows a run reads, by the bound it fits by: a scan reads its manifests; a
    names-bound run every root, its lists and the manifests they name; any other every root, its
    lists, the manifests and their entries, and with `lists_files` every file's listing."""
    if fits_by == "scan":
        return Work(requests=3 + size.scan_manifests, rows=size.scan_entries)
    roots = 3 * size.roots + size.manifests  # a root file and its base and delta lists, each manifest
    if fits_by == "names":
        return Work(requests=roots, rows=size.roots * (size.manifests + 3))
    pages = listing_pages(size.live_files, protocol) if lists_files else 0
    rows = size.manifest_entries + (size.live_files if lists_files else 0)
    return Work(requests=roots + pages, rows=rows)


def _merge(record: RunRecord, scratch: RunRecord, engine: str) -> None:
    for key, value in scratch.counts.items():
        record.count(key, value)
    for key, value in scratch.bytes.items():
        record.add_bytes(key, value)
    for key, paths in scratch.samples.items():
        record.sample(key, paths)
    record.snapshot_ids.update(scratch.snapshot_ids)
    record.details.update(scratch.details)
    record.details["executed_in"] = engine
