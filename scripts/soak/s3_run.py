"""The S3 soak (issue #28): two writers of ours and our maintenance on the same tables, on moto's S3
behind the throttling proxy (tests/s3/proxy.py: 503 SlowDown on a share of the requests).

Java's S3 file system is not in the test bundle, so the writers are ours (`our_writer.OurWriter`:
the write job, each writer with keys of its own); everything else is the local soak's: the tables
and ledgers (`ledger`), our `maintain` with every block, drop-partition of the days every writer
left and a branch from our first tag (`our_jobs`), the checks (`checks`), here with our own reader
(paimon_format's split planning and merge-on-read) in place of Java's.

Order of one run: create the tables (paimon_format's schema manager, before any writer starts), start
the snapshot watcher and the writers, then until the time is up run maintain, drop-partition and
create-branch rounds, with a checkpoint (writers held, every table checked) every `checkpoint_s`. At
the end the writers stop, one more maintenance round runs on the tables at rest, and the final
checkpoint also reads every retained snapshot and judges the orphans left.
"""

from __future__ import annotations

import functools
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from scripts.soak import checks
from scripts.soak.checks import Findings, SnapshotWatcher, our_read
from scripts.soak.ledger import SPECS, Ledger, table_path
from scripts.soak.our_jobs import OurJobs
from scripts.soak.our_writer import OurWriter
from scripts.soak.run import first_lines

# The proxy's request bill (ThrottlingProxy.summary, or the store process's /__proxy__/ledger).
Bill = Callable[[], dict[str, Any]]


@dataclass
class S3SoakOptions:
    minutes: float
    warehouse: str  # s3://bucket/prefix
    storage_options: dict[str, Any]  # the proxy's endpoint (credentials: the AWS environment)
    seed: int = 7
    tables: tuple[str, ...] = tuple(SPECS)
    writers: int = 2
    checkpoint_s: float = 60.0
    tag_every: int = 5  # a writer's tag every this many of its commits to a table
    orphan_older_than_s: int = 60
    watch_interval_s: float = 1.0  # the snapshot watcher's polls (each a LIST and a few GETs per table)
    batches_per_day: int = 2  # a writer's batches per day: our writers commit far less often than Java's
    # rounds go on past `minutes` until every writer has this many commits on every table: a short run
    # (CI: minutes=0) then ends as soon as what it checks has happened, however fast the machine is
    min_commits: int = 0


@dataclass
class S3SoakResult:
    options: S3SoakOptions
    paths: dict[str, str]
    ledgers: dict[str, list[Ledger]]  # by table, one per writer
    writers: list[OurWriter]
    ours: OurJobs
    watcher: SnapshotWatcher
    findings: Findings = field(default_factory=Findings)
    checkpoints: int = 0
    elapsed_s: float = 0.0
    final_round_ms: int = 0
    bill: dict[str, Any] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)  # printed by `report` (table_evidence)

    @property
    def skipped_ids(self) -> dict[str, list[int]]:
        return {name: ids for name in self.paths if (ids := self.watcher.skipped(name))}

    @property
    def writer_failures(self) -> list[str]:
        return [failure for writer in self.writers for failure in writer.failures]

    @property
    def lost(self) -> bool:
        found = self.findings
        lost = found.rows_lost or found.rows_doubled or found.files_missing or found.old_orphans
        return bool(lost or self.watcher.problems or self.skipped_ids)

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.findings.problems or self.writer_failures or self.ours.stats.failures)


