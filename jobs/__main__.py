"""`python -m jobs <operation> --config FILE [--set key=value ...] [--dry-run] [--output FILE]`,
`python -m jobs schema <operation> [--markdown]` (the JSON Schema of the operation's YAML, or its
option table) and `python -m jobs docs [--write DIR | --check DIR]` (the option tables of
docs/operations/<operation>.md, generated from the same models).

The same `main()` serves `paimon-jobs ...` (console script) and `spark-submit jobs/<module>.py ...`
(through `jobs.entry.run_entry`). Exit codes: 0 done, 2 bad input, 3 refused by a safety check, a
lost commit race or the table's lock held by another run, 1 unexpected. A table-management
operation runs under the table's lock (`jobs.runtime.run_lock`). The run record (JSON) goes to
stdout or --output, also when the job fails, so a scheduler always has one document per run;
stdout carries nothing else (log lines go to stderr, also under spark-submit, see
`reclaim_stderr_from_spark_submit`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from jobs.runtime.config import load_config
from jobs.runtime.docs import check_pages, operation_markdown, write_pages
from jobs.runtime.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNEXPECTED, describe, exit_code_for
from jobs.runtime.live_writers import race_or_bad_input
from jobs.runtime.logs import LOG_LEVELS, JobLogging, reclaim_stderr_from_spark_submit
from jobs.runtime.registry import OPERATIONS, JobContext, load
from jobs.runtime.report import RunRecord
from jobs.runtime.run_lock import held_for_run

_STATUS = {EXIT_OK: "done", EXIT_REFUSED: "refused"}


def _parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {op.name:<22} {op.description}" for op in OPERATIONS.values())
    parser = argparse.ArgumentParser(
        prog="python -m jobs",
        description="Write and maintain Apache Paimon tables with Spark.",
        epilog=f"operations:\n{listing}\n\nexit codes: 0 done, 2 bad input, 3 refused, lost a commit "
        "race or the table is locked by another run, 1 unexpected\n\nalso: python -m jobs schema "
        "<operation> [--markdown], python -m jobs docs [--write DIR | --check DIR], python -m jobs report "
        "--config maintain.yaml --out report.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("operation", choices=list(OPERATIONS), metavar="operation", help="see the list below")
    parser.add_argument("--config", required=True, help="YAML configuration (path or fsspec URL)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set retain_min=5 --set source.path=s3://b/in (repeatable)",
    )
    parser.add_argument("--dry-run", action="store_true", help="plan and report, change nothing")
    parser.add_argument("--output", help="write the run record here (path or fsspec URL) instead of stdout")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)
    parser.add_argument(
        "--spark-log-level",
        default="WARN",
        type=str.upper,
        choices=("ALL", "DEBUG", "INFO", "WARN", "ERROR", "OFF"),
        help="Spark's own log level (spark.log.level; default WARN; a --conf given to spark-submit wins)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no Spark stage progress bar, even on a terminal"
    )
    return parser


def _schema_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs schema",
        description="Print the JSON Schema of an operation's YAML configuration (for editors and CI lint).",
    )
    parser.add_argument(
        "operation", choices=list(OPERATIONS), metavar="operation", help=", ".join(OPERATIONS)
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print the option table (key, type, default, description) of docs/operations/<operation>.md",
    )
    return parser


def print_schema(argv: Sequence[str]) -> int:
    """`schema <operation>`: the pydantic model's JSON Schema, exactly what the YAML is validated by;
    with `--markdown` the option table its docs page holds."""
    args = _schema_parser().parse_args(argv)
    try:
        model = load(args.operation).CONFIG_MODEL
    except Exception as error:
        print(f"error: {describe(error)}", file=sys.stderr)
        return exit_code_for(error)
    if args.markdown:
        return write_stdout(operation_markdown(args.operation))
    schema = model.model_json_schema()
    schema.setdefault("title", f"paimon-jobs {args.operation} configuration")
    return write_stdout(json.dumps(schema, indent=2) + "\n")


def _docs_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs docs",
        description="The option tables of docs/operations/<operation>.md, generated from the models.",
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--write", metavar="DIR", help="rewrite the tables between the markers of DIR/<operation>.md"
    )
    target.add_argument(
        "--check", metavar="DIR", help="exit 1 when a page is missing or its tables differ from the model"
    )
    return parser


def update_docs(argv: Sequence[str]) -> int:
    """`docs`: print every operation's option tables, or write / check the pages holding them."""
    args = _docs_parser().parse_args(argv)
    try:
        return _update_docs(args)
    except Exception as error:  # an operation module that cannot be loaded: one line, its exit code
        print(f"error: {describe(error)}", file=sys.stderr)
        return exit_code_for(error)


