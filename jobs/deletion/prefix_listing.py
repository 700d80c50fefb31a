"""Every file under a table on an object store, listed by flat key ranges instead of directory by directory.

Why: on S3 listing a directory is one LIST request (or more), so a table of 10,000 partitions x 4
buckets costs over 40,000 requests in waves, each waiting a round trip. One ListObjectsV2 of the
table's prefix without a delimiter returns 1,000 keys a page whatever the directories: the whole
table costs objects / 1,000 requests. To list in parallel the key space is cut into ranges:

1. The driver lists the table root once with a delimiter (`FileIO.list_dir`): its files and its
   directories (snapshot/, manifest/, partition and bucket directories, ...). A missing root is
   MissingFileError, never an empty listing. The root's own files are taken from this listing.
2. The directories, in the order of their keys ("dt=1-x/" sorts before "dt=1/"), are grouped into
   runs of neighbours: small metadata directories join the run before them, and many directories
   are grouped evenly into at most max(MIN_RANGES, TASKS_PER_CORE x cores) runs. A run from
   directory a to z is the key range after "a/" (StartAfter is exclusive; "a/" is at most a's
   marker, no file) and before "z0" ("0" follows "/": every "z/..." key sorts before it), listed
   under the Prefix both bounds share. Each range ends where its last directory ends, so its last
   page reads no keys of the next range beyond what shares that Prefix.
3. The ranges go to the executors as a DataFrame (`mapInArrow`, so the driver path runs it alike);
   each task lists its ranges `io_parallelism` at a time (`stream_in_flight`), page after page
   within a range, handing each page on as it comes (memory per task is a few pages, however big a
   range turns out), and judges every file by its table-relative path as the wave lister does
   (`orphan_rules.directory_judge`, which gives `judge_file`'s rule and kind).

What is listed: every key below a directory the root listing found, and the root's files, as the
wave lister lists them; an entry created at the root after step 1 may be missed, as there, and
is younger than the job, so never an orphan to delete. Listed exactly once: the ranges are disjoint
and skip root-level keys (those come from step 1 only), and the result is local-checkpointed before
anything reads it; a later stage never lists again.
Requests: at most objects / 1,000 + one per range (its last page) + the root's listing. The
job passes the objects it expects (`estimated_objects`: the latest snapshot's live files and
manifests), and ranges are cut so that each holds about PAGES_PER_RANGE pages: the extra requests
stay within a tenth of the pages, and a range's pages, one after another, still take only
PAGES_PER_RANGE round trips.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.deletion.listed import LISTED_COLUMNS, LISTED_SCHEMA, Listing
from paimon_format.maintenance.orphan_rules import FileNaming, Judgement, directory_judge, judge_file
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import map_in_flight, stream_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_RANGES = 64  # enough ranges to keep one task's `io_parallelism` (64 on object stores) busy
PAGES_PER_RANGE = 10  # a range's last page is its only extra request: at most 1 in 10 extra
KEYS_PER_PAGE = 1000
TASKS_PER_CORE = 4
# Root directories that hold a few small files (metadata, one per snapshot/schema/tag...): a range
# of their own would cost a LIST request for next to nothing, so they join the range before them.
SMALL_DIRECTORIES = frozenset({"branch", "changelog", "consumer", "schema", "snapshot", "statistics", "tag"})
_RANGE_COLUMNS = "start_after string, stop_before string"

# A key range: (list keys after this, stop before this), relative to the table root.
KeyRange = tuple[str, str]


def lists_by_key_ranges(file_io: FileIO) -> bool:
    """Whether a table on `file_io` is listed by key ranges: the store lists them
    (`FileIO.lists_key_ranges`) and no subclass changes how it lists (fault injection overrides
    `list_dir`: the wave lister goes through it, a key range would not)."""
    return file_io.lists_key_ranges and type(file_io).list_dir is FileIO.list_dir


def range_budget(expected_objects: int | None, cores: int) -> int:
    """How many key ranges to cut: enough to keep every core's pool busy, but no more than one per
    PAGES_PER_RANGE pages of the objects expected, so ranges add at most a tenth to the pages."""
    budget = max(MIN_RANGES, TASKS_PER_CORE * cores)
    if expected_objects is not None:
        budget = min(budget, max(1, -(-expected_objects // (PAGES_PER_RANGE * KEYS_PER_PAGE))))
    return budget


def estimated_objects(table: Table) -> int:
    """About how many objects the table's prefix holds: the latest snapshot's live data files and
    the manifests its lists name (two reads). Old snapshots' files and orphans are not counted, so
    this errs low: fewer ranges, never more requests. The latest is the open check's read when it is
    still handed over (taken: the roots read after the listing must look afresh), and the lists come
    from the handle's cache (sizing read them): an estimate needs no fresh look, and each read is a
    round trip on an object store."""
    latest = table.snapshot_manager.take_latest_handed_over()
    if latest is None:
        return 0
    names = [name for name in (latest.base_manifest_list, latest.delta_manifest_list) if name]
    objects = 0
    # both lists at once when not cached (on an object store each read is a round trip)
    read = map_in_flight(table.manifest_list, names, min(2, table.file_io.io_parallelism))
    for metas in read:
        for meta in metas:
            objects += 1 + max(0, meta.num_added_files - meta.num_deleted_files)
    return objects


def key_ranges(directories: list[str], max_ranges: int) -> list[KeyRange]:
    """Disjoint key ranges, each covering one run of neighbouring `directories` (module docstring, 2)."""
    runs: list[list[str]] = []
    run_is_small = False
    for name in sorted(directories, key=lambda directory: f"{directory}/"):
        small = name in SMALL_DIRECTORIES
        if runs and (small or run_is_small):
            runs[-1].append(name)
            run_is_small = run_is_small and small
        else:
            runs.append([name])
            run_is_small = small
    wanted = max(1, max_ranges)
    if len(runs) > wanted:  # group neighbours evenly: every range gets about as many directories
        bounds = [index * len(runs) // wanted for index in range(wanted + 1)]
        runs = [[name for run in runs[bounds[i] : bounds[i + 1]] for name in run] for i in range(wanted)]
    return [(f"{run[0]}/", f"{run[-1]}0") for run in runs]


class RangeCounters:
    """Spark accumulators the listing tasks add to (from the task's own thread, never a pool's)."""

    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self.files = context.accumulator(0)
        self.pages = context.accumulator(0)  # LIST requests of the ranges
        self.ranges = context.accumulator(0)


def list_range(
    file_io: FileIO, root: str, naming: FileNaming, key_range: KeyRange
) -> Iterator[tuple[pa.RecordBatch | None, int]]:
    """(an Arrow batch of LISTED_SCHEMA or None when the page held no file, its files) per LIST page
    of one key range below `root`: a page at a time, so a range far bigger than the estimate that
    cut it costs no more memory than a small one.

    Files of one directory come one after another (keys are sorted), so each directory's judge is
    made once, as in the wave lister. Keys at the root itself are skipped: the root listing has them.
    """
    judged: str | None = None
    judge: Callable[[str], Judgement] = directory_judge("", naming)
    for page in file_io.list_key_range(root, *key_range):
        rows: dict[str, list] = {name: [] for name in LISTED_SCHEMA.names}
        paths, sizes, mtimes, rules, kinds = (rows[name] for name in LISTED_SCHEMA.names)
        for relative, size, modified_ms in page:
            directory, _, name = relative.rpartition("/")
            if not directory:
                continue
            if directory != judged:
                judged, judge = directory, directory_judge(directory, naming)
            judgement = judge(name)
            paths.append(relative)
            sizes.append(size)
            mtimes.append(modified_ms)
            rules.append(judgement.rule)
            kinds.append(judgement.kind)
        yield (pa.RecordBatch.from_pydict(rows, schema=LISTED_SCHEMA) if paths else None), len(paths)


def _range_lister(
    file_io: FileIO, root: str, naming: FileNaming, counters: RangeCounters
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: key ranges in, their files out, `io_parallelism` ranges in flight,
    pages handed on as they come (`stream_in_flight`: a bounded buffer, whatever a range holds)."""

    def list_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ranges: list[KeyRange] = []
        for batch in batches:
            starts = batch.column("start_after").to_pylist()
            ranges.extend(zip(starts, batch.column("stop_before").to_pylist(), strict=True))

        def pages(key_range: KeyRange) -> Iterator[tuple[pa.RecordBatch | None, int]]:
            yield from list_range(file_io, root, naming, key_range)
            yield None, -1  # the range's end, counted in the task's own thread

        in_flight = min(file_io.io_parallelism, len(ranges))
        for listed, files in stream_in_flight(pages, ranges, in_flight):
            if files < 0:
                counters.ranges.add(1)
                continue
            counters.pages.add(1)
            counters.files.add(files)
            if listed is not None:
                yield listed

    return list_ranges