def create_tables(warehouse: str, storage_options: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """The soak's tables at `<warehouse>/soak.db/<name>`, created with paimon_format's schema manager."""
    paths = {}
    for name in names:
        spec = SPECS[name]
        path = table_path(warehouse, name)
        schema = new_table_schema(
            [(column, parse_type(sql)) for column, sql in spec.fields],
            partition_keys=["dt"],
            primary_keys=list(spec.primary_keys),
            options=spec.options,
        )
        Table(FileIO.for_path(path, storage_options), path).schema_manager.create_table(schema)
        paths[name] = path
    return paths


def rng(seed: int, table: str, writer: int) -> random.Random:
    return random.Random(f"{seed}-{table}-{writer}")


def s3_soak(options: S3SoakOptions, workdir: str, bill: Bill) -> S3SoakResult:
    """Run the S3 soak; the writers and our jobs run in this process, on its one SparkSession."""
    storage = options.storage_options
    paths = create_tables(options.warehouse, storage, options.tables)
    per_day = options.batches_per_day
    ledgers = {
        name: [
            Ledger(SPECS[name], rng(options.seed, name, w), writer=w, deletes=False, batches_per_day=per_day)
            for w in range(options.writers)
        ]
        for name in options.tables
    }
    writers = [
        OurWriter(
            w,
            {name: ledgers[name][w] for name in options.tables},
            options.warehouse,
            storage,
            workdir,
            options.tag_every,
        )
        for w in range(options.writers)
    ]
    ours = OurJobs(options.warehouse, workdir, ledgers, paths, options.orphan_older_than_s, storage)
    watcher = SnapshotWatcher(paths, options.watch_interval_s, storage, reread=3)
    result = S3SoakResult(options, paths, ledgers, writers, ours, watcher)
    started = time.monotonic()
    watcher.start()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.started.wait()
    deadline = time.monotonic() + options.minutes * 60  # from the writers' first commits on
    try:
        last_checkpoint = time.monotonic()
        while not result.writer_failures:  # at least one round, however slow the first commits were
            ours.maintain()
            ours.drop_old_days()
            ours.branch_from_first_tag()
            if time.monotonic() - last_checkpoint >= options.checkpoint_s:
                checkpoint(result, final=False)
                last_checkpoint = time.monotonic()
            if time.monotonic() >= deadline and committed(writers, options.min_commits):
                break
    finally:
        for writer in writers:
            writer.ask_to_stop()  # all at once: none starts another batch while the first is waited for
        for writer in writers:
            writer.stop()
    result.final_round_ms = int(time.time() * 1000)
    ours.maintain()  # on the tables at rest: what is left for the final orphan check is young
    checkpoint(result, final=True)
    watcher.stop()
    result.elapsed_s = time.monotonic() - started
    result.bill = bill()
    return result


def committed(writers: list[OurWriter], at_least: int) -> bool:
    """Whether every writer has at least `at_least` commits on every one of its tables."""
    return all(writer.commits[name] >= at_least for writer in writers for name in writer.tables)


def checkpoint(result: S3SoakResult, final: bool) -> None:
    """Hold every writer and check every table with our reader (checks.check_table); at the end
    every retained snapshot too, and the orphans against the final remove-orphan-files run."""
    for writer in result.writers:
        writer.ask_to_hold()  # all at once: none starts another batch while the first is waited for
    for writer in result.writers:
        writer.hold()
    try:
        storage = result.options.storage_options
        read = functools.partial(our_read, storage_options=storage)
        result.watcher.poll(reread_all=True)
        for name, path in result.paths.items():
            cutoff = None
            if final:
                cleaned_ms = result.ours.stats.orphans_cleaned_ms.get(name)
                if cleaned_ms is None or cleaned_ms < result.final_round_ms:
                    result.findings.problems.append(f"{name}: remove-orphan-files did not finish at the end")
                else:
                    cutoff = cleaned_ms - result.options.orphan_older_than_s * 1000
            seen = result.watcher.seen[name] if final else ()
            ledgers = result.ledgers[name]
            found = checks.check_table(read, ledgers, name, path, seen, cutoff, storage)
            if found.problems:
                result.evidence.extend(table_evidence(result, name, read))
            result.findings.add(found)
        result.checkpoints += 1
    finally:
        for writer in result.writers:
            writer.release()


def table_evidence(result: S3SoakResult, name: str, read: checks.Reader) -> list[str]:
    """What a failed check leaves for judging it: every snapshot the watcher saw (commit kind and
    user), each retained one's marker of each writer, and each writer's batches with their runs."""
    path, storage = result.paths[name], result.options.storage_options
    ledgers = result.ledgers[name]
    lines = [f"evidence for {name} at checkpoint {result.checkpoints}:"]
    result.watcher.poll(reread_all=True)
    file_io = FileIO.for_path(path, storage)
    for snapshot_id, identity in sorted(result.watcher.seen[name].items()):
        user, identifier, _, kind = identity
        markers = "expired"
        if file_io.file_exists(f"{path}/snapshot/snapshot-{snapshot_id}"):
            rows = read(path, snapshot_id=snapshot_id)
            markers = " ".join(f"w{ledger.writer}:{ledger.marker_of(rows)}" for ledger in ledgers)
        lines.append(f"  snapshot {snapshot_id} {kind} user {str(user)[:8]} id {identifier}: {markers}")
    for tag in checks.tag_names(path, storage):
        lines.append(f"  tag {tag} -> {checks.snapshot_id_of_tag(path, tag, storage)}")
    for ledger in ledgers:
        for batch in ledger.batches.values():
            lines.append(
                f"  w{ledger.writer} batch {batch.number}: committed {batch.committed} first "
                f"{batch.first_landed} latest_after {batch.latest_after} runs {batch.runs}"
            )
    return lines


def report(result: S3SoakResult, out: TextIO) -> None:
    """The printout: the store's bill, what ran, what was checked, and every loss (0 each)."""
    options, ours, found, bill = result.options, result.ours.stats, result.findings, result.bill
    print(f"S3 soak: {result.elapsed_s / 60:.1f} min, tables under {options.warehouse}", file=out)
    print(
        f"store: {bill.get('requests', 0)} requests, {bill.get('throttled', 0)} answered 503 SlowDown "
        f"(throttle ratio {bill.get('throttle_ratio', 0)}), by kind {bill.get('by_kind', {})}",
        file=out,
    )
    commits = Counter()
    for writer in result.writers:
        commits.update(writer.commits)
    per_writer = "; ".join(
        f"writer {w.index}: " + ", ".join(f"{name} {n}" for name, n in w.commits.items())
        for w in result.writers
    )
    print(f"our writers' commits: {sum(commits.values())} ({per_writer})", file=out)
    stats = [w.stats for w in result.writers]
    print(
        f"writers also: {sum(s.tags for s in stats)} tags ({sum(s.tag_conflicts for s in stats)} exit 3); "
        f"exit-3 conflicts: {sum(s.conflicts_retried for s in stats)} writes retried, "
        f"{sum(s.committed_then_conflict for s in stats)} committed then conflict",
        file=out,
    )
    runs = ", ".join(f"{op} {n}" for op, n in sorted(ours.runs.items()))
    conflicts = ", ".join(f"{op} {n}" for op, n in sorted(ours.conflicts.items())) or "none"
    print(f"our runs ({result.ours.rounds} maintain rounds): {runs}", file=out)
    print(f"our exit-3 conflicts: {conflicts}", file=out)
    throttled = Counter({"write/create-tag": sum(s.throttled for s in stats), **ours.throttled})
    print(
        "throttled requests in the run records (runs overlap in one process, so a 503 may be "
        f"counted by two): {', '.join(f'{op} {n}' for op, n in sorted(throttled.items()))}",
        file=out,
    )
    print(
        f"checked: {result.checkpoints} checkpoints, {found.reads_checked} reads, "
        f"{found.rows_checked} rows, {found.files_checked} referenced files "
        f"({found.tags_gone} tags expired while listed, {result.watcher.poll_errors} watcher polls failed)",
        file=out,
    )
    skipped = sum(len(ids) for ids in result.skipped_ids.values())
    print(
        f"lost: {found.rows_lost} rows lost, {found.rows_doubled} doubled, {found.files_missing} "
        f"referenced files missing, {found.old_orphans} old orphans left, {skipped} snapshot ids skipped, "
        f"{len(result.watcher.problems)} overwritten, {len(result.writer_failures)} writer failures, "
        f"{len(ours.failures)} failures of ours",
        file=out,
    )
    failures = [*found.problems, *result.watcher.problems, *result.writer_failures, *ours.failures]
    for line, count in Counter(first_lines(line) for line in failures).most_common(30):
        print(f"  FAILURE {line}" + (f" (x{count})" if count > 1 else ""), file=out)
    for name, ids in result.skipped_ids.items():
        print(f"  FAILURE {name}: snapshot ids skipped {ids[:10]}", file=out)
    for line in result.evidence:
        print(line, file=out)
    if not result.failed:
        print("RESULT: OK, nothing lost", file=out)
    elif result.lost:
        print("RESULT: FAILED, something was lost, doubled, missing or overwritten", file=out)
    else:
        print("RESULT: FAILED: nothing lost, but a writer or a job failed (see above)", file=out)
