"""Storage access over fsspec: read, write, list, delete, and an atomic create-if-absent per backend.

Why a wrapper and not fsspec directly:
* errors: fsspec swallows some failures (`exists` returns False on a permission error, `walk` skips
  directories it cannot list) and raises backend-specific ones elsewhere. Maintenance jobs decide what
  to delete from listings, so every failure here becomes a `StorageError` naming the path, and a missing
  file a `MissingFileError`; nothing is ever turned into an empty result.
* commits: a snapshot file must be created only if absent (spec §3). Each backend gets a true
  primitive (hard link, a lock on the in-memory store, S3 `If-None-Match: *`); no backend silently
  falls back to an overwrite.
* Spark: a FileIO is pickled to executors, so it holds only the protocol and the storage options and
  builds the fsspec filesystem lazily on whichever process uses it.

Paths given to FileIO are full (`/abs/path`, `file:///abs`, `s3://bucket/key`, `memory://x/y`), and
listings answer in the caller's form (the listed directory's text + "/" + child name), so callers can
relativise results against the table root with `FileIO.relative_to`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import stat
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import fsspec

from paimon_format.errors import (
    MissingDependencyError,
    MissingFileError,
    PaimonFormatError,
    StorageError,
    UnsupportedOperationError,
)

logger = logging.getLogger(__name__)

# URL scheme -> fsspec protocol. Paths without a scheme are local.
_PROTOCOLS = {
    "file": "file",
    "local": "file",
    "memory": "memory",
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "abfs": "abfs",
    "abfss": "abfs",
    "az": "abfs",
}
_S3_DELETE_BATCH = 1000  # DeleteObjects limit
_S3_LIST_PAGE = 1000
# One process-wide lock: the in-memory store is a class attribute shared by every MemoryFileSystem.
_MEMORY_CREATE_LOCK = threading.Lock()
# Errors that are bugs in the caller, not storage failures: never disguise them as StorageError.
_PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError, AssertionError, KeyError, IndexError)
# link() fails with these on filesystems without hard links; we fall back to O_CREAT|O_EXCL.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


@dataclass(frozen=True)
class FileStatus:
    """One listing entry; `path` is in the caller's form (same scheme as the listed directory)."""

    path: str
    size: int
    modification_time_ms: int
    is_dir: bool


