"""The files of a `df.write.format("paimon")` that no commit names, found by their names and removed.

Spark hands the driver's `commit` (or `abort`) one message per task partition, from the attempt that
won. Attempts whose message never arrives leave their files behind: a speculative duplicate that
lost the race (finished or killed), an attempt killed with its executor, a task whose Python worker
died before its own cleanup ran. Nothing names those files, so no snapshot ever will; they are
orphans, and the write that made them can find them cheaply because every file name carries it:

    data-<write id: 8-4-4 hex>-<task attempt: 4-6 hex><file: 6 hex>-<n>.parquet
    index-<write id>-<task attempt><file>-0

`<write id>` is 64 random bits drawn once per write (`make_writer`, on the driver); the rest is
Spark's task attempt id (unique within the SparkContext: retries and speculative copies differ)
and the attempt's own counter of bucket writers, so no two files of a write share a name and the
name keeps Paimon's shape (`<prefix><uuid>-<n>.<format>`, what Paimon's readers and our
remove-orphan-files accept). The driver's own files (merged HASH index files) use attempt
`DRIVER_ATTEMPT`.

After the commit landed (or in `abort`), the driver lists only the directories the messages name
(bucket directories, and `index/` for HASH files), and only the keys beginning with this write's
prefix: on S3 one ListObjectsV2 per (directory, file prefix), however large the directory; elsewhere
one listing per directory. It deletes every listed file of this write that the messages (and the
commit's own index files) do not name.

Crash ordering: the commit first, then this cleanup; a crash in between leaves only files that no
snapshot names, which remove-orphan-files takes later. Not found here (left for remove-orphan-files):
files in a directory no finished attempt wrote to (an attempt whose input differed from its retry's,
e.g. after a non-deterministic repartition), and files a zombie attempt Spark has not yet stopped
writes after the listing.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from paimon_format.errors import MissingFileError
from paimon_format.table import Table

ATTEMPT_BITS = 40  # Spark task attempt ids of one SparkContext stay far below 2^40
COUNTER_BITS = 24  # bucket writers one task attempt opens (one per bucket per flush)
DRIVER_ATTEMPT = (1 << ATTEMPT_BITS) - 1  # the commit's own files (merged HASH index files)
INDEX_DIR = "index"
INDEX_PREFIX = "index-"

log = logging.getLogger("jobs.source.write")


def new_write_id() -> str:
    """64 random bits as the first three groups of a uuid: `xxxxxxxx-xxxx-xxxx`."""
    digits = uuid.uuid4().hex[:16]
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}"


@dataclass
class FileUuids:
    """The uuid part of the file names one task attempt (or the driver) writes: call for the next."""

    write_id: str
    attempt: int
    counter: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.attempt <= DRIVER_ATTEMPT:
            raise ValueError(f"task attempt id {self.attempt} does not fit in {ATTEMPT_BITS} bits")

    def __call__(self) -> str:
        if self.counter >= 1 << COUNTER_BITS:
            raise ValueError(f"task attempt {self.attempt} opened more than 2^{COUNTER_BITS} file writers")
        tail = f"{self.attempt:010x}{self.counter:06x}"
        self.counter += 1
        return f"{self.write_id}-{tail[:4]}-{tail[4:]}"


def attempt_of(name: str, write_id: str) -> int | None:
    """The task attempt that wrote a file named `name` by the write `write_id` (None: another's)."""
    at = name.find(f"-{write_id}-")
    if at < 0:
        return None
    tail = name[at + len(write_id) + 2 :]
    return int(tail[:4] + tail[5:11], 16)


def name_prefixes(target: Table, directory: str) -> list[str]:
    """The names files of a write begin with in `directory` (before the write id): data and changelog
    files in a bucket directory (and index files when they live there), index files in `index/`."""
    if directory == INDEX_DIR:
        return [INDEX_PREFIX]
    options = target.options
    prefixes = [options.data_file_prefix]
    if options.changelog_producer == "input":
        prefixes.append(options.changelog_file_prefix)
    if options.get("index-file-in-data-file-dir", "false").strip().lower() == "true":
        prefixes.append(INDEX_PREFIX)
    return prefixes


def remove_leftovers(target: Table, write_id: str, named: Iterable[str], keep: Iterable[str]) -> list[str]:
    """Delete the files of write `write_id` in the directories of `named` (table-relative paths of the
    files the tasks' messages name) except those in `keep` (what the snapshot names; nothing in
    `abort`); the deleted files' relative paths. A listing that fails raises (nothing is deleted)."""
    kept = {path.lstrip("/") for path in keep}
    directories = sorted({path.lstrip("/").rpartition("/")[0] for path in named})
    with ThreadPoolExecutor(max(1, min(len(directories), target.file_io.io_parallelism))) as pool:
        listed = list(pool.map(lambda directory: _files_of_write(target, directory, write_id), directories))
    leftovers = sorted(path for paths in listed for path in paths if path not in kept)
    if leftovers:
        target.file_io.delete_many([target.full_path(path) for path in leftovers])
        log.info(
            "removed %d files of write %s that no commit message names (attempts whose result Spark "
            "dropped), e.g. %s",
            len(leftovers),
            write_id,
            leftovers[0],
        )
    return leftovers


def _files_of_write(target: Table, directory: str, write_id: str) -> list[str]:
    """Table-relative paths of the files in `directory` whose names carry `write_id`."""
    file_io = target.file_io
    full = target.full_path(directory) if directory else target.path
    starts = [f"{prefix}{write_id}-" for prefix in name_prefixes(target, directory)]
    names: list[str] = []
    if file_io.lists_key_ranges:  # S3: only this write's keys, one request per prefix (< 1,000 keys)
        for start in starts:
            for page in file_io.list_key_range(full, start_after=start, stop_before=start[:-1] + "."):
                names.extend(key for key, _, _ in page if "/" not in key)
    else:
        try:
            statuses = file_io.list_dir(full)
        except MissingFileError:  # the directory is gone, and with it every file it held
            return []
        for status in statuses:
            name = status.path.rstrip("/").rpartition("/")[2]
            # a hidden `.<name>.<uuid>.tmp` is a data file's spool a killed task left (`data.spool`)
            if not status.is_dir and name.lstrip(".").startswith(tuple(starts)):
                names.append(name)
    return [f"{directory}/{name}" if directory else name for name in names]
