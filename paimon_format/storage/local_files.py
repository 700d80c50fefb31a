"""Durable local-disk writes: replace a file atomically, create one only if absent (the commit).

A snapshot file must never be seen half-written nor overwrite a rival's: files are written to a
unique temp file and fsynced, then renamed over the target (`replace_file`) or hard-linked to it
(`create_if_absent`: link() fails if the target exists), and the directory entry is fsynced.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import uuid

from paimon_format.errors import StorageError

logger = logging.getLogger(__name__)

# link() fails with these on filesystems without hard links; we fall back to O_CREAT|O_EXCL.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


def local_exists(fs_path: str, path: str) -> bool:
    """Does the file or directory exist? Errors other than not-found are a StorageError."""
    try:
        os.stat(fs_path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"stat {path}: {exc}") from exc
    return True


def replace_file(fs_path: str, data: bytes) -> None:
    """Create or overwrite `fs_path` through a temp file renamed over it: readers never see half."""
    directory, name = os.path.split(fs_path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4()}.tmp")
    try:
        _write_synced(tmp, data)
        os.replace(tmp, fs_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def move_into_place(local_path: str, fs_path: str) -> None:
    """Make a finished local file durable and rename it to `fs_path`, which then appears complete;
    from another device it is copied to a temp file beside the target first."""
    with open(local_path, "rb+") as handle:
        os.fsync(handle.fileno())
    directory = os.path.dirname(fs_path)
    os.makedirs(directory, exist_ok=True)
    try:
        os.replace(local_path, fs_path)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    tmp = os.path.join(directory, f".{os.path.basename(fs_path)}.{uuid.uuid4()}.tmp")
    try:
        shutil.copyfile(local_path, tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, fs_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        with contextlib.suppress(FileNotFoundError):
            os.remove(local_path)


def create_if_absent(fs_path: str, path: str, data: bytes) -> bool:
    """Write a unique temp file, then hard-link it to the target: link() fails if the target exists."""
    directory, name = os.path.split(fs_path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4()}.tmp")
    try:
        _write_synced(tmp, data)
        try:
            os.link(tmp, fs_path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            logger.warning("%s: no hard links on this filesystem (%s); using O_EXCL create", path, exc)
            return _create_exclusive(fs_path, data)
        _fsync_dir(directory)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def _create_exclusive(fs_path: str, data: bytes) -> bool:
    """O_CREAT|O_EXCL fallback: still never overwrites, but a reader may briefly see a partial file."""
    try:
        _write_synced(fs_path, data)
    except FileExistsError:
        return False
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(fs_path)  # we created it: do not leave half a snapshot behind
        raise
    return True


def _write_synced(path: str, data: bytes) -> None:
    """Create (O_EXCL) and fsync, so a linked/renamed file is durable before it becomes visible."""
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(directory: str) -> None:
    """Persist the new directory entry; some filesystems cannot open directories, which is fine."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
