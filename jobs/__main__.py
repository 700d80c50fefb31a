"""`python -m jobs <operation> --config FILE [--set key=value ...] [--dry-run] [--output FILE]`.

The same `main()` serves `paimon-jobs ...` (console script) and `spark-submit jobs/<module>.py ...`
(through `jobs.entry.run_entry`). Exit codes: 0 done, 2 bad input, 3 refused by a safety check or a
lost commit race, 1 unexpected. The run record (JSON) goes to stdout or --output, also when the job
fails, so a scheduler always has one document per run.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from jobs.config import load_config
from jobs.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNEXPECTED, describe, exit_code_for
from jobs.logs import LOG_LEVELS, JobLogging
from jobs.registry import OPERATIONS, JobContext, load
from jobs.report import RunRecord

_STATUS = {EXIT_OK: "done", EXIT_REFUSED: "refused"}


def _parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {op.name:<22} {op.description}" for op in OPERATIONS.values())
    parser = argparse.ArgumentParser(
        prog="python -m jobs",
        description="Write and maintain Apache Paimon tables with Spark.",
        epilog=f"operations:\n{listing}\n\nexit codes: 0 done, 2 bad input, 3 refused or lost a commit "
        "race, 1 unexpected",
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one operation; returns the exit code (argparse itself exits 2 on bad arguments)."""
    args = _parser().parse_args(argv)
    logs = JobLogging(args.operation, args.log_level)
    log = logging.getLogger(f"jobs.{args.operation}")
    record = RunRecord(operation=args.operation, dry_run=args.dry_run)
    context: JobContext | None = None
    storage_options = None
    try:
        operation = load(args.operation)
        config = load_config(args.config, args.set, operation.CONFIG_MODEL)
        record.table = getattr(config, "table", None)
        storage_options = getattr(config, "storage_options", None)
        logs.set_table(record.table or "-")
        log.info("%s with %s", "dry run" if args.dry_run else "run", args.config)
        context = JobContext(args.operation, config, args.dry_run, record, log)
        operation.run(context, config)
        code, message = EXIT_OK, None
    except Exception as error:  # every failure ends in a record and an exit code
        code, message = exit_code_for(error), describe(error)
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