def _update_docs(args: argparse.Namespace) -> int:
    if args.write is None and args.check is None:
        return write_stdout("\n".join(f"## {op}\n\n{operation_markdown(op)}" for op in OPERATIONS))
    if args.write is not None:
        changed = write_pages(Path(args.write))
        for status in changed:
            verb = {"missing": "created", "stale": "updated"}.get(status.state, "left alone:")
            print(f"{status.path}: {verb} {status.detail}".rstrip(), file=sys.stderr)
        return 1 if any(status.state == "broken" for status in changed) else 0
    problems = [status for status in check_pages(Path(args.check)) if status.state != "current"]
    for status in problems:
        print(f"{status.path}: {status.state} {status.detail}".rstrip(), file=sys.stderr)
    if problems:
        print("regenerate with: python -m jobs docs --write docs/operations", file=sys.stderr)
    return 1 if problems else 0


def write_stdout(text: str) -> int:
    """Print `text`; a reader that closed the pipe early (`| head`) is no error and prints no trace."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes again at exit
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one operation; returns the exit code (argparse itself exits 2 on bad arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["schema"]:
        return print_schema(argv[1:])
    if argv[:1] == ["docs"]:
        return update_docs(argv[1:])
    if argv[:1] == ["report"]:
        # loaded on use, as operation modules are (`registry.load`): it reads every operation's config model
        return importlib.import_module("jobs.report.command").main(argv[1:])
    args = _parser().parse_args(argv)
    reclaim_stderr_from_spark_submit()
    logs = JobLogging(args.operation, args.log_level)
    log = logging.getLogger(f"jobs.{args.operation}")
    record = RunRecord(operation=args.operation, dry_run=args.dry_run)
    context: JobContext | None = None
    storage_options = None
    config = None
    try:
        operation = load(args.operation)
        config = load_config(args.config, args.set, operation.CONFIG_MODEL)
        record.table = getattr(config, "table", None)
        storage_options = getattr(config, "storage_options", None)
        logs.set_table(record.table or "-")
        log.info("%s with %s", "dry run" if args.dry_run else "run", args.config)
        context = JobContext(
            args.operation,
            config,
            args.dry_run,
            record,
            log,
            spark_log_level=args.spark_log_level,
            console_progress=not args.quiet and sys.stderr.isatty(),
        )
        with held_for_run(OPERATIONS[args.operation].takes_lock, config, args.dry_run, record, log):
            operation.run(context, config)
        code, message = EXIT_OK, None
    except Exception as error:  # every failure ends in a record and an exit code
        code, message = exit_code_for(error), describe(error)
        code, message = race_or_bad_input(error, code, message, config, record.started)
        if code == EXIT_UNEXPECTED:
            log.exception("unexpected failure")
        for line in message.splitlines():
            log.error("%s", line)
    try:
        if context is not None:
            try:
                context.close()
            except Exception:
                log.warning("stopping Spark failed", exc_info=True)
        record.finish(_STATUS.get(code, "failed"), message, code)
        log.info("%s in %.1f s (exit code %d)", record.status, record.duration_s, code)
        try:
            record.emit(args.output, storage_options)
        except Exception:
            log.exception("cannot write the run record to %s; printing it to stdout instead", args.output)
            code = record.exit_code = code or EXIT_UNEXPECTED
            record.emit(None)
    finally:
        logs.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
