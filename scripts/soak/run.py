"""The soak run: Java's writer thread, our jobs in the main thread, checkpoints, the printout.

Order of one run: create the tables with Java, start the snapshot watcher and Java's writer, then
until the time is up run our `maintain` and drop-partition rounds, with a checkpoint (writer held,
every table checked) every `checkpoint_s`. At the end the writer stops, one more maintenance round
runs on the tables at rest, and the final checkpoint also reads every retained snapshot with Java.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from scripts.soak import checks
from scripts.soak.checks import Findings, SnapshotWatcher
from scripts.soak.java_writer import JavaWriter
from scripts.soak.ledger import SPECS, Ledger
from scripts.soak.our_jobs import OurJobs
from tests.java.oracle import JavaPaimon


@dataclass
class SoakOptions:
    minutes: float
    warehouse: str
    seed: int = 7
    tables: tuple[str, ...] = tuple(SPECS)
    checkpoint_s: float = 60.0
    tag_every: int = 5  # a Java tag every this many commits of a table
    compact_every: int = 7  # Paimon's compaction every this many commits of a table
    orphan_older_than_s: int = 60


@dataclass
class SoakResult:
    options: SoakOptions
    paths: dict[str, str]
    ledgers: dict[str, Ledger]
    writer: JavaWriter
    ours: OurJobs
    watcher: SnapshotWatcher
    findings: Findings = field(default_factory=Findings)
    checkpoints: int = 0
    elapsed_s: float = 0.0
    final_round_ms: int = 0  # when the final maintenance round (writer stopped) started

    @property
    def skipped_ids(self) -> dict[str, list[int]]:
        return {name: ids for name in self.paths if (ids := self.watcher.skipped(name))}

    @property
    def lost(self) -> bool:
        found = self.findings
        return bool(
            found.rows_lost
            or found.rows_doubled
            or found.files_missing
            or found.old_orphans
            or self.watcher.problems
            or self.skipped_ids
        )

    @property
    def failed(self) -> bool:
        found = self.findings
        return bool(
            found.problems
            or found.rows_lost
            or found.rows_doubled
            or found.files_missing
            or found.old_orphans
            or self.watcher.problems
            or self.skipped_ids
            or self.writer.stats.failures
            or self.ours.stats.failures
        )


def create_tables(java: JavaPaimon, warehouse: str, names: tuple[str, ...]) -> dict[str, str]:
    paths = {}
    for name in names:
        spec = SPECS[name]
        path = os.path.join(warehouse, "soak.db", name)
        java.create_table(path, spec.fields, ("dt",), spec.primary_keys, spec.options)
        paths[name] = path
    return paths


def soak(options: SoakOptions, java: JavaPaimon, workdir: str) -> SoakResult:
    """Run the soak with `java` as the writer's JVM; our jobs run in this process."""
    paths = create_tables(java, options.warehouse, options.tables)
    ledgers = {name: Ledger(SPECS[name], random.Random(f"{options.seed}-{name}")) for name in options.tables}
    writer = JavaWriter(java, ledgers, paths, options.tag_every, options.compact_every)
    every = {name: [ledger] for name, ledger in ledgers.items()}
    ours = OurJobs(options.warehouse, workdir, every, paths, options.orphan_older_than_s)
    watcher = SnapshotWatcher(paths)
    result = SoakResult(options, paths, ledgers, writer, ours, watcher)
    started = time.monotonic()
    deadline = started + options.minutes * 60
    watcher.start()
    writer.start()
    writer.started.wait()  # our jobs start on tables that have a snapshot, as in production
    try:
        last_checkpoint = time.monotonic()
        while time.monotonic() < deadline and not writer.stats.failures:
            ours.maintain()
            ours.drop_old_days()
            if time.monotonic() - last_checkpoint >= options.checkpoint_s:
                checkpoint(result, java, final=False)
                last_checkpoint = time.monotonic()
    finally:
        writer.stop()
    result.final_round_ms = int(time.time() * 1000)
    ours.maintain()  # on the tables at rest: what is left for the final orphan check is young
    checkpoint(result, java, final=True)
    watcher.stop()
    result.elapsed_s = time.monotonic() - started
    return result


def checkpoint(result: SoakResult, java: JavaPaimon, final: bool) -> None:
    """Hold the writer and check every table: the latest snapshot, every tag and branch read by Java
    against the ledger, (at the end) every retained snapshot too, referenced files, orphans, snapshot ids."""
    result.writer.hold()
    try:
        result.watcher.poll(reread_all=True)
        for name, path in result.paths.items():
            result.findings.add(check_table(result, java, name, path, final))
        result.checkpoints += 1
    finally:
        result.writer.release()


