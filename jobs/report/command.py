"""`python -m jobs report --config maintain.yaml [--out report.html]`, and the page after a maintain run.

The tables are the maintain file's (`tables`, `exclude`, globs resolved as maintain resolves them);
the page goes to `--out` or the file's `report.out`. Read-only: no lock is taken (a page is a
look, and it must show a table that a running maintain holds), no table is changed. Like every
command it prints one run record (operation `report`) to stdout or `--output`.

Exit codes: 0 every table was read; 2 bad input (the config, a missing warehouse, and a table whose
metadata cannot be read or a run record file that is no run record: the page is still written, with
an error block for each); 1 unexpected. A broken table never keeps the others off the page.

Writing: on local disk the page is written to a temporary sibling and renamed over the target, so
a reader (or a crash) never sees half a page; on an object store it is one PUT, atomic by itself.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from jobs.report.advice import advice_lines
from jobs.report.page import render_page
from jobs.report.run_records import read_run_history, summaries_of
from jobs.report.settings import ReportSettings
from jobs.report.table_health import TableHealth, read_table_health
from jobs.runtime.config import load_config
from jobs.runtime.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNEXPECTED,
    BadInputError,
    describe,
    exit_code_for,
)
from jobs.runtime.logs import LOG_LEVELS, JobLogging
from jobs.runtime.maintain_config import MaintainConfig
from jobs.runtime.report import RunRecord
from jobs.runtime.table_globs import resolve_tables
from jobs.runtime.table_open import open_existing_table

# Which exit code wins for the command: page someone (1) before asking for a fix (2) before retry (3).
_SEVERITY = {EXIT_OK: 0, EXIT_REFUSED: 1, EXIT_BAD_INPUT: 2, EXIT_UNEXPECTED: 3}


@dataclass
class HealthPage:
    """The rendered page and what went wrong while reading it."""

    html: str
    tables: list[TableHealth]
    record_errors: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        codes = [health.exit_code for health in self.tables if health.error]
        codes += [EXIT_BAD_INPUT] * bool(self.record_errors)
        return max(codes, key=lambda code: _SEVERITY.get(code, 3), default=EXIT_OK)


def build_health_page(
    config: MaintainConfig,
    settings: ReportSettings,
    extra_records: Sequence[Mapping[str, Any]] = (),
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> HealthPage:
    """Read every table of `config` and its run records into one page; `extra_records`: records not
    (yet) in a file, e.g. the maintain run that is writing the page. A missing warehouse raises
    `BadInputError`; a broken table or record file becomes an error block on the page."""
    log = log or logging.getLogger("jobs.report")
    resolution = resolve_tables(config.warehouse, config.tables, config.exclude, config.storage_options)
    if resolution.unmatched:
        message = f"no table matches {', '.join(resolution.unmatched)} under {config.warehouse}"
        if config.strict:
            raise BadInputError(f"{message} (strict: true)")
        log.warning("%s", message)
    now_ms = int(time.time() * 1000)
    history = read_run_history(
        settings.records, config.storage_options, resolution.tables, settings.runs_per_table
    )
    for record in extra_records:
        history.add(summaries_of(record, "this run"))

    def read(identifier: str) -> TableHealth:
        return table_health(config, identifier, settings.top_partitions, now_ms, log)

    workers = max(1, min(settings.parallelism, len(resolution.tables)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="report") as pool:
        tables = list(pool.map(read, resolution.tables))
    for health in tables:
        health.runs = history.runs(health.identifier)
    for problem in history.errors:
        log.error("run records: %s", problem)
    html = render_page(config.warehouse, tables, history.errors, now_ms)
    return HealthPage(html, tables, history.errors)


def table_health(
    config: MaintainConfig,
    identifier: str,
    top_partitions: int,
    now_ms: int,
    log: logging.Logger | logging.LoggerAdapter,
) -> TableHealth:
    """One table's figures and advice; never raises: a failure is the table's error block."""
    try:
        table = open_existing_table(
            SimpleNamespace(
                warehouse=config.warehouse,
                table=identifier,
                storage_options=config.storage_options,
                io_parallelism=config.io_parallelism,
            )
        )
        health = read_table_health(table, identifier, top_partitions)
        health.advice = advice_lines(health, now_ms)
        return health
    except Exception as error:  # a broken table is shown as such; the others still render
        code = exit_code_for(error)
        if code == EXIT_UNEXPECTED:
            log.exception("%s: reading the table failed unexpectedly", identifier)
        else:
            log.error("%s: %s", identifier, describe(error))
        return TableHealth(identifier, error=describe(error), exit_code=code)


def write_page(html: str, out: str, storage_options: Mapping[str, Any]) -> None:
    """Write the page to `out` whole (see the module docstring for why a rename on local disk)."""
    fs, path = url_to_fs(out, **dict(storage_options))
    data = html.encode("utf-8")
    if not isinstance(fs, LocalFileSystem):
        fs.pipe_file(path, data)
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise BadInputError(f"report out: directory {directory} does not exist")
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def page_after_maintain(
    config: MaintainConfig, record: RunRecord, dry_run: bool, log: logging.Logger | logging.LoggerAdapter
) -> str | None:
    """maintain's `report:` block: write the page with this run's record in it. Never raises: the
    problem is returned (and logged), so a page that cannot be written never hides what maintain
    did; maintain decides what it means for its exit code. A dry run writes nothing."""
    settings = config.report
    if settings is None or not settings.out:
        return None
    if dry_run:
        log.info("dry run: the health page would be written to %s", settings.out)
        record.details["report"] = {"out": settings.out, "written": False}
        return None
    try:
        page = build_health_page(config, settings, [record.to_dict()], log)
        write_page(page.html, settings.out, config.storage_options)
    except Exception as error:  # reported through maintain's record and exit code
        problem = f"the health page could not be written to {settings.out}: {describe(error)}"
        log.error("%s", problem)
        record.details["report"] = {"out": settings.out, "written": False, "error": problem}
        return problem
    unreadable = [health.identifier for health in page.tables if health.error]
    record.details["report"] = {"out": settings.out, "written": True, "unreadable_tables": unreadable}
    log.info("health page of %d tables written to %s", len(page.tables), settings.out)
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs report",
        description="Write the warehouse health page (one self-contained HTML file) of a maintain config's "
        "tables, from their metadata and run records.",
        epilog="exit codes: 0 done, 2 bad input or a table that cannot be read (its error is on the page), "
        "1 unexpected",
    )
    parser.add_argument("--config", required=True, help="the maintain YAML (path or fsspec URL)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key")
    parser.add_argument("--out", help="where the page goes (default: report.out of the config)")
    parser.add_argument("--output", help="write the run record here instead of stdout")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)
    return parser


def main(argv: Sequence[str]) -> int:
    """`report`: build and write the page, print the run record; returns the exit code."""
    args = _parser().parse_args(argv)
    logs = JobLogging("report", args.log_level)
    log = logging.getLogger("jobs.report")
    record = RunRecord(operation="report")
    storage_options: Mapping[str, Any] = {}
    try:
        config = load_config(args.config, args.set, MaintainConfig)
        storage_options = config.storage_options
        settings = config.report or ReportSettings()
        out = args.out or settings.out
        if not out:
            raise BadInputError(f"{args.config}: no page to write: give --out or set report.out")
        page = build_health_page(config, settings, (), log)
        write_page(page.html, out, storage_options)
        _fill_record(record, page, out)
        log.info("health page of %d tables written to %s", len(page.tables), out)
        code = page.exit_code
        message = _problems(page) if code else None
    except Exception as error:  # every failure ends in a record and an exit code
        code, message = exit_code_for(error), describe(error)
        if code == EXIT_UNEXPECTED:
            log.exception("unexpected failure")
        log.error("%s", message)
    try:
        record.finish("done" if code == EXIT_OK else "failed", message, code)
        record.emit(args.output, dict(storage_options))
    finally:
        logs.close()
    return code


def _fill_record(record: RunRecord, page: HealthPage, out: str) -> None:
    record.details["out"] = out
    record.count("tables", len(page.tables))
    record.count("tables_unreadable", sum(1 for health in page.tables if health.error))
    record.count("record_errors", len(page.record_errors))
    record.details["tables"] = {
        health.identifier: {"error": health.error, "exit_code": health.exit_code} if health.error else {}
        for health in page.tables
    }


def _problems(page: HealthPage) -> str:
    lines = [f"{health.identifier}: {health.error}" for health in page.tables if health.error]
    return "\n".join([*lines, *(f"run records: {error}" for error in page.record_errors)])
