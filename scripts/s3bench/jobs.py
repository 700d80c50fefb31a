"""The jobs the S3 benchmark runs, their settings, and the fewest requests each needs.

The fewest count is what a job that knows the table's layout must still send, computed from the
facts the builder counted (scripts/s3bench/tables.py), never from what a run sent:
- a listing costs a page per 1,000 keys of a flat (delimiter-less) listing of the prefix;
- every metadata file the job must read is one GET (snapshot, tag, schema, manifest list, manifest);
  a data file it must read is one GET (the whole object; a Parquet reader's footer-then-body costs
  two, which the ratio then shows);
- every file it writes is one PUT; deletes go in DeleteObjects batches of 1,000 keys;
- READ_LATEST: the latest snapshot's chain, LATEST hint + snapshot + schema + base and delta list;
- COMMIT: a new manifest, its base and delta list, the snapshot (a conditional PUT), the LATEST hint.
- LOCK: every job that changes a table but `write` holds the table's lock (jobs/runtime/run_lock.py):
  a conditional PUT to take it, then a GET (is it still ours?) and a DELETE to release it; added to
  each such job's count and chain by `fewest_of` / `round_trips_of`.

The round trips are the longest chain of requests that must wait for each other however many are in
flight: a manifest cannot be read before the list that names it, a snapshot file is deleted only after
the older one (ids never get a hole). With unlimited requests in flight a job still takes its chain
times the latency, so its floor is the larger of the two: fewest x latency / in-flight limit, and
round trips x latency. Each chain below names its steps; requests that need nothing from each other
(the snapshots, tags and schema read together) are one step.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scripts.s3bench.tables import FIRST_DAY, TableFacts, day_value

READ_LATEST = 5
# Finding the latest takes two more requests than reading it, which a correct reader must send (the
# compact and read_table counts include them; the other jobs' counts do not yet): the LATEST hint may
# lag the newest snapshot, so snapshot-(N+1) is checked (one HEAD, as Java's HintFileUtils.findLatest
# does), and schemas have no hint, so the latest schema is found by listing schema/ (one LIST, as
# Java's SchemaManager.latest does). A HEAD of the snapshot named by the hint is not needed: reading
# it answers whether it exists.
FIND_LATEST = 2
COMMIT = 5
LOCK = 3
LOCK_CHAIN = 3  # the PUT before anything, the GET and the DELETE after everything
# The commit's dependent steps: the new manifest, then the lists naming it (base and delta together),
# the snapshot naming them, the LATEST hint naming the snapshot.
COMMIT_CHAIN = 4
# Reading the latest: the LATEST hint, the snapshot it names, then its lists and the schema together,
# then the manifests the lists name.
READ_LATEST_CHAIN = 4
PAGE = 1000
MANIFEST_TARGET = 8 * 2**20  # manifest.target-file-size's default
MERGE_MIN_COUNT = 30  # manifest.merge-min-count's default
DATA_TARGET = 128 * 2**20  # target-file-size's default for append tables
DROPPED_DAYS = 10  # drop-partition: the 10 oldest days
EXPIRED_DAYS = 20  # expire-partitions: the 20 oldest days
RETAINED_TAGS = 2  # expire-tags: num_retained_max

Facts = dict[str, TableFacts]  # by table: maintenance, append, pk, incoming


def batches(keys: int) -> int:
    return math.ceil(keys / PAGE)


def expire_snapshots_fewest(f: Facts) -> int:
    """List the six directories whose entries decide what stays: snapshot/ (the plan), tag/, branch/,
    changelog/ (long-lived changelogs are roots too), consumer/ (consumers pin snapshots) and schema/
    (the latest schema's options); read every snapshot, tag, the schema and every list once (what the
    expired ones name and the retained one keeps); read the first retained snapshot's delta manifests
    (the expiring deltas need no read, their metas count no DELETE entry, but the job reads that
    delta strictly so a broken latest manifest still fails it: the bad-input contract,
    tests/badinput); delete the 18 lists in one batch but the 9 snapshot files one by one, oldest
    first (a batch deletes in no order and may fail some keys, leaving a hole in the snapshot ids);
    write EARLIEST. No LATEST: the listing names the latest snapshot. Right before the first delete,
    tag/ and branch/ are listed again: a tag or branch made during the run may stand on an expiring
    snapshot (Paimon's Java expiry does not look again; a job that must never delete a file a root
    still needs has to)."""
    t = f["maintenance"]
    expired = t.snapshots - 1
    per_snapshot = -(-t.manifests // t.snapshots)  # bench_tables.commit_manifest_snapshots' shares
    retained_delta = t.manifests - expired * per_snapshot
    return 6 + 2 + t.snapshots + t.tags + 1 + t.lists + retained_delta + batches(2 * expired) + expired + 1


def expire_snapshots_round_trips(f: Facts) -> int:
    """List the directories; read the snapshots, tags and schema; the lists; the retained delta's
    manifests; list tag/ and branch/ again; delete the lists' batch; then each expired snapshot file
    after the one before it; write EARLIEST."""
    return 5 + 1 + (f["maintenance"].snapshots - 1) + 1


def orphans_dry_round_trips(f: Facts) -> int:
    """List the root; list the key ranges, each a chain of its pages (about a tenth of the pages per
    range: jobs/deletion/prefix_listing.range_budget); only then enumerate the roots (a root made
    during the listing must be seen), read them, their lists and the manifests."""
    pages = batches(f["maintenance"].objects)
    ranges = max(1, min(64, pages // 10))
    return 1 + math.ceil(pages / ranges) + 1 + 1 + 1 + 1


def orphans_round_trips(f: Facts) -> int:
    """The dry run's chain, then the delete batches (all in flight at once)."""
    return orphans_dry_round_trips(f) + 1