def protocol_of(url: str) -> str:
    """The fsspec protocol for a URL: no scheme -> "file", s3a/s3n -> "s3", gs -> "gcs", ..."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return "file"
    scheme = scheme.lower()
    return _PROTOCOLS.get(scheme, scheme)


# What to install for each object store's fsspec backend (`pip install ...`).
_BACKEND_PACKAGES = {
    "s3": "paimon-jobs[s3] (s3fs)",
    "s3a": "paimon-jobs[s3] (s3fs)",
    "gs": "paimon-jobs[gcs] (gcsfs)",
    "gcs": "paimon-jobs[gcs] (gcsfs)",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
}


def fsspec_backend_install(protocol: str) -> str:
    """What `pip install` brings the fsspec backend of `protocol`, for a "install X" message."""
    return _BACKEND_PACKAGES.get(protocol, f"the fsspec backend for {protocol}://")


def join_path(*parts: str) -> str:
    """Join a root and relative parts with "/"; empty parts are skipped, a bare "memory://" is kept."""
    if not parts:
        raise ValueError("join_path needs at least a root")
    root = parts[0]
    stripped = root.rstrip("/")
    out = stripped + "//" if stripped.endswith(":") else stripped
    for part in parts[1:]:
        part = part.strip("/")
        if part:
            out = f"{out}{part}" if out.endswith("//") else f"{out}/{part}"
    return out or "/"


@contextmanager
def _storage_errors(action: str, path: str, missing_is_error: bool = True) -> Iterator[None]:
    """Translate fsspec/OS/botocore failures into our error types, with the path in the message."""
    try:
        yield
    except PaimonFormatError:
        raise
    except _PROGRAMMING_ERRORS:
        raise
    except FileNotFoundError as exc:
        if missing_is_error:
            raise MissingFileError(path) from exc
        raise StorageError(f"{action} {path}: not found ({exc})") from exc
    except NotImplementedError as exc:
        raise UnsupportedOperationError(f"{action} {path}: not supported by this filesystem ({exc})") from exc
    except Exception as exc:  # noqa: BLE001 - every other backend failure is a storage failure
        raise StorageError(f"{action} {path}: {type(exc).__name__}: {exc}") from exc


class FileIO:
    """Storage for one table (or warehouse): one fsspec protocol plus its storage options."""

    def __init__(
        self,
        protocol: str,
        storage_options: dict[str, Any] | None = None,
        allow_unsafe_overwrite_commit: bool = False,
    ) -> None:
        self.protocol = protocol
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self.allow_unsafe_overwrite_commit = allow_unsafe_overwrite_commit
        self._fs: fsspec.AbstractFileSystem | None = None

    @staticmethod
    def for_path(
        url: str, storage_options: dict[str, Any] | None = None, allow_unsafe_overwrite_commit: bool = False
    ) -> FileIO:
        """The FileIO for the filesystem of `url` (`/local`, `file://`, `s3://`, `s3a://`, `gs://`, ...).

        `allow_unsafe_overwrite_commit` lets `create_if_absent` use exists-check-then-write on a backend
        without a create-if-absent primitive; concurrent committers can then overwrite each other.
        """
        file_io = FileIO(protocol_of(url), storage_options, allow_unsafe_overwrite_commit)
        if os.environ.get("PAIMON_FAULTS") or "paimon_format.storage.faults" in sys.modules:
            from paimon_format.storage.faults import maybe_inject  # fault injection for tests (PAIMON_FAULTS)

            return maybe_inject(file_io)
        return file_io

    # -- pickling and identity -------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        # The fsspec filesystem holds sockets, an event loop and locks: rebuild it on the executor.
        state = self.__dict__.copy()
        state["_fs"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:  # never print storage option values: they may be credentials
        return f"FileIO(protocol={self.protocol!r}, storage_options={sorted(self.storage_options)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileIO):
            return NotImplemented
        return (self.protocol, self.storage_options, self.allow_unsafe_overwrite_commit) == (
            other.protocol,
            other.storage_options,
            other.allow_unsafe_overwrite_commit,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable options dict

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem, created on first use in this process."""
        if self._fs is None:
            try:
                self._fs = fsspec.filesystem(
                    self.protocol, **with_backend_defaults(self.protocol, self.storage_options)
                )
            except ImportError as exc:
                raise MissingDependencyError(
                    f"storage {self.protocol}://", fsspec_backend_install(self.protocol), str(exc)
                ) from exc
            except ValueError as exc:
                raise UnsupportedOperationError(f"unknown protocol {self.protocol!r}: {exc}") from exc
        return self._fs

    # -- paths -----------------------------------------------------------------------------------

    def join(self, *parts: str) -> str:
        """`join_path`: root + relative parts with "/"."""
        return join_path(*parts)

    @staticmethod
    def relative_to(root: str, path: str) -> str:
        """`path` relative to `root` ("" for the root itself); ValueError if it is not under root.

        Both must be in the same form (FileIO listings keep the form of the listed directory).
        """
        base = join_path(root)
        if path.rstrip("/") == base.rstrip("/"):
            return ""
        prefix = base if base.endswith("/") else base + "/"
        if not path.startswith(prefix):
            raise ValueError(f"{path} is not under {root}")
        return path[len(prefix) :].strip("/")

    def _fs_path(self, path: str) -> str:
        """The path as the fsspec filesystem names it ("bucket/key", "/x/y", "/abs")."""
        if protocol_of(path) != self.protocol:
            raise ValueError(f"{path} is not a {self.protocol} path (this FileIO serves {self.protocol}://)")
        if self.protocol == "file":
            return os.path.abspath(path[len("file://") :] if path.startswith("file://") else path)
        return self.fs._strip_protocol(path).rstrip("/")

    # -- reading ---------------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The whole file; MissingFileError when it does not exist (never b"" for a failed read)."""
        fs_path = self._fs_path(path)
        with _storage_errors("read", path):
            if self.protocol == "file":
                with open(fs_path, "rb") as handle:
                    return handle.read()
            return self.fs.cat_file(fs_path)

    def open_input(self, path: str) -> Any:
        """A seekable binary stream of a file, for reading it piece by piece (data files).

        The caller closes it. MissingFileError when the file does not exist, StorageError otherwise.
        """
        fs_path = self._fs_path(path)
        with _storage_errors("open", path):
            if self.protocol == "file":
                return open(fs_path, "rb")  # noqa: SIM115 - the caller owns the stream
            return self.fs.open(fs_path, "rb")

    def exists(self, path: str) -> bool:
        """True for an existing file or directory; errors other than not-found are raised."""
        fs_path = self._fs_path(path)
        if self.protocol == "file":
            return _local_exists(fs_path, path)
        with _storage_errors("stat", path):
            self.fs.invalidate_cache(fs_path)
            try:
                self.fs.info(fs_path)
            except FileNotFoundError:
                return False
        return True

    def size(self, path: str) -> int:
        """Size in bytes of a file; MissingFileError when absent, StorageError for a directory."""
        fs_path = self._fs_path(path)
        with _storage_errors("stat", path):
            if self.protocol == "file":
                st = os.stat(fs_path)
                if stat.S_ISDIR(st.st_mode):
                    raise StorageError(f"size {path}: is a directory")
                return st.st_size
            self.fs.invalidate_cache(fs_path)
            info = self.fs.info(fs_path)
            if info.get("type") == "directory":
                raise StorageError(f"size {path}: is a directory")
            return int(info["size"])

    def list_dir(self, path: str) -> list[FileStatus]:
        """One level of a directory: files and subdirectories.

        Raises MissingFileError when the directory does not exist. On object stores a "directory" is
        only a key prefix, so one without any keys below it counts as missing: callers that treat an
        absent directory as empty (e.g. a table without tags) catch MissingFileError themselves.
        """
        fs_path = self._fs_path(path)
        with _storage_errors("list", path):
            self.fs.invalidate_cache(fs_path)
            entries = self.fs.ls(fs_path, detail=True)
        statuses = []
        for info in entries:
            raw_name = str(info["name"])
            name = raw_name.rstrip("/")
            if name == fs_path.rstrip("/"):
                # The listed prefix's own directory marker: a zero-byte "dir/" key (S3 console "Create
                # folder", Hadoop S3A mkdirs) that s3fs reports as a file named with the slash.
                if info.get("type") != "directory" and not raw_name.endswith("/"):
                    raise StorageError(f"list {path}: not a directory")
                continue
            statuses.append(self._status(join_path(path, name.rsplit("/", 1)[-1]), info))
        return statuses

    def list_files_recursive(self, path: str) -> Iterator[FileStatus]:
        """Every file below `path` (directories are not yielded), streamed; missing dir -> MissingFileError.

        S3 uses one flat paginated listing (no per-directory requests); other backends walk the tree
        with `list_dir`, so no listing failure is skipped.
        """
        if self.protocol == "s3":
            yield from self._s3_list_recursive(path)
            return
        pending = [path]
        while pending:
            directory = pending.pop()
            for status in self.list_dir(directory):
                if status.is_dir:
                    pending.append(status.path)
                else:
                    yield status

    def _status(self, path: str, info: dict[str, Any]) -> FileStatus:
        is_dir = info.get("type") == "directory"
        return FileStatus(
            path=path,
            size=0 if is_dir else int(info.get("size") or 0),
            modification_time_ms=_mtime_ms(info, path, is_dir),
            is_dir=is_dir,
        )

    # -- writing ---------------------------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or overwrite a file (hints, data files, manifests); local parents are created.

        Local writes go to a temp file renamed over the target, so readers never see half a file.
        """
        fs_path = self._fs_path(path)
        with _storage_errors("write", path, missing_is_error=False):
            if self.protocol == "file":
                self._local_replace(fs_path, data)
            else:
                self.fs.pipe_file(fs_path, data)

    def mkdirs(self, path: str) -> None:
        """Create a directory and its parents; object stores have no directories, so nothing to do."""
        if self.protocol not in ("file", "memory"):
            return
        fs_path = self._fs_path(path)
        with _storage_errors("mkdirs", path, missing_is_error=False):
            self.fs.makedirs(fs_path, exist_ok=True)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Atomically create `path` with `data`; False (and nothing written) if it already exists.

        This is the commit primitive for snapshot-N and schema-N: it never overwrites.
        """
        create = self._create_if_absent_primitive()  # refuse before touching storage
        fs_path = self._fs_path(path)
        with _storage_errors("create", path, missing_is_error=False):
            return create(fs_path, path, data)

    def _create_if_absent_primitive(self) -> Callable[[str, str, bytes], bool]:
        if self.protocol == "file":
            return self._create_local
        if self.protocol == "memory":
            return self._create_memory
        if self.protocol == "s3":
            return self._create_s3
        if self.allow_unsafe_overwrite_commit:
            return self._create_unsafe
        raise UnsupportedOperationError(
            f"{self.protocol}:// has no create-if-absent primitive here, so a commit could overwrite a "
            "concurrent writer's snapshot. Set allow_unsafe_overwrite_commit=True to accept a best-effort "
            "exists-check-then-write (safe only with a single writer)."
        )

    def _create_local(self, fs_path: str, path: str, data: bytes) -> bool:
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
                return self._create_local_exclusive(fs_path, data)
            _fsync_dir(directory)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)

    @staticmethod
    def _create_local_exclusive(fs_path: str, data: bytes) -> bool:
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

    def _create_memory(self, fs_path: str, path: str, data: bytes) -> bool:
        with _MEMORY_CREATE_LOCK:
            if self.fs.exists(fs_path):
                return False
            self.fs.pipe_file(fs_path, data)
            return True

    def _create_s3(self, fs_path: str, path: str, data: bytes) -> bool:
        """PutObject with If-None-Match: * ; 412 means the key exists, 409 a concurrent conditional put.

        botocore retries a put whose response was lost; the retry then gets 412 although our bytes are
        there. So on 412 the object is read back: identical bytes count as our success (like Java's
        "target exists and equals our snapshot").
        """
        from botocore.exceptions import ClientError

        bucket, key = _split_bucket_key(fs_path, path)
        try:
            self._s3_call("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status == 412 or code == "PreconditionFailed":
                return self._existing_equals(path, data)
            if status == 409 or code == "ConditionalRequestConflict":
                return False
            raise
        finally:
            self.fs.invalidate_cache(fs_path)
        return True

    def _existing_equals(self, path: str, data: bytes) -> bool:
        try:
            return self.read_bytes(path) == data
        except MissingFileError:
            return False  # deleted since: still not ours

    def _create_unsafe(self, fs_path: str, path: str, data: bytes) -> bool:
        logger.warning(
            "%s: create-if-absent by exists-check-then-write (allow_unsafe_overwrite_commit)", path
        )
        if self.exists(path):
            return False
        self.fs.pipe_file(fs_path, data)
        return True

    @staticmethod
    def _local_replace(fs_path: str, data: bytes) -> None:
        directory, name = os.path.split(fs_path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{name}.{uuid.uuid4()}.tmp")
        try:
            _write_synced(tmp, data)
            os.replace(tmp, fs_path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)

    # -- deleting --------------------------------------------------------------------------------

    def delete(self, path: str) -> bool:
        """Delete one file; False if it did not exist. Directories are refused (StorageError)."""
        fs_path = self._fs_path(path)
        with _storage_errors("delete", path, missing_is_error=False):
            if self.protocol == "file":
                try:
                    os.remove(fs_path)
                except FileNotFoundError:
                    return False
                return True
            self.fs.invalidate_cache(fs_path)
            try:
                info = self.fs.info(fs_path)
            except FileNotFoundError:
                return False
            if info.get("type") == "directory":
                raise StorageError(f"delete {path}: is a directory (directories are never deleted)")
            self.fs.rm_file(fs_path)
            return True

    def delete_many(self, paths: Sequence[str]) -> list[str]:
        """Delete many files; returns the paths deleted.

        S3 sends DeleteObjects in batches of 1000 keys; S3 reports absent keys as deleted, so there the
        result includes them. Elsewhere absent files are skipped. Every path is attempted; if any
        failed, StorageError is raised afterwards with the failures in the message and the paths that
        were deleted in its `deleted_paths` attribute.
        """
        if self.protocol == "s3":
            deleted, failures = self._s3_delete_many(paths)
        else:
            deleted, failures = self._delete_each(paths)
        if failures:
            sample = "; ".join(failures[:5])
            error = StorageError(f"failed to delete {len(failures)} of {len(paths)} files: {sample}")
            error.deleted_paths = deleted  # type: ignore[attr-defined]
            raise error
        return deleted

    def _delete_each(self, paths: Sequence[str]) -> tuple[list[str], list[str]]:
        deleted: list[str] = []
        failures: list[str] = []
        for path in paths:
            try:
                if self.delete(path):
                    deleted.append(path)
            except StorageError as exc:
                failures.append(str(exc))
        return deleted, failures

    # -- S3 specifics ----------------------------------------------------------------------------

    def _s3_call(self, method: str, **kwargs: Any) -> Any:
        """Call the s3fs session's botocore client directly, so ClientError keeps its HTTP status.

        The client carries the storage options' credentials, endpoint and `s3_additional_kwargs`
        (e.g. server-side encryption); our own kwargs always win over those.
        """
        from fsspec.asyn import sync

        fs = self.fs

        async def call() -> Any:
            await fs.set_session()
            client = await fs.get_s3(kwargs.get("Bucket"))
            bound = getattr(client, method)
            merged = {**fs._get_s3_method_kwargs(bound, **kwargs), **kwargs}
            return await bound(**merged)

        return sync(fs.loop, call)

    def _s3_list_recursive(self, path: str) -> Iterator[FileStatus]:
        fs_path = self._fs_path(path)
        bucket, key = _split_bucket_key(fs_path, path, key_required=False)
        prefix = f"{key}/" if key else ""
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": _S3_LIST_PAGE}
        found = False
        while True:
            with _storage_errors("list", path):
                page = self._s3_call("list_objects_v2", **request)
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/"):
                    continue  # a directory marker, not a file
                found = True
                info = {"LastModified": obj["LastModified"]}
                yield FileStatus(
                    path=join_path(path, obj["Key"][len(prefix) :]),
                    size=int(obj["Size"]),
                    modification_time_ms=_mtime_ms(info, obj["Key"], False),
                    is_dir=False,
                )
            if not page.get("IsTruncated"):
                break
            request["ContinuationToken"] = page["NextContinuationToken"]
        if not found and key:
            raise MissingFileError(path)

    def _s3_delete_many(self, paths: Sequence[str]) -> tuple[list[str], list[str]]:
        by_bucket: dict[str, list[tuple[str, str]]] = {}
        for path in paths:
            bucket, key = _split_bucket_key(self._fs_path(path), path)
            by_bucket.setdefault(bucket, []).append((key, path))
        deleted: list[str] = []
        failures: list[str] = []
        for bucket, items in by_bucket.items():
            for start in range(0, len(items), _S3_DELETE_BATCH):
                batch = items[start : start + _S3_DELETE_BATCH]
                done, failed = self._s3_delete_batch(bucket, batch)
                deleted.extend(done)
                failures.extend(failed)
        self.fs.invalidate_cache()
        return deleted, failures

    def _s3_delete_batch(self, bucket: str, batch: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
        path_of = dict(batch)
        request = {"Objects": [{"Key": key} for key, _ in batch], "Quiet": False}
        first = batch[0][1]
        with _storage_errors("delete", f"{first} (+{len(batch) - 1} more)", missing_is_error=False):
            response = self._s3_call("delete_objects", Bucket=bucket, Delete=request)
        deleted = [path_of[item["Key"]] for item in response.get("Deleted", []) if item["Key"] in path_of]
        failures = [
            f"{path_of.get(err.get('Key'), err.get('Key'))}: {err.get('Code')} {err.get('Message')}"
            for err in response.get("Errors", [])
        ]
        return deleted, failures


# -- helpers ------------------------------------------------------------------------------------

# botocore's retries for S3: 503 SlowDown, 500s and dropped connections are retried with exponential
# back-off and jitter ("standard" mode) instead of failing a job that touches millions of objects.
S3_RETRIES = {"max_attempts": 10, "mode": "standard"}


def with_backend_defaults(protocol: str, storage_options: dict[str, Any]) -> dict[str, Any]:
    """Storage options plus our defaults; whatever the user set wins, key by key.

    S3: `config_kwargs.retries` (botocore's retry config, handed to the client by s3fs).
    """
    if protocol != "s3":
        return storage_options
    options = dict(storage_options)
    config_kwargs = dict(options.get("config_kwargs") or {})
    config_kwargs.setdefault("retries", dict(S3_RETRIES))
    options["config_kwargs"] = config_kwargs
    return options


def _split_bucket_key(fs_path: str, path: str, key_required: bool = True) -> tuple[str, str]:
    bucket, _, key = fs_path.partition("/")
    if not bucket or (key_required and not key):
        raise ValueError(f"{path}: an S3 path needs a bucket and a key")
    return bucket, key.strip("/")


def _local_exists(fs_path: str, path: str) -> bool:
    try:
        os.stat(fs_path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"stat {path}: {exc}") from exc
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


# Keys the fsspec backends use for a modification time, most specific first.
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created")


def _mtime_ms(info: dict[str, Any], path: str, is_dir: bool) -> int:
    """Modification time in epoch millis.

    A file without one is an error rather than 0: orphan cleaning would take 0 for "very old".
    Object-store directories are virtual and have none; they get 0.
    """
    for key in _MTIME_KEYS:
        value = info.get(key)
        if value is not None:
            return _to_epoch_ms(value, path)
    if is_dir:
        return 0
    raise StorageError(f"list {path}: the filesystem reported no modification time ({sorted(info)})")


def _to_epoch_ms(value: Any, path: str) -> int:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)):
        return int(value * 1000)
    raise StorageError(f"list {path}: unreadable modification time {value!r}")
