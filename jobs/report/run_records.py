"""What the last maintenance runs did, from their run records (JSON files a scheduler kept).

A run record goes to stdout or `--output` (`jobs.runtime.report.RunRecord`); the page reads the
ones the `report.records` setting names (files, globs, directories of *.json) and, when maintain
writes the page, the record of the run that just ended. A maintain record holds a section per
table (`details.tables`), a single job's record names its table; both become `RunSummary` rows.

The figures of a record (snapshots expired, files and bytes removed) are computed by one table of
keys, `SUMMARY_KEYS`, which maintain's own summary uses too, so the page and maintain's log agree.

Memory: records are read one at a time and only the newest `keep` summaries per table are kept.
A file that is not a run record is an error the page shows (and the exit code reports), not a file
silently skipped.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.core import url_to_fs

# The record keys each operation uses for what a summary adds up, for a real run and a dry run
# (where the figures are what it would do): (counts keys, bytes keys) per summary figure.
SUMMARY_KEYS: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "expire-partitions": {"partitions": (("partitions",), ("partitions",))},
    "expire-snapshots": {
        "snapshots": (("snapshots_expired",), ("snapshots_to_expire",)),
        "files": (
            ("files_deleted", "manifests_deleted", "manifest_lists_deleted"),
            ("files_to_delete", "manifests_to_delete", "manifest_lists_to_delete"),
        ),
        "bytes": (
            ("files_deleted", "manifests_deleted", "manifest_lists_deleted"),
            ("files_to_delete", "manifests_to_delete", "manifest_lists_to_delete"),
        ),
    },
    "compact": {
        "files": (("files_rewritten",), ("files_before",)),
        "bytes": (("files_rewritten",), ("files_before",)),
    },
    "remove-orphan-files": {
        "files": (("files_deleted",), ("orphan_files",)),
        "bytes": (("deleted",), ("orphans",)),
    },
}
# compaction before -> after: files rewritten and files written (a dry run: its estimate)
_COMPACTION_KEYS = {
    False: ("files_rewritten", "files_written"),
    True: ("files_before", "files_after_estimate"),
}


def record_figure(
    operation: str, dry_run: bool, counts: Mapping[str, int], bytes_: Mapping[str, int], figure: str
) -> int:
    """One summary figure (snapshots, partitions, files, bytes) of one operation's record."""
    keys = SUMMARY_KEYS.get(operation, {}).get(figure)
    if keys is None:
        return 0
    names = keys[1] if dry_run else keys[0]
    source = bytes_ if figure == "bytes" else counts
    return sum(int(source.get(name, 0) or 0) for name in names)


@dataclass
class RunSummary:
    """One run's effect on one table, as a row of the page."""

    table: str
    started: str
    operation: str  # maintain, or the single job's operation
    status: str
    dry_run: bool = False
    exit_code: int | None = None
    steps: list[str] = field(default_factory=list)  # maintain: "expire-snapshots done", ...
    snapshots_expired: int = 0
    partitions_expired: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    compacted: tuple[int, int] | None = None  # files before -> after
    reason: str | None = None
    source: str = ""


def summaries_of(record: Mapping[str, Any], source: str) -> list[RunSummary]:
    """The per-table rows of one run record (a maintain record gives one per table it covered)."""
    operation = record.get("operation")
    if not isinstance(operation, str) or "status" not in record or "started" not in record:
        raise ValueError("not a run record (no operation, status or started)")
    started, dry_run = str(record["started"]), bool(record.get("dry_run"))
    if operation != "maintain":
        table = record.get("table")
        if not table:
            return []
        summary = RunSummary(
            table, started, operation, str(record["status"]), dry_run, record.get("exit_code")
        )
        _add_operation(summary, record)
        summary.reason, summary.source = record.get("error"), source
        return [summary]
    tables = (record.get("details") or {}).get("tables") or {}
    rows = []
    for table, outcome in tables.items():
        summary = RunSummary(table, started, operation, str(outcome.get("status")), dry_run)
        summary.exit_code, summary.reason, summary.source = (
            outcome.get("exit_code"),
            outcome.get("reason"),
            source,
        )
        for step in outcome.get("operations") or []:
            summary.steps.append(f"{step.get('operation')} {step.get('status')}")
            _add_operation(summary, step)
        rows.append(summary)
    return rows


def _add_operation(summary: RunSummary, record: Mapping[str, Any]) -> None:
    """Add one operation record's figures (and its compaction's before/after) to `summary`."""
    operation, dry_run = str(record.get("operation")), bool(record.get("dry_run"))
    counts, bytes_ = record.get("counts") or {}, record.get("bytes") or {}
    summary.snapshots_expired += record_figure(operation, dry_run, counts, bytes_, "snapshots")
    summary.partitions_expired += record_figure(operation, dry_run, counts, bytes_, "partitions")
    summary.files_removed += record_figure(operation, dry_run, counts, bytes_, "files")
    summary.bytes_removed += record_figure(operation, dry_run, counts, bytes_, "bytes")
    if operation == "compact":
        before, after = _COMPACTION_KEYS[dry_run]
        summary.compacted = (int(counts.get(before, 0) or 0), int(counts.get(after, 0) or 0))


class RunHistory:
    """The newest `keep` summaries per table of the tables on the page."""

    def __init__(self, tables: Iterable[str], keep: int) -> None:
        self._keep = keep
        self._heaps: dict[str, list[tuple[str, int, RunSummary]]] = {table: [] for table in tables}
        self._order = 0
        self.errors: list[str] = []  # record files that could not be read, with why

    def add(self, summaries: Iterable[RunSummary]) -> None:
        for summary in summaries:
            heap = self._heaps.get(summary.table)
            if heap is None:
                continue
            self._order += 1
            item = (summary.started, self._order, summary)
            if len(heap) < self._keep:
                heapq.heappush(heap, item)
            else:
                heapq.heappushpop(heap, item)

    def runs(self, table: str) -> list[RunSummary]:
        """The table's runs, newest first."""
        return [item[2] for item in sorted(self._heaps.get(table, []), reverse=True)]


def record_files(locations: Sequence[str], storage_options: Mapping[str, Any]) -> Iterable[str]:
    """The path or URL of every record file `locations` names: a file, a glob, or a directory's
    *.json files; a location that names nothing raises `FileNotFoundError`."""
    for location in locations:
        fs, path = url_to_fs(location, **dict(storage_options))
        if any(character in path for character in "*?["):
            paths = sorted(fs.glob(path))
        elif fs.isdir(path):
            paths = sorted(p for p in fs.ls(path, detail=False) if p.endswith(".json"))
        elif fs.exists(path):
            paths = [path]
        else:
            raise FileNotFoundError(f"run records: {location} does not exist")
        for found in paths:
            yield fs.unstrip_protocol(found) if "://" in location else found


def read_run_history(
    locations: Sequence[str], storage_options: Mapping[str, Any], tables: Iterable[str], keep: int
) -> RunHistory:
    """Every record file of `locations` read into a RunHistory of `tables`; a file that cannot be
    read or is no run record lands in `errors` (named, with why), the others are still read."""
    history = RunHistory(tables, keep)
    try:
        for url in record_files(locations, storage_options):
            try:
                with fsspec.open(url, "r", encoding="utf-8", **dict(storage_options)) as handle:
                    document = json.load(handle)
                if not isinstance(document, dict):
                    raise ValueError("not a run record (not a JSON object)")
                history.add(summaries_of(document, url))
            except (OSError, ValueError) as error:
                history.errors.append(f"{url}: {error}")
    except OSError as error:
        history.errors.append(str(error))
    return history
