"""Driver log lines that say which operation and table they belong to.

Nightly steps often run several jobs into one log; a line without its job and table cannot be
traced back. The operation and table are added by a filter on the frame's own handler, so lines
from `paimon_format` and any library carry them too, without every call site passing them.
"""

from __future__ import annotations

import logging
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
