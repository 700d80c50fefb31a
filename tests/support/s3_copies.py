"""Local copies of S3 warehouses, so that pypaimon (the oracle) reads them as written."""

from __future__ import annotations

from paimon_format.storage.fileio import FileIO


def download(prefix: str, options: dict, target) -> str:
    """Copy an S3 warehouse to local disk so that pypaimon (the oracle) reads it as written."""
    fs = FileIO.for_path(prefix, options).fs
    fs.invalidate_cache()
    fs.get(prefix.removeprefix("s3://") + "/", str(target) + "/", recursive=True)
    return str(target)
