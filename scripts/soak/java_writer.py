"""Paimon's Java writer in the soak: one thread driving a JVM of Paimon's own Java (tests/java/oracle.py).

It commits batches to each table in turn through Paimon's own write and commit path (its writer
compacts as it goes; the tables' snapshot.num-retained.* make each commit expire snapshots as Paimon
does), tags every `tag_every` commits of a table (and makes branch `b1` from its first tag, which
then stands still while the tag expires) and runs Paimon's compaction every `compact_every`.
A commit that fails is judged by a read: if the batch's marker is there the batch was committed (an
append that Paimon committed before its compaction lost a conflict), otherwise a conflict is retried
(at most `RETRIES` times) and anything else is a writer failure.

The loop, `hold()` and `release()` are `writer_loop.WriterLoop`'s.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from scripts.soak.checks import latest_id
from scripts.soak.ledger import Ledger
from scripts.soak.writer_loop import WriterLoop
from tests.java.oracle import JavaError, JavaPaimon

RETRIES = 3
BRANCH = "b1"


@dataclass
class JavaStats:
    commits: Counter = field(default_factory=Counter)  # by table
    conflicts_retried: int = 0  # a commit Paimon gave up on a conflict, retried
    committed_then_conflict: int = 0  # the batch was committed, the compaction after it conflicted
    tags: int = 0
    compactions: int = 0
    compaction_conflicts: int = 0
    failures: list[str] = field(default_factory=list)  # anything else: the soak fails on these


def is_conflict(error: Exception) -> bool:
    """Paimon's own commit conflicts ("File deletion conflicts detected! Give up committing.", "LSM
    conflicts detected", ...): a rival commit changed the files this commit replaces."""
    return "conflict" in str(error).lower()


class JavaWriter(WriterLoop):
    def __init__(
        self,
        java: JavaPaimon,
        ledgers: dict[str, Ledger],
        paths: dict[str, str],
        tag_every: int,
        compact_every: int,
    ) -> None:
        super().__init__("java-writer", list(ledgers))
        self.java, self.ledgers, self.paths = java, ledgers, paths
        self.tag_every, self.compact_every = tag_every, compact_every
        self.stats = JavaStats(self.commits, failures=self.failures)
        self.branched: set[str] = set()

    def step(self, name: str) -> None:
        """One batch to table `name`, then Java's tag and compaction when their turn has come."""
        ledger, path = self.ledgers[name], self.paths[name]
        if not self.commit_batch(ledger, name, path):
            return
        count = self.stats.commits[name]
        latest = ledger.batches[ledger.last_committed].latest_after
        if self.tag_every and count % self.tag_every == 0 and latest is not None:
            tag = f"java-{ledger.last_committed}"
            try:
                self.java.create_tag(path, tag, latest)
                self.stats.tags += 1
                if name not in self.branched:  # a branch from the first tag: its files must stay
                    self.java.create_branch(path, BRANCH, tag=tag)
                    self.branched.add(name)
            except JavaError as error:
                self.stats.failures.append(f"{name}: Java's create_tag/branch on {latest}: {error}")
        if self.compact_every and count % self.compact_every == 0:
            try:
                self.java.compact(path, full=False)
                self.stats.compactions += 1
            except JavaError as error:
                if not is_conflict(error):
                    self.stats.failures.append(f"{name}: Java's compaction: {error}")
                else:
                    self.stats.compaction_conflicts += 1

    def commit_batch(self, ledger: Ledger, name: str, path: str) -> bool:
        batch = ledger.new_batch()
        for _ in range(RETRIES):
            try:
                latest = self.java.write(path, batch.rows)
            except JavaError as error:
                if self._marker_at_latest(ledger, path) >= batch.number:
                    ledger.settle(batch, True, latest_id(path))
                    self.stats.commits[name] += 1
                    self.stats.committed_then_conflict += 1
                    return True
                if not is_conflict(error):
                    self.stats.failures.append(f"{name}: batch {batch.number}: {error}")
                    ledger.settle(batch, False, None)
                    return False
                self.stats.conflicts_retried += 1
                continue
            ledger.settle(batch, True, latest)
            self.stats.commits[name] += 1
            return True
        self.stats.failures.append(f"{name}: batch {batch.number} conflicted {RETRIES} times")
        ledger.settle(batch, False, None)
        return False

    def _marker_at_latest(self, ledger: Ledger, path: str) -> int:
        return ledger.marker_of(self.java.read(path))
