"""What a table listing hands on: the listed-files frame's columns and the counts the driver keeps.

Shared by the directory-wave lister (`listing`), the key-range lister of object stores
(`prefix_listing`) and the inventory reader, so remove-orphan-files sees one shape whichever listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# One row per file, `path` relative to the table root; `rule`/`kind` from orphan_rules.judge_file.
LISTED_COLUMNS = "path string, size long, modification_time_ms long, rule string, kind string"
LISTED_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("modification_time_ms", pa.int64()),
        ("rule", pa.string()),
        ("kind", pa.string()),
    ]
)
BATCH_ROWS = 20_000  # rows per Arrow batch a lister yields: bounded memory per task


@dataclass
class Listing:
    """The listed files (a checkpointed DataFrame of LISTED_COLUMNS) and what the driver counted.

    `directories`: directories listed one by one (LIST requests of a wave listing; the key-range
    lister lists only the root that way). `ranges` and `pages`: key ranges and LIST pages of a
    key-range listing (0 for a wave listing).
    """

    files: DataFrame
    directories: int
    vanished_directories: int
    waves: int
    ranges: int = 0
    pages: int = 0