def check_table(result: SoakResult, java: JavaPaimon, name: str, path: str, final: bool) -> Findings:
    """Java reads the table (checks.check_table); at the end every retained snapshot too, and the
    orphans are judged against the final remove-orphan-files run."""
    cutoff = None
    found = Findings()
    if final:  # only here is remove-orphan-files the last thing that ran (mid-run, a tag deleted
        # after its run leaves older files unreferenced until the next run: not orphans it missed)
        cleaned_ms = result.ours.stats.orphans_cleaned_ms.get(name)
        if cleaned_ms is None or cleaned_ms < result.final_round_ms:
            found.problems.append(f"{name}: remove-orphan-files did not finish in the final maintenance")
        else:
            cutoff = cleaned_ms - result.options.orphan_older_than_s * 1000
    seen = result.watcher.seen[name] if final else ()
    found.add(checks.check_table(java.read, [result.ledgers[name]], name, path, seen, cutoff))
    return found


def report(result: SoakResult, out: TextIO) -> None:
    """The printout: what ran, what was checked, and every loss (0 each, or the failures)."""
    java, ours, found = result.writer.stats, result.ours.stats, result.findings
    by_table = ", ".join(f"{name} {count}" for name, count in java.commits.items())
    print(f"soak: {result.elapsed_s / 60:.1f} min, tables under {result.options.warehouse}", file=out)
    print(f"Java commits: {sum(java.commits.values())} ({by_table})", file=out)
    print(
        f"Java also: {java.tags} tags, {java.compactions} compactions; conflicts: "
        f"{java.conflicts_retried} commits retried, {java.committed_then_conflict} committed then "
        f"compaction conflict, {java.compaction_conflicts} compactions refused",
        file=out,
    )
    runs = ", ".join(f"{op} {n}" for op, n in sorted(ours.runs.items()))
    conflicts = ", ".join(f"{op} {n}" for op, n in sorted(ours.conflicts.items())) or "none"
    print(f"our runs ({result.ours.rounds} maintain rounds): {runs}", file=out)
    print(f"our exit-3 conflicts: {conflicts}", file=out)
    print(
        f"checked: {result.checkpoints} checkpoints, {found.reads_checked} reads, "
        f"{found.rows_checked} rows, {found.files_checked} referenced files "
        f"({found.tags_gone} tags expired while listed)",
        file=out,
    )
    skipped = sum(len(ids) for ids in result.skipped_ids.values())
    print(
        f"lost: {found.rows_lost} rows lost, {found.rows_doubled} doubled, {found.files_missing} "
        f"referenced files missing, {found.old_orphans} old orphans left, {skipped} snapshot ids skipped, "
        f"{len(result.watcher.problems)} overwritten, {len(java.failures)} Java writer failures, "
        f"{len(ours.failures)} failures of ours",
        file=out,
    )
    grouped = Counter(
        first_lines(line)
        for line in [*found.problems, *result.watcher.problems, *java.failures, *ours.failures]
    )
    for line, count in grouped.most_common(30):
        print(f"  FAILURE {line}" + (f" (x{count})" if count > 1 else ""), file=out)
    for name, ids in result.skipped_ids.items():
        print(f"  FAILURE {name}: snapshot ids skipped {ids[:10]}", file=out)
    if not result.failed:
        print("RESULT: OK, nothing lost", file=out)
    elif result.lost:
        print("RESULT: FAILED, something was lost, doubled, missing or overwritten", file=out)
    else:
        print("RESULT: FAILED: nothing lost, but a writer or a job failed (see above)", file=out)


def summary(result: SoakResult) -> dict[str, Any]:
    """The figures report() prints, as JSON-able data (scripts/soak.py --json): what a test reading the
    result of a soak in another process asserts on."""
    java, ours, found = result.writer.stats, result.ours.stats, result.findings
    return {
        "minutes": result.elapsed_s / 60,
        "paths": result.paths,
        "java": {
            "commits": dict(java.commits),
            "tags": java.tags,
            "compactions": java.compactions,
            "conflicts_retried": java.conflicts_retried,
            "failures": java.failures,
        },
        "ours": {
            "rounds": result.ours.rounds,
            "runs": dict(ours.runs),
            "conflicts": dict(ours.conflicts),
            "failures": ours.failures,
        },
        "findings": {**asdict(found)},
        "checkpoints": result.checkpoints,
        "skipped_ids": result.skipped_ids,
        "overwritten": result.watcher.problems,
        "lost": result.lost,
        "failed": result.failed,
    }


def first_lines(text: str) -> str:
    """A failure in one line: its first line and, for a traceback, its last (the exception)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1].strip()}"


def start_java(workdir: str) -> JavaPaimon:
    """The writer's own JVM (Paimon's Java from the paimon-python-ali wheel)."""
    return JavaPaimon(Path(workdir) / "java-writer.log")
