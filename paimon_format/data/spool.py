"""A data file encoded into a local file instead of memory, then stored at its destination.

Why: a Parquet file was encoded into an in-memory buffer and copied out as bytes, so a writer held up
to two copies of its open file: up to twice `target-file-size` (128 MB for primary-key tables) per
task, growing with the bucket until files roll. Encoding into a file on local disk keeps the task's
memory at the row group being encoded while the file grows (the page cache holds the rest, and the
kernel may drop it). On an object store the upload then reads a file below 100 MB whole (s3fs's
`put_file` sends it as one PUT; larger ones go in 50 MB parts), so a finished file is in memory
while it uploads, under `data.uploads`' byte bound, as before; its encoding no longer is.

Where the spool goes: on local disk, a hidden temp name in the destination's directory (`.<name>.<uuid>
.tmp`, as `local_files.replace_file` names its temps), renamed over the destination once fsynced: no
copy. On an object store, a temp file under Spark's local directories (the first of
`SPARK_LOCAL_DIRS`, which executors have; else the system's temp directory, e.g. for a write in
the driver), uploaded by `FileIO.put_local_file` and then removed.

Crash ordering: the destination appears only complete (rename, or one upload); a file is named in a
commit only after it was stored (`data.uploads`). A crash can leave a spool: on local disk a hidden
temp in a bucket directory, named by nothing, which remove-orphan-files removes like any file no
snapshot names once it is older than its cutoff; on an object store a file in the executor's scratch
space, which the cluster cleans with the application's directories.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from dataclasses import dataclass

from paimon_format.storage.fileio import FileIO


@dataclass(frozen=True)
class SpooledFile:
    """An encoded data file waiting on local disk (`local_path`) to be stored; `size` in bytes."""

    local_path: str
    size: int


# what an encoder's `finish` returns: the file's bytes, or its spool on local disk
Payload = bytes | SpooledFile


def payload_size(payload: Payload) -> int:
    return payload.size if isinstance(payload, SpooledFile) else len(payload)


def spool_path(file_io: FileIO, destination: str) -> str | None:
    """Where a file bound for `destination` is encoded (see the module docstring); None (memory)
    for fsspec's in-memory file system, which holds the file in memory anyway."""
    if file_io.protocol == "memory":
        return None
    name = os.path.basename(destination.rstrip("/"))
    temp_name = f".{name}.{uuid.uuid4()}.tmp"
    directory = file_io.local_spool_dir(destination)
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
        return os.path.join(directory, temp_name)
    scratch = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or tempfile.gettempdir()
    os.makedirs(scratch, exist_ok=True)
    return os.path.join(scratch, temp_name)


def store(file_io: FileIO, destination: str, payload: Payload) -> None:
    """Store an encoded file at `destination`; a spool is moved there (and is gone afterwards, also
    when storing failed: the caller's abort then has nothing local to clean)."""
    if not isinstance(payload, SpooledFile):
        file_io.write_bytes(destination, payload)
        return
    try:
        file_io.put_local_file(destination, payload.local_path)
    finally:
        discard(payload)


def discard(payload: Payload | str | None) -> None:
    """Remove a spool (a `SpooledFile` or a spool's path) if it is still there; bytes need nothing."""
    path = payload.local_path if isinstance(payload, SpooledFile) else payload
    if isinstance(path, str):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