def compact_manifests_round_trips(f: Facts) -> int:
    """Read the latest chain, write the merged manifests, then the lists, the snapshot, the hint."""
    return READ_LATEST_CHAIN + 1 + COMMIT_CHAIN - 1


def partition_commit_round_trips(f: Facts) -> int:
    """drop-partition and expire-partitions: read the latest chain, then commit, whose merge of the
    small manifests reads them (one step) before it writes the merged manifest."""
    return READ_LATEST_CHAIN + 1 + COMMIT_CHAIN


def expire_tags_round_trips(f: Facts) -> int:
    """List tag/, schema/ and tag-deletion/; read the tags and the schema; read the tags' snapshot;
    delete the expired tags' batch."""
    return 4


def compact_round_trips(f: Facts) -> int:
    """Find the latest (the hint, then HEAD of the next id), read its chain, read the data files (all
    in flight), write the outputs, commit."""
    return 2 + READ_LATEST_CHAIN + 1 + 1 + COMMIT_CHAIN


def write_round_trips(f: Facts) -> int:
    """List the source, read its files, list schema/ (no table yet), write the schema, write the data
    files, find the latest (the hint, then a listing), commit."""
    return 5 + 2 + COMMIT_CHAIN


def read_table_round_trips(f: Facts) -> int:
    """Find the latest (the hint, then HEAD of the next id), read its chain, read the data files."""
    return 2 + READ_LATEST_CHAIN + 1


def orphans_dry_fewest(f: Facts) -> int:
    """One flat listing of the table (which names every snapshot, tag and list too), then every
    snapshot, tag, the schema, every list and every manifest read once."""
    t = f["maintenance"]
    return batches(t.objects) + t.snapshots + t.tags + 1 + t.lists + t.manifests


def orphans_fewest(f: Facts) -> int:
    """The dry run, plus the orphans deleted in batches of 1,000."""
    return orphans_dry_fewest(f) + batches(f["maintenance"].orphans)


def compact_manifests_fewest(f: Facts) -> int:
    """The latest chain, every manifest read, the merged manifests written (8 MiB each), then the
    new lists, snapshot and hint."""
    t = f["maintenance"]
    return READ_LATEST + t.manifests + math.ceil(t.manifest_bytes / MANIFEST_TARGET) + COMMIT - 1


