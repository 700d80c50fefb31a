"""drop-partition: remove partitions from a table with one OVERWRITE snapshot (seed 004).

Partitions are named by specs (`{dt: "2024-05-14", hr: "01"}`, several at once, a spec may name only
some keys) or by a predicate on the partition columns (`dt < '2024-01-01' AND hr IN ('01', '02')`).
Executors read every manifest of the latest snapshot once: they test each partition against the
selection, summarise the matching ones and write a DELETE entry for each of their live files in the
same job (`jobs/partitions/scan.py`); the driver checks the summaries against the specs and commits
the DELETE manifests (`jobs/partitions/commit.py`). The data files stay on storage until
expire-snapshots expires the snapshots that still read them; older snapshots keep the partitions.

A spec that matches no partition is reported (`details.missing_partitions`), and is an error (exit 2)
with `strict: true`, as is a predicate that matches nothing. A malformed spec or predicate exits 2
before Spark starts when it can be checked from the file alone, else before anything is written.

Spark-submit entry: `spark-submit jobs/drop_partition.py --config conf/drop-partition.yaml`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from jobs.partitions.commit import drop_partitions, open_partitioned_table, record_drop
from jobs.partitions.records import partition_label, record_partitions
from jobs.partitions.scan import remove_manifests, scan_partitions
from jobs.partitions.selection import selected, selection_pruner, selection_tests
from jobs.runtime.config import TableJobConfig, check_partition_specs, check_predicate_syntax
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_exec import LocalRunOptions, run_where_it_fits
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from paimon_format.model.partition_spec import PartitionStats
from paimon_format.scan.partition_predicate import PartitionTest, selects
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.runtime.local_frame import LocalSession

Scalar = str | int | float | bool | None


class DropPartitionConfig(TableJobConfig, LocalRunOptions):
    partitions: list[dict[str, Scalar]] | None = Field(
        default=None, description="partition specs: {key: value}; a spec may name only some keys"
    )
    where: str | None = Field(default=None, description="a predicate on partition columns, instead of specs")
    strict: bool = Field(default=False, description="a spec or predicate that matches nothing is an error")
    max_replans: int = Field(default=3, ge=0, description="plans again when a rival changed the partitions")

    @field_validator("where")
    @classmethod
    def _predicate_syntax(cls, value: str | None) -> str | None:
        return check_predicate_syntax(value)

    @field_validator("partitions")
    @classmethod
    def _specs(cls, value: list[dict[str, Scalar]] | None) -> list[dict[str, Scalar]] | None:
        return check_partition_specs(value, "it would select every partition")

    @model_validator(mode="after")
    def _one_selector(self) -> DropPartitionConfig:
        if (self.partitions is None) == (self.where is None):
            raise ValueError("give either partitions (a list of specs) or where (a predicate), not both")
        return self


CONFIG_MODEL = DropPartitionConfig


@dataclass(frozen=True)
class DropPartitionRequest:
    """Which partitions one drop removes, and how hard it tries: the validated config's options
    (`of`), or built by a Python caller; give `specs` (any of them) or `where`, not both."""

    specs: Sequence[Mapping[str, Any]] | None = None  # partition specs {key: value}, some keys or all
    where: str | None = None  # a predicate on the partition columns
    strict: bool = False  # a spec or predicate that matches nothing is an error (exit 2)
    max_replans: int = 3  # plans again when a rival changed the partitions

    @classmethod
    def of(cls, config: DropPartitionConfig) -> DropPartitionRequest:
        """The drop the configuration asks for."""
        return cls(
            specs=config.partitions, where=config.where, strict=config.strict, max_replans=config.max_replans
        )


def run(context: JobContext, config: DropPartitionConfig) -> None:
    table = open_partitioned_table(config)
    request = DropPartitionRequest.of(config)
    run_where_it_fits(
        context,
        table,
        config,
        lambda spark: drop_partition(
            spark, table, request, dry_run=context.dry_run, record=context.record, log=context.log
        ),
        scan_bound=True,
        may_hold=selection_pruner(table, request.specs, request.where),
    )


def drop_partition(
    spark: SparkSession | LocalSession,
    table: Table,
    request: DropPartitionRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    before_commit: Callable[[], None] | None = None,
) -> RunRecord:
    """Drop the partitions the request selects; `before_commit` is a test hook (a rival commits there)."""
    log = log or logging.getLogger("jobs.drop_partition")
    record = record or RunRecord(operation="drop-partition", table=table.path, dry_run=dry_run)
    tests = selection_tests(table, request.specs, request.where)
    latest = table.snapshot_manager.latest()
    record.snapshot_ids["base"] = latest.id if latest else None
    matches = functools.partial(
        selected, types=table.partition_types, tests=[test for _description, test in tests]
    )
    # direct: without DELETE entries, the scan tasks write the DELETEs themselves (no shuffle), and
    # report only the selected partitions, which is all this job needs (the dry run goes the same way);
    # a manifest whose partition stats rule the selection out is not read
    may_hold = selection_pruner(table, request.specs, request.where)
    scan = scan_partitions(spark, table, latest, matches, write=not dry_run, direct=True, may_hold=may_hold)
    record.details["manifests_skipped"] = scan.skipped_manifests
    written = scan.written
    handed_over = False
    try:
        chosen = _chosen_partitions(table, scan.stats, tests, request.strict, record, log)
        record_partitions(record, table, chosen)
        if not chosen:
            log.info("nothing to drop")
            return record
        if dry_run:
            log.info("dry run: %d partitions would be dropped", len(chosen))
            return record
        handed_over = True  # from here on drop_partitions owns the written manifests
        outcome = drop_partitions(
            spark,
            table,
            [stats.partition for stats, _values in chosen],
            max_replans=request.max_replans,
            before_commit=before_commit,
            step_prefix="drop-partition",
            first_plan=written,
        )
    finally:
        if not handed_over and written is not None:
            remove_manifests(table, written.manifests)
    record_drop(record, outcome)
    log.info(
        "snapshot %s: dropped %d partitions (%d files)",
        outcome.snapshot.id if outcome.snapshot else None,
        len(chosen),
        outcome.files,
    )
    return record


def _chosen_partitions(
    table: Table,
    stats: Sequence[PartitionStats],
    tests: Sequence[tuple[str, PartitionTest]],
    strict: bool,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> list[tuple[PartitionStats, list[Any]]]:
    """The scanned partitions some test selects, in label order, with their values; a test that
    selects none is reported (`details.missing_partitions`), and refused with `strict`."""
    chosen = []
    matched = [False] * len(tests)
    for partition in stats:
        values = table.partition_values(partition.partition)
        hits = [selects(test, values) for _description, test in tests]
        if any(hits):
            chosen.append((partition, values))
            matched = [seen or hit for seen, hit in zip(matched, hits, strict=True)]
    chosen.sort(key=lambda item: [str(v) for v in partition_label(table, item[1]).values()])
    missing = [description for (description, _test), seen in zip(tests, matched, strict=True) if not seen]
    if missing:
        record.details["missing_partitions"] = missing
        message = f"{table.path}: no partition matches {', '.join(missing)}"
        if strict:
            raise BadInputError(f"{message} (strict: true); nothing was dropped")
        log.info("%s; going on (strict: false)", message)
    return chosen


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("drop-partition")
