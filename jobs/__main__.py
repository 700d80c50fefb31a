"""`python -m jobs <operation> --config FILE [--set key=value ...] [--dry-run] [--output FILE]`.

Exit codes: 0 done, 2 bad input, 3 refused by a safety check or a lost commit race, 1 unexpected.
The run record (JSON) goes to stdout or --output, also when the job fails.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from jobs.config import ConfigError, load_config
from jobs.errors import EXIT_BAD_INPUT, EXIT_OK, exit_code_for
from jobs.registry import OPERATIONS, JobContext, load
from jobs.report import RunRecord


class _JobLogAdapter(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"[{self.extra['operation']} {self.extra['table']}] {msg}", kwargs


def _parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {op.name:<22} {op.description}" for op in OPERATIONS.values())
    parser = argparse.ArgumentParser(
        prog="python -m jobs",
        description="Write and maintain Apache Paimon tables with Spark.",
        epilog=f"operations:\n{listing}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "operation", choices=sorted(OPERATIONS), metavar="operation", help="see the list below"
    )
    parser.add_argument("--config", required=True, help="YAML configuration (path or fsspec URL)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key"
    )
    parser.add_argument("--dry-run", action="store_true", help="plan and report, change nothing")
    parser.add_argument("--output", help="write the run record here instead of stdout")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    record = RunRecord(operation=args.operation, dry_run=args.dry_run)
    try:
        module = load(args.operation)
    except ModuleNotFoundError as error:
        if error.name != OPERATIONS[args.operation].module:
            raise
        record.finish("failed", f"operation {args.operation} is not implemented yet")
        print(f"error: {record.error}", file=sys.stderr)
        record.emit(args.output)
        return EXIT_BAD_INPUT
    try:
        config = load_config(args.config, args.set, module.CONFIG_MODEL)
    except ConfigError as error:
        record.finish("failed", str(error))
        print(f"error: {error}", file=sys.stderr)
        record.emit(args.output)
        return EXIT_BAD_INPUT
    record.table = getattr(config, "table", None)
    log = _JobLogAdapter(
        logging.getLogger(f"jobs.{args.operation}"), {"operation": args.operation, "table": record.table}
    )
    context = JobContext(args.operation, config, args.dry_run, record, log)
    try:
        module.run(context, config)
    except Exception as error:  # every failure ends in a record and an exit code
        code = exit_code_for(error)
        message = str(error).strip() or type(error).__name__
        record.finish("refused" if code == 3 else "failed", message)
        if code == 1:
            log.exception("unexpected failure")
        print(f"error: {message}", file=sys.stderr)
        record.emit(args.output)
        return code
    record.finish("done")
    record.emit(args.output)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