def commit_merge_reads(t: TableFacts) -> int:
    """The manifests a commit reads to merge them: Paimon's commit (Java's too) merges the base
    manifests smaller than manifest.target-file-size once there are manifest.merge-min-count (30) of
    them, reading each; the benchmark table's manifests are all that small."""
    return t.manifests if t.manifests >= MERGE_MIN_COUNT else 0


def drop_partition_fewest(f: Facts) -> int:
    """The latest chain and the manifests whose partition stats overlap the dropped days (the others
    are skipped unread), then one commit, which merges the small manifests."""
    t = f["maintenance"]
    return READ_LATEST + t.manifests_touching(0, DROPPED_DAYS - 1) + commit_merge_reads(t) + COMMIT


def expire_partitions_fewest(f: Facts) -> int:
    """The latest chain and every manifest (which partitions exist is only known from the entries),
    then one commit, which merges the small manifests."""
    t = f["maintenance"]
    return READ_LATEST + t.manifests + commit_merge_reads(t) + COMMIT


def expire_tags_fewest(f: Facts) -> int:
    """List tag/ and schema/ (the latest schema's tag options), read every tag and the schema, read
    the tags' snapshot (it is there with the same lists, so no file but the tag's own goes), list
    tag-deletion/ (deletions an interrupted run left, finished by the next), read each expired tag
    again right before it goes (a tag another writer replaced meanwhile must not be deleted), delete
    the expired tags in one batch."""
    t = f["maintenance"]
    expired = t.tags - RETAINED_TAGS
    return 2 + t.tags + 1 + 1 + 1 + expired + batches(expired)


def compact_append_fewest(f: Facts) -> int:
    """The latest chain found and read, every manifest and data file read once, the output files
    (128 MiB each) written, one commit (its conditional create is what notices a rival's snapshot;
    reading the latest again before it is not counted)."""
    t = f["append"]
    written = math.ceil(t.data_bytes / DATA_TARGET)
    return READ_LATEST + FIND_LATEST + t.manifests + t.data_files + written + COMMIT


def compact_pk_fewest(f: Facts) -> int:
    """As the append table's, with one output file per bucket (each bucket merged into one run)."""
    t = f["pk"]
    return READ_LATEST + FIND_LATEST + t.manifests + t.data_files + t.buckets + COMMIT


def write_fewest(f: Facts) -> int:
    """List the source (1 page), read each source file once, find no table (1 LIST of schema/; a new
    table has no snapshot to find), write its schema, one data file per partition, one commit.

    One data file per partition is what one writer per partition sends (rows grouped by partition
    before writing: the whole source is far below the 128 MiB target file size); every source file
    holds rows of every day, so a job writing each source file's rows on its own writes a file per
    source file and partition, and the ratio shows those extra PUTs. The commit finds the latest
    afresh (LATEST, then a listing when there is no hint), as every optimistic commit does (Java's
    too): a rival may have made the table's first snapshot meanwhile."""
    t = f["incoming"]
    return 1 + t.data_files + 1 + 1 + t.buckets + FIND_LATEST + COMMIT


def read_table_fewest(f: Facts) -> int:
    """The latest chain found and read, every manifest and every data file read once."""
    t = f["append"]
    return READ_LATEST + FIND_LATEST + t.manifests + t.data_files


def expiration_time() -> str:
    """expire-partitions' expiration_time that expires exactly the EXPIRED_DAYS oldest days: between
    now - day EXPIRED_DAYS and now - the day before it (in whole hours)."""
    first_kept = dt.datetime.combine(FIRST_DAY + dt.timedelta(days=EXPIRED_DAYS), dt.time())
    hours = math.ceil(
        (dt.datetime.now(dt.timezone.utc).replace(tzinfo=None) - first_kept).total_seconds() / 3600
    )
    return f"{hours} h"


