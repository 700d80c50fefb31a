"""Thin spark-submit entry files call `run_entry`: spark-submit runs a .py file, not `-m module`."""

from __future__ import annotations

import sys

from jobs.__main__ import main


def run_entry(operation: str) -> None:
    sys.exit(main([operation, *sys.argv[1:]]))
