"""rename-tag: give a tag another name (issue #30), as Paimon's `rename_tag` procedure.

A tag is one file, `tag/tag-<name>`, and names no file by its own name, so renaming it moves no data:
the new tag file gets the old one's bytes (its snapshot and, if it has one, its retention and
creation time, so expire-tags treats it as before), then the old one goes. Order, so that the tag
is never lost:

1. create `tag/tag-<to>` (only when absent) with the old tag's bytes: a crash leaves both names, each
   reading the same snapshot; a rerun finds the new name holding the same bytes and goes on;
2. delete `tag/tag-<from>`; a rerun after that finds no `from_tag` but `to_tag`: the rename is done,
   so it changes nothing and ends with exit 0 (`details.rename.already_done`).

Nothing is deleted but the old tag file, so no data file can go missing. Bad input (exit 2): an
unknown `from_tag` (when `to_tag` does not exist either), a `to_tag` that exists with other content,
invalid names, the same name twice. A racing writer (exit 3): the old tag was replaced or deleted,
or `to_tag` created with other content, while this ran; the old tag is then left as it is. Runs on
the driver alone (no Spark).

Spark-submit entry: `spark-submit jobs/rename_tag.py --config conf/rename-tag.yaml`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from jobs.tagging.target import tag_bytes
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table
from paimon_format.tags import validate_tag_name

OPERATION = "rename-tag"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_COPIED = f"{OPERATION}:copied"
STEP_DELETED = f"{OPERATION}:old-deleted"


class RenameTagConfig(TableJobConfig):
    branch: str | None = Field(
        default=None, description="the branch whose tags (branch/branch-NAME/tag/); default: main"
    )
    from_tag: str = Field(description="the tag to rename")
    to_tag: str = Field(description="its new name (not a number, no '/')")

    @field_validator("from_tag", "to_tag")
    @classmethod
    def _name(cls, value: str) -> str:
        validate_tag_name(value)
        return value

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)

    @model_validator(mode="after")
    def _different(self) -> RenameTagConfig:
        if self.from_tag == self.to_tag:
            raise ValueError(f"from_tag and to_tag are the same name {self.from_tag!r}")
        return self


CONFIG_MODEL = RenameTagConfig


@dataclass(frozen=True)
class RenameTagRequest:
    from_tag: str
    to_tag: str

    @staticmethod
    def of(config: RenameTagConfig) -> RenameTagRequest:
        return RenameTagRequest(config.from_tag, config.to_tag)


def run(context: JobContext, config: RenameTagConfig) -> None:
    rename_tag(
        open_branch(open_existing_table(config), config.branch),
        RenameTagRequest.of(config),
        **context.job_keywords(),
    )


def rename_tag(
    table: Table,
    request: RenameTagRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Rename tag `request.from_tag` of `table`'s branch to `request.to_tag` (module docstring: order)."""
    log = log or logging.getLogger("jobs.rename_tag")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    manager, source, target = table.tag_manager, request.from_tag, request.to_tag
    data = tag_bytes(manager, source)
    if data is None and manager.tag_exists(target):
        log.warning("tag %r does not exist and %r does: renamed already, nothing to do", source, target)
        record.details["rename"] = {"from": source, "to": target, "already_done": True}
        record.count("tags_renamed", 0)
        return record
    if data is None:
        raise BadInputError(
            f"{manager.tag_path(source)}: tag {source!r} does not exist (tags: {manager.tag_names()[:20]})"
        )
    there = tag_bytes(manager, target)
    if there is not None and there != data:
        raise BadInputError(
            f"{manager.tag_path(target)}: tag {target!r} already exists (on snapshot "
            f"{Snapshot.from_json(there).id}); delete-tag it first, or choose another name"
        )
    tagged = Snapshot.from_json(data, manager.tag_path(source)).id
    record.snapshot_ids["tagged"] = tagged
    record.details["rename"] = {
        "from": source,
        "to": target,
        "snapshot": tagged,
        "resumed": there is not None,
    }
    crash_point(STEP_PLANNED)
    if dry_run:
        log.info("dry run: would rename tag %r (snapshot %d) to %r", source, tagged, target)
        record.count("tags_renamed", 0)
        return record
    if there is None and not manager.file_io.create_if_absent(manager.tag_path(target), data):
        if tag_bytes(manager, target) != data:
            raise CommitRaceLost(
                f"{manager.tag_path(target)}: tag {target!r} was created by another writer while renaming; "
                f"tag {source!r} is left as it was"
            )
    crash_point(STEP_COPIED)
    if tag_bytes(manager, source) != data:
        raise CommitRaceLost(
            f"{manager.tag_path(source)}: tag {source!r} was replaced or deleted by another writer while "
            f"renaming; {target!r} holds it as it was when read (delete-tag one of them if unwanted)"
        )
    manager.delete_tag(source)
    crash_point(STEP_DELETED)
    record.count("tags_renamed", 1)
    log.info("renamed tag %r (snapshot %d) to %r", source, tagged, target)
    return record


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
