"""Driver log lines that say which operation and table they belong to.

Nightly steps often run several jobs into one log; a line without its job and table cannot be
traced back. The operation and table are added by a filter on the frame's own handler, so lines
from `paimon_format` and any library carry them too, without every call site passing them.
"""

from __future__ import annotations

import logging
import os
import stat
import sys

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_FORMAT = "%(asctime)s %(levelname)s [%(job)s] %(name)s: %(message)s"


class _JobFields(logging.Filter):
    def __init__(self, operation: str) -> None:
        super().__init__()
        self.operation = operation
        self.table = "-"

    def filter(self, record: logging.LogRecord) -> bool:
        record.job = f"{self.operation} {self.table}"
        return True


class JobLogging:
    """Routes log records to stderr, tagged with the job, for the duration of one run.

    `close()` removes the handler and restores the root level, so that runs in one process (tests,
    a wrapper running several configs) neither duplicate lines nor leak settings.
    """

    def __init__(self, operation: str, level: str = "INFO") -> None:
        self._fields = _JobFields(operation)
        self._handler = logging.StreamHandler(sys.stderr)
        self._handler.setFormatter(logging.Formatter(_FORMAT))
        self._handler.addFilter(self._fields)
        root = logging.getLogger()
        self._saved_root_level = root.level
        root.addHandler(self._handler)
        root.setLevel(level.upper())
        self._py4j = logging.getLogger("py4j")
        self._saved_py4j_level = self._py4j.level
        if level.upper() != "DEBUG":
            self._py4j.setLevel(logging.WARNING)  # its INFO lines are gateway chatter

    def set_table(self, table: str) -> None:
        self._fields.table = table

    def close(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self._handler)
        root.setLevel(self._saved_root_level)
        self._py4j.setLevel(self._saved_py4j_level)


def reclaim_stderr_from_spark_submit() -> bool:
    """Under spark-submit, send this process's stderr to the JVM's stderr instead of its stdout.

    spark-submit runs the Python driver with stderr merged into stdout (PythonRunner copies both to
    the JVM's System.out), so every log line would land on stdout ahead of the run record and
    `| jq` would fail. The JVM's own stderr is reachable as /proc/<parent>/fd/2 on Linux; fd 2 is
    pointed there, so the record is the only thing this process writes to stdout. Returns whether
    it did; elsewhere (no /proc, stderr not merged, not under spark-submit) nothing changes, and
    neither when the JVM's stderr is a regular file opened without append (`2>file`, YARN's container
    logs): the JVM writes there at its own offset, over whatever we appended. There `--output` is
    the way to get the record alone (README says so).
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    try:
        out, err = os.fstat(1), os.fstat(2)
        if (out.st_dev, out.st_ino) != (err.st_dev, err.st_ino):
            return False  # stderr is not merged into stdout: nothing to fix
        parent = f"/proc/{os.getppid()}"
        if "java" not in os.path.basename(os.readlink(f"{parent}/exe")):
            return False
        if stat.S_ISREG(os.stat(f"{parent}/fd/2").st_mode) and not _opened_for_append(f"{parent}/fdinfo/2"):
            # A second writer at its own offset would overwrite the JVM's lines (and it ours).
            return False
        target = os.open(f"{parent}/fd/2", os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        sys.stderr.flush()
        os.dup2(target, 2)
    finally:
        os.close(target)
    return True


def _opened_for_append(fdinfo: str) -> bool:
    with open(fdinfo, encoding="ascii") as handle:
        for line in handle:
            if line.startswith("flags:"):
                return bool(int(line.split()[1], 8) & os.O_APPEND)
    return False