def list_by_key_ranges(
    spark: SparkSession,
    file_io: FileIO,
    root: str,
    naming: FileNaming,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    expected_objects: int | None = None,
) -> Listing:
    """List every file below `root` by key ranges on the executors (see the module docstring).

    `expected_objects` (None: unknown) caps the ranges at one per PAGES_PER_RANGE pages.
    Raises MissingFileError when the root does not exist; any failed LIST page fails the listing.
    """
    log = log or logging.getLogger(__name__)
    entries = [(status.path.rstrip("/").rsplit("/", 1)[-1], status) for status in file_io.list_dir(root)]
    directories = [name for name, status in entries if status.is_dir and name]
    cores = max(1, spark.sparkContext.defaultParallelism)
    ranges = key_ranges(directories, range_budget(expected_objects, cores))
    log.info(
        "listing by key ranges: %d ranges over %s root directories, up to %d in flight per task",
        len(ranges),
        f"{len(directories):,}",
        file_io.io_parallelism,
    )
    counters = RangeCounters(spark)
    frame = spark.createDataFrame(ranges, _RANGE_COLUMNS)
    tasks = min(len(ranges), cores)
    if tasks > 1:
        frame = frame.repartition(tasks)
    files = frame.mapInArrow(_range_lister(file_io, root, naming, counters), LISTED_COLUMNS)
    root_files = []
    for name, status in entries:
        if not status.is_dir:
            judgement = judge_file(name, naming)
            root_files.append(
                (name, status.size, status.modification_time_ms, judgement.rule, judgement.kind)
            )
    if root_files:
        files = files.unionByName(spark.createDataFrame(root_files, LISTED_COLUMNS))
    files = files.localCheckpoint(eager=True)
    log.info(
        "listed %s files in %s LIST pages over %d key ranges",
        f"{counters.files.value:,}",
        f"{counters.pages.value:,}",
        counters.ranges.value,
    )
    return Listing(files, 1, 0, 1, ranges=counters.ranges.value, pages=counters.pages.value)
