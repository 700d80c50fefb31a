"""A writer of ours in the S3 soak: one thread committing batches through the write job.

Each batch goes to a Parquet file in the work directory and into the table through `python -m jobs
write` in this process (`our_jobs.run_cli`: the YAML, the run record, the process's one
SparkSession), the way a user's scheduled writer runs it; several writers of ours run at once on the
same tables, each with keys of its own (`Ledger.writer`). The ledger records from which snapshot on
each batch is whole: the latest, listed once the write returned (`Batch.latest_after`), not the run
record's `snapshot_ids.committed`. On a table whose reads skip level 0 the batch lands as an APPEND
(invisible) and shows once its buckets are compacted: by the write's own compaction, or by a rival's
(the other writer's, our maintain's) that got there first, after which the write's compaction finds
nothing left to do and the last snapshot it committed is the APPEND, where the batch is not visible.
The record's first id (the APPEND) is kept too: in between, a snapshot may show the batch in some
buckets only (`Ledger.torn_batch`).

Exit 3 is a lost race, retried (at most `RETRIES` times): on a primary-key table by writing the same
batch again, which is idempotent (the same keys get the same values, later sequence numbers), also
when the first attempt's APPEND landed and only its level-0 compaction gave up; on an append table
only when nothing landed (a landed APPEND is the batch, once). Any other exit code is a failure.
Every `tag_every` commits of a table the writer also tags the latest snapshot (create-tag).

The write job takes no row kinds (a `__row_kind` column is refused as not in the table), so these
writers send upserts and partial updates, never deletes: `Ledger.deletes` is off for them.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from scripts.soak.checks import latest_id
from scripts.soak.ledger import Batch, Ledger, TableSpec, table_path
from scripts.soak.our_jobs import EXIT_CONFLICT, run_cli, throttled_in
from scripts.soak.writer_loop import WriterLoop

RETRIES = 8
_ARROW_TYPES = {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string()}


@dataclass
class OurWriterStats:
    commits: Counter = field(default_factory=Counter)  # by table
    conflicts_retried: int = 0  # exit 3: the batch written again
    committed_then_conflict: int = 0  # exit 3 after the APPEND landed (its level-0 compaction lost)
    tags: int = 0
    tag_conflicts: int = 0
    throttled: int = 0  # 503 answers during its runs, as the run records count them
    failures: list[str] = field(default_factory=list)


def arrow_schema(spec: TableSpec) -> pa.Schema:
    """The table's columns as the Parquet source carries them (NOT NULL kept)."""
    fields = []
    for name, sql in spec.fields:
        root = sql.split()[0]
        fields.append(pa.field(name, _ARROW_TYPES[root], nullable="NOT NULL" not in sql))
    return pa.schema(fields)


class OurWriter(WriterLoop):
    def __init__(
        self,
        index: int,
        ledgers: dict[str, Ledger],
        warehouse: str,
        storage_options: dict[str, Any],
        workdir: str,
        tag_every: int,
    ) -> None:
        super().__init__(f"writer-{index}", list(ledgers))
        self.index, self.ledgers = index, ledgers
        self.warehouse, self.storage_options, self.workdir = warehouse, storage_options, workdir
        self.tag_every = tag_every
        self.stats = OurWriterStats(self.commits, failures=self.failures)

    def _config(self, name: str, **keys: Any) -> dict[str, Any]:
        return {
            "warehouse": self.warehouse,
            "storage_options": self.storage_options,
            "table": f"soak.{name}",
            **keys,
        }

    def step(self, name: str) -> None:
        """One batch to table `name`, then a tag when its turn has come."""
        ledger = self.ledgers[name]
        batch = ledger.new_batch()
        if not self.commit_batch(ledger, name, batch):
            return
        if self.tag_every and self.commits[name] % self.tag_every == 0:
            tag = f"w{self.index}-{batch.number}"
            code, record = run_cli(
                self.workdir, f"tag-w{self.index}", "create-tag", self._config(name, tag=tag)
            )
            self.stats.throttled += throttled_in(record)
            if code == 0:
                self.stats.tags += 1
            elif code == EXIT_CONFLICT:  # the latest snapshot expired under it
                self.stats.tag_conflicts += 1
            else:
                self.failures.append(f"{name}: create-tag {tag} exit {code}: {record.get('error')}")

    def commit_batch(self, ledger: Ledger, name: str, batch: Batch) -> bool:
        source = os.path.join(self.workdir, f"w{self.index}-{name}-{batch.number}.parquet")
        columns = ledger.spec.names
        rows = [{column: row.get(column) for column in columns} for row in batch.rows]
        pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(ledger.spec)), source)
        config = self._config(name, source={"format": "parquet", "path": source})
        landed: int | None = None  # the last snapshot the batch's runs committed
        first: int | None = None  # and the first (an APPEND before its level-0 compaction)
        try:
            for _ in range(RETRIES):
                code, record = run_cli(self.workdir, f"write-w{self.index}", "write", config)
                self.stats.throttled += throttled_in(record)
                committed = record.get("snapshot_ids", {}).get("committed")
                landed = committed if committed is not None else landed
                ids = record.get("snapshot_ids", {}).get("committed_ids") or []
                first = min(ids) if ids and first is None else first
                compaction = record.get("details", {}).get("compaction")
                batch.runs.append(
                    f"exit {code} ids {ids} compaction {compaction} {record.get('error') or ''}"
                )
                if code == 0:
                    break
                if code != EXIT_CONFLICT:
                    self.failures.append(
                        f"{name}: batch {batch.number}: write exit {code}: {record.get('error')}"
                    )
                    break
                if committed is not None and not ledger.spec.primary_keys:
                    self.stats.committed_then_conflict += 1
                    code = 0
                    break
                self.stats.conflicts_retried += 1
            else:
                self.failures.append(f"{name}: batch {batch.number} lost the race {RETRIES} times")
        finally:
            os.remove(source)
        if landed is not None:  # the batch is whole from the latest snapshot on (see the module docstring)
            path = table_path(self.warehouse, name)
            landed = max(landed, latest_id(path, None, self.storage_options) or landed)
        ledger.settle(batch, landed is not None, landed, first)
        if landed is not None:
            self.commits[name] += 1
        return code == 0
