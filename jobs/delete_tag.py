"""delete-tag: delete tags by name or glob, and the files only they used (Paimon's delete_tag).

See `jobs/deletion/tags.py` for what goes and in which order: the tag files first (as Paimon), then the
files no snapshot, other tag, branch or long-lived changelog needs, in expire-snapshots' stages. A
crash between the two leaves unreferenced files that remove-orphan-files clears; a rerun finds the
tags gone and deletes nothing more.

Spark-submit entry: `spark-submit jobs/delete_tag.py --config conf/delete-tag.yaml`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from jobs.deletion.context import DeletePace, DeletionContext
from jobs.deletion.tags import TagSteps, delete_tags
from jobs.runtime.config import TableJobConfig
from jobs.runtime.name_patterns import check_name_patterns, matching_names, report_unmatched
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPERATION = "delete-tag"
STEPS = TagSteps.of(OPERATION)


class DeleteTagConfig(TableJobConfig):
    branch: str | None = Field(
        default=None, description="the branch whose tags (branch/branch-NAME/tag/); default: main"
    )
    tags: list[str] = Field(description="tag names or globs (* ? [..])")
    strict: bool = Field(default=False, description="a name or glob matching no tag is an error")
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return check_name_patterns(value, "tag")

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)


CONFIG_MODEL = DeleteTagConfig


@dataclass(frozen=True)
class DeleteTagRequest:
    """Which tags go (names or globs), whether a pattern matching none is an error, and how fast the
    freed files go."""

    tags: list[str]  # names or globs (* ? [..])
    strict: bool = False
    pace: DeletePace = DeletePace()

    @staticmethod
    def of(config: DeleteTagConfig) -> DeleteTagRequest:
        return DeleteTagRequest(list(config.tags), config.strict, DeletePace.of(config))


def run(context: JobContext, config: DeleteTagConfig) -> None:
    table = open_branch(open_existing_table(config), config.branch)
    delete_tag(
        lambda: context.spark,  # started only when a deleted tag's snapshot has expired
        table,
        DeleteTagRequest.of(config),
        **context.job_keywords(),
    )


def matching_tags(names: list[str], patterns: list[str]) -> tuple[list[str], list[str]]:
    """(tags matched by any pattern, sorted; patterns matching none): `matching_names`."""
    return matching_names(names, patterns)


def delete_tag(
    spark: SparkSession | Callable[[], SparkSession],
    table: Table,
    request: DeleteTagRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Delete the tags of `table`'s branch that `request.tags` name or match, and the files only they
    used; a pattern matching no tag is an error when `request.strict`, else a warning. `spark`: a
    session or a function returning one (called only when a file needs planning)."""
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    manager = table.tag_manager
    names, unmatched = matching_tags(manager.tag_names(), request.tags)
    message = f"{table.path}: no tag matches {', '.join(repr(p) for p in unmatched)}"
    report_unmatched(deletion.record, deletion.log, unmatched, message, request.strict)
    delete_tags(deletion, {name: manager.tag(name) for name in names}, STEPS)
    return deletion.record


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
