"""Entry point of the files handed to spark-submit, which runs a .py file, not `-m module`.

A thin entry file is two lines:

    from jobs.entry import run_entry
    run_entry("expire-snapshots")

The package must be importable on the driver and the executors: installed with pip on every node,
shipped as a virtual environment (`--archives paimon_jobs-<version>-venv.tar.gz#environment` with
`spark.pyspark.python=./environment/bin/python`), or with `--py-files paimon_jobs.zip` next to its
installed dependencies (see scripts/package and README's cluster section).
"""

from __future__ import annotations

import sys

from jobs.__main__ import main


def run_entry(operation: str) -> None:
    """Run `operation` with the script's arguments and exit with its exit code."""
    sys.exit(main([operation, *sys.argv[1:]]))
