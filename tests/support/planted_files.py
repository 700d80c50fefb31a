"""Files planted in a table directory on local disk, aged, and listed: the orphans (and the look-alikes
that must stay) of the orphan-cleaning tests."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

TWO_DAYS_S = 2 * 86_400


def age_tree(root: str | Path, seconds: int = TWO_DAYS_S) -> None:
    """Make every file under `root` `seconds` old."""
    then = time.time() - seconds
    for directory, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (then, then))


def files_on_disk(root: str | Path) -> set[str]:
    root = str(root)
    return {
        os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
        for directory, _dirs, files in os.walk(root)
        for name in files
    }


def plant(root: str | Path, relative: str, data: bytes = b"orphan", age_s: int = TWO_DAYS_S) -> str:
    path = Path(root) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return relative


def uid() -> str:
    return str(uuid.uuid4())


def plant_orphans(root: str) -> tuple[set[str], set[str]]:
    """(deletable orphans of every kind, files that look orphaned but must stay)."""
    orphans = {
        plant(root, f"dt=a/bucket-0/data-{uid()}-0.parquet"),
        plant(root, f"dt=b/bucket-0/changelog-{uid()}-0.parquet"),
        plant(root, f"dt=c/bucket-0/index-{uid()}-0"),
        plant(root, f"manifest/manifest-{uid()}-0"),
        plant(root, f"manifest/manifest-list-{uid()}-0"),
        plant(root, f"manifest/index-manifest-{uid()}-0"),
        plant(root, f"index/index-{uid()}-3"),
        plant(root, f"statistics/stat-{uid()}-0"),
        plant(root, f"snapshot/.snapshot-7.{uid()}.tmp"),
        plant(root, f"manifest/.manifest-{uid()}-1.{uid()}.tmp"),
        plant(root, f"branch/branch-b/snapshot/.snapshot-3.{uid()}.tmp"),
        plant(root, f"dt=z/bucket-3/data-{uid()}-0.orc"),  # a partition nothing references
    }
    keep = {
        plant(root, "notes.txt"),
        plant(root, "dt=a/bucket-0/readme.md"),
        plant(root, "dt=a/_SUCCESS"),
        plant(root, "snapshot/unknown-file"),
        plant(root, f"branch/branch-b/manifest/manifest-{uid()}-0"),  # not where Paimon writes manifests
        plant(root, f"manifest/data-{uid()}-0.parquet"),  # a data file name outside a bucket directory
        plant(root, "consumer/consumer-reader1", b'{"nextSnapshot":3}'),
        plant(root, f"dt=a/bucket-0/data-{uid()}-0.parquet", age_s=60),  # younger than older_than
    }
    return orphans, keep