@dataclass(frozen=True)
class Job:
    name: str  # the row's label
    operation: str  # `python -m jobs <operation>`, or read_table (scripts/s3bench/read_job.py)
    table: str  # which table (Facts key); `write` writes a new table
    fewest: Callable[[Facts], int]
    round_trips: Callable[[Facts], int]
    settings: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    destructive: bool = True  # runs on a fresh copy of its table's bucket
    has_local: bool = False  # accepts `local: never` (the --spark variant)
    locked: bool = True  # holds the table lock (not `write`, not read_table)


def fewest_of(job: Job, facts: Facts) -> int:
    """The job's fewest requests, the table lock's included."""
    return job.fewest(facts) + (LOCK if job.locked else 0)


def round_trips_of(job: Job, facts: Facts) -> int:
    """The job's chain of dependent requests, the table lock's included."""
    return job.round_trips(facts) + (LOCK_CHAIN if job.locked else 0)


def all_jobs() -> list[Job]:
    maintenance = "maintenance"
    future = "2100-01-01 00:00:00"
    return [
        Job(
            "expire-snapshots",
            "expire-snapshots",
            maintenance,
            expire_snapshots_fewest,
            expire_snapshots_round_trips,
            {"retain_min": 1, "retain_max": 1, "older_than": future, "max_deletes": 1000},
            has_local=True,
        ),
        Job(
            "remove-orphan-files dry",
            "remove-orphan-files",
            maintenance,
            orphans_dry_fewest,
            orphans_dry_round_trips,
            {"older_than": "0 ms", "force": True},
            dry_run=True,
            destructive=False,
            has_local=True,
        ),
        Job(
            "remove-orphan-files",
            "remove-orphan-files",
            maintenance,
            orphans_fewest,
            orphans_round_trips,
            {"older_than": "0 ms", "force": True},
            has_local=True,
        ),
        Job(
            "compact-manifests",
            "compact-manifests",
            maintenance,
            compact_manifests_fewest,
            compact_manifests_round_trips,
            {"mode": "full"},
        ),
        Job(
            "compact-manifests partition",
            "compact-manifests",
            maintenance,
            compact_manifests_fewest,
            compact_manifests_round_trips,
            {"mode": "full", "order": "partition"},
            has_local=True,
        ),
        Job(
            "drop-partition",
            "drop-partition",
            maintenance,
            drop_partition_fewest,
            partition_commit_round_trips,
            {"where": f"dt < '{day_value(DROPPED_DAYS)}'"},
            has_local=True,
        ),
        Job(
            "expire-partitions",
            "expire-partitions",
            maintenance,
            expire_partitions_fewest,
            partition_commit_round_trips,
            {
                "expiration_time": expiration_time(),
                "strategy": "values-time",
                "timestamp_formatter": "yyyy-MM-dd",
                "max_expires": 1000,
            },
            has_local=True,
        ),
        Job(
            "expire-tags",
            "expire-tags",
            maintenance,
            expire_tags_fewest,
            expire_tags_round_trips,
            {"num_retained_max": RETAINED_TAGS},
        ),
        Job(
            "compact append",
            "compact",
            "append",
            compact_append_fewest,
            compact_round_trips,
            {"strategy": "full"},
        ),
        Job("compact pk", "compact", "pk", compact_pk_fewest, compact_round_trips, {"strategy": "full"}),
        Job(
            "write",
            "write",
            "write",
            write_fewest,
            write_round_trips,
            {
                "mode": "append",
                "source": {"format": "parquet", "path": "s3://src-incoming/incoming/"},
                "create": {"partition_keys": ["dt"], "options": {"bucket": "-1", "file.format": "parquet"}},
            },
            locked=False,
        ),
        Job(
            "read_table",
            "read_table",
            "append",
            read_table_fewest,
            read_table_round_trips,
            {},
            destructive=False,
            locked=False,
        ),
    ]


def with_spark(job: Job) -> Job:
    """The same job forced onto Spark (`local: never`)."""
    return Job(
        f"{job.name} (Spark)",
        job.operation,
        job.table,
        job.fewest,
        job.round_trips,
        {**job.settings, "local": "never"},
        job.dry_run,
        job.destructive,
        job.has_local,
        job.locked,
    )
