"""`python -m paimon_format inspect TABLE_PATH [--snapshot N | --tag T] [--files-per-partition] [--json]`.

`python -m paimon_format system-table TABLE_PATH NAME [--snapshot N | --tag T] [--format text|csv|json]`
prints one of Paimon's system tables (`$snapshots`, `$files`, ...; `paimon_format.system_tables`).

A look at a table with nothing but Python. Exit codes follow the jobs: 0 done, 2 bad input (no
such table, snapshot or tag; corrupt metadata), 1 unexpected. A reader that stops early
(`inspect ... | head`) ends the output quietly, with exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from paimon_format.errors import PaimonFormatError
from paimon_format.inspect import (
    describe_table,
    files_per_partition,
    render_files_per_partition,
    render_text,
)
from paimon_format.storage.fileio import FileIO
from paimon_format.system_tables.command import add_system_table_parser, system_table_text
from paimon_format.table import Table


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m paimon_format", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser("inspect", help="schema, snapshots and live files of a table")
    inspect.add_argument(
        "table_path", help="table directory, e.g. /data/warehouse/db.db/events or s3://b/w/db.db/t"
    )
    chosen = inspect.add_mutually_exclusive_group()
    chosen.add_argument("--snapshot", type=int, help="snapshot id whose files to list (default: latest)")
    chosen.add_argument("--tag", help="tag whose files to list")
    inspect.add_argument("--json", action="store_true", help="print one JSON document")
    inspect.add_argument(
        "--files-per-partition",
        action="store_true",
        help="per partition: files, small files, rows, bytes; and a file-size histogram (instead of the "
        "file list)",
    )
    inspect.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fsspec storage option (repeatable), e.g. client_kwargs.endpoint_url=http://127.0.0.1:5000",
    )
    system = add_system_table_parser(commands)
    system.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE")
    return parser


def _storage_options(pairs: Sequence[str]) -> dict:
    options: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--storage-option expects KEY=VALUE, got {pair!r}")
        target = options
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return options


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "system-table":
        return _system_table(args)
    try:
        path = args.table_path.rstrip("/")
        table = Table(FileIO.for_path(path, _storage_options(args.storage_option)), path)
        description = describe_table(table, args.snapshot, args.tag)
        summary = files_per_partition(table, description["files"]) if args.files_per_partition else None
    except PaimonFormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if summary is not None:
        description["files_per_partition"] = summary
        del description["files"]
    if args.json:
        text = json.dumps(description, indent=2, default=str)
    elif summary is not None:
        text = render_text(description) + "\n" + render_files_per_partition(summary)
    else:
        text = render_text(description)
    return write_stdout(text + "\n")


def _system_table(args: argparse.Namespace) -> int:
    """Print a system table chunk by chunk; bad input (no table, snapshot, tag or such system table)
    exits 2 with the cause, also when found after the first rows were printed."""
    path = args.table_path.rstrip("/")
    try:
        table = Table(FileIO.for_path(path, _storage_options(args.storage_option)), path)
        for chunk in system_table_text(table, args.name, args.snapshot, args.tag, args.format):
            write_stdout(chunk)
    except PaimonFormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def write_stdout(text: str) -> int:
    """Print `text`; a reader that closed the pipe early (`| head`) is no error and prints no trace."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would flush stdout again at exit and raise once more: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
