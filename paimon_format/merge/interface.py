"""What every merge engine shares: the engine interface, its error, and the options it reads.

Kept below the engines (`engines`, `row_functions`, `columnar`, `row`) and the module that picks
one for a table (`table_engine`), so none of them needs another to know these.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pyarrow as pa

from paimon_format.errors import InvalidTableStateError, UnsupportedOperationError
from paimon_format.model.options import CoreOptions


class MergeFunctionError(InvalidTableStateError):
    """Rows that Paimon's merge function refuses to merge (e.g. a delete under first-row)."""


class MergeEngine(Protocol):
    def merge(self, window: pa.Table, order: np.ndarray, starts: np.ndarray) -> pa.Table:
        """One row per key group of `window.take(order)` (groups start at `starts`), in order."""
        ...


def option_flag(options: CoreOptions, key: str, *fallbacks: str) -> bool:
    """A boolean option read like Java's `Options.get` with fallback keys."""
    for name in (key, *fallbacks):
        raw = options.get(name)
        if raw is not None:
            text = raw.strip().lower()
            if text not in ("true", "false"):
                raise UnsupportedOperationError(f"option {name}={raw!r}: expected true or false")
            return text == "true"
    return False


def ignore_delete(options: CoreOptions) -> bool:
    """`ignore-delete` under any of the names Paimon's merge engines accept."""
    return option_flag(
        options,
        "ignore-delete",
        "first-row.ignore-delete",
        "deduplicate.ignore-delete",
        "partial-update.ignore-delete",
    )
