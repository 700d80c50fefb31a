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

Local durability (`local_files`), URL arithmetic (`urls`) and listing entries (`file_status`) live
in their own modules. Fault injection for tests wraps FileIOs from outside (`install_wrapper`).

Paths given to FileIO are full (`/abs/path`, `file:///abs`, `s3://bucket/key`, `memory://x/y`), and
listings answer in the caller's form (the listed directory's text + "/" + child name), so callers can
relativise results against the table root with `FileIO.relative_to`.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import fsspec

from paimon_format.errors import (
    MissingDependencyError,
    MissingFileError,
    PaimonFormatError,
    StorageError,
    UnsupportedOperationError,
)
from paimon_format.storage import local_files, s3_client
from paimon_format.storage.file_status import FileStatus, mtime_ms
from paimon_format.storage.in_flight import default_parallelism, map_in_flight
from paimon_format.storage.s3_client import split_bucket_key
from paimon_format.storage.urls import fsspec_backend_install, join_path, protocol_of, with_backend_defaults

logger = logging.getLogger(__name__)

_S3_DELETE_BATCH = 1000  # DeleteObjects limit
# `open_input` with a known size fetches a file up to this size in one GET (a data file read
# otherwise costs a footer GET and then its column chunks).
WHOLE_READ_BYTES = 32 * 2**20
_S3_DELETES_IN_FLIGHT = 8  # DeleteObjects at once: 8,000 keys a round trip; S3 throttles writes per prefix
_S3_LIST_PAGE = 1000
# One process-wide lock: the in-memory store is a class attribute shared by every MemoryFileSystem.
_MEMORY_CREATE_LOCK = threading.Lock()
# Errors that are bugs in the caller, not storage failures: never disguise them as StorageError.
_PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError, AssertionError, KeyError, IndexError)

FileIOWrapper = Callable[["FileIO"], "FileIO"]
_WRAPPERS: list[FileIOWrapper] = []


def install_wrapper(wrapper: FileIOWrapper) -> None:
    """From now on `FileIO.for_path` passes every FileIO it makes through `wrapper` (once each).

    The hook for what sits above storage and must reach every FileIO a process makes: fault
    injection (`faults` installs itself on import), so FileIO never imports it.
    """
    if wrapper not in _WRAPPERS:
        _WRAPPERS.append(wrapper)


_COMPANIONS: list[Callable[[], Any]] = []


def pickle_companion(make: Callable[[], Any]) -> None:
    """From now on a pickled FileIO carries `make()` along (unless it is None), unpickled with it.

    The hook for what must reach every process a FileIO is shipped to (a Spark executor) without
    the storage layer knowing it: the jobs layer's counter of executors' throttles.
    """
    if make not in _COMPANIONS:
        _COMPANIONS.append(make)


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
        io_parallelism: int | None = None,
    ) -> None:
        self.protocol = protocol
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self.allow_unsafe_overwrite_commit = allow_unsafe_overwrite_commit
        self.configured_parallelism = io_parallelism
        self._fs: fsspec.AbstractFileSystem | None = None

    @staticmethod
    def for_path(
        url: str,
        storage_options: dict[str, Any] | None = None,
        allow_unsafe_overwrite_commit: bool = False,
        io_parallelism: int | None = None,
    ) -> FileIO:
        """The FileIO for the filesystem of `url` (`/local`, `file://`, `s3://`, `s3a://`, `gs://`, ...).

        `allow_unsafe_overwrite_commit` lets `create_if_absent` use exists-check-then-write on a backend
        without a create-if-absent primitive; concurrent committers can then overwrite each other.
        `io_parallelism`: requests in flight at once (`FileIO.io_parallelism`); None takes the
        protocol's default.
        """
        file_io = FileIO(protocol_of(url), storage_options, allow_unsafe_overwrite_commit, io_parallelism)
        for wrapper in _WRAPPERS:
            file_io = wrapper(file_io)
        return file_io

    # -- pickling and identity -------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        # The fsspec filesystem holds sockets, an event loop and locks: rebuild it on the executor.
        state = self.__dict__.copy()
        state["_fs"] = None
        companions = [companion for companion in (make() for make in _COMPANIONS) if companion is not None]
        if companions:
            state["_companions"] = companions
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.pop("_companions", None)  # unpickling them was their whole purpose
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
    def io_parallelism(self) -> int:
        """How many requests a job keeps in flight at once on this storage (`in_flight.map_in_flight`):
        the configured value, else high on object stores (latency-bound) and low on local disk."""
        if self.configured_parallelism is not None:
            return max(1, self.configured_parallelism)
        return default_parallelism(self.protocol)

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem, created on first use in this process."""
        if self._fs is None:
            try:
                options = with_backend_defaults(self.protocol, self.storage_options, self.io_parallelism)
                self._fs = fsspec.filesystem(self.protocol, **options)
                if self.protocol == "s3":
                    s3_client.hook_retries(self._fs.s3)  # the property builds the botocore client
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

    def open_input(self, path: str, size: int | None = None) -> Any:
        """A seekable binary stream of a file, for reading it piece by piece (data files).

        `size`: the file's length when the caller knows it (a data file's manifest entry, as Java's
        readers take it). On an object store opening then costs no HEAD request, and a file of at
        most `WHOLE_READ_BYTES` is fetched in one GET: a Parquet or ORC read is otherwise a footer
        GET and then the column chunks, each request a round trip, and a file that small is read to
        its end by the first chunk's read-ahead (50 MB) anyway. (Measured: scripts/bench_s3_files.py.)
        The caller closes it. MissingFileError when the file does not exist (with a larger `size`,
        on the first read), StorageError otherwise.
        """
        fs_path = self._fs_path(path)
        with _storage_errors("open", path):
            if self.protocol == "file":
                return open(fs_path, "rb")  # noqa: SIM115 - the caller owns the stream
            if size is not None and size <= WHOLE_READ_BYTES:
                return io.BytesIO(self.fs.cat_file(fs_path))
            if size is not None and self.protocol == "s3":
                return self.fs.open(fs_path, "rb", size=size)
            return self.fs.open(fs_path, "rb")

    def exists(self, path: str) -> bool:
        """True for an existing file or directory; errors other than not-found are raised."""
        fs_path = self._fs_path(path)
        if self.protocol == "file":
            return local_files.local_exists(fs_path, path)
        with _storage_errors("stat", path):
            self.fs.invalidate_cache(fs_path)
            try:
                self.fs.info(fs_path)
            except FileNotFoundError:
                return False
        return True

    def file_exists(self, path: str) -> bool:
        """True when `path` is an existing file; errors other than not-found are raised.

        On S3 one HEAD request: `exists` also asks whether a missing key is a "directory" (a second,
        LIST request), which a file check (a snapshot, a tag, a data file) never needs.
        """
        if self.protocol != "s3":
            return self.exists(path)
        from botocore.exceptions import ClientError  # optional (s3 extra): only S3 paths get here

        fs_path = self._fs_path(path)
        bucket, key = split_bucket_key(fs_path, path)
        with _storage_errors("stat", path):
            try:
                self._s3_call("head_object", Bucket=bucket, Key=key)
            except ClientError as exc:
                if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                    return False
                raise
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
        only a key prefix, so one without any keys below it counts as missing (on S3 also when a file
        has its name: `s3_client.list_one_level`): callers that treat an absent directory as empty
        (e.g. a table without tags) catch MissingFileError themselves.
        """
        fs_path = self._fs_path(path)
        if self.protocol == "s3":  # one request per 1,000 keys, an absent directory included
            bucket, key = split_bucket_key(fs_path, path, key_required=False)
            return s3_client.list_one_level(self.fs, bucket, key.rstrip("/"), path)
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
            modification_time_ms=mtime_ms(info, path, is_dir),
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
                local_files.replace_file(fs_path, data)
            else:
                self.fs.pipe_file(fs_path, data)

    def put_local_file(self, path: str, local_path: str) -> None:
        """Move a finished local file to `path` (a data file encoded on disk, `data.spool`): on local
        disk fsynced and renamed into place (copied first across devices), else uploaded."""
        fs_path = self._fs_path(path)
        with _storage_errors("write", path, missing_is_error=False):
            if self.protocol == "file":
                local_files.move_into_place(local_path, fs_path)
            else:
                self.fs.put_file(local_path, fs_path)

    def local_spool_dir(self, path: str) -> str | None:
        """The local directory of `path` on local disk (its spools go there), None elsewhere."""
        return os.path.dirname(self._fs_path(path)) if self.protocol == "file" else None

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
            return local_files.create_if_absent
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

    def _create_memory(self, fs_path: str, path: str, data: bytes) -> bool:
        with _MEMORY_CREATE_LOCK:
            if self.fs.exists(fs_path):
                return False
            self.fs.pipe_file(fs_path, data)
            return True

    def _create_s3(self, fs_path: str, path: str, data: bytes) -> bool:
        """PutObject with If-None-Match: * ; a lost answer or a 412 is settled by reading the object
        back (`s3_client.put_if_absent`: a retried put of ours must not count as another writer's)."""
        bucket, key = split_bucket_key(fs_path, path)
        try:
            return s3_client.put_if_absent(self.fs, bucket, key, data, path)
        finally:
            self.fs.invalidate_cache(fs_path)

    def _create_unsafe(self, fs_path: str, path: str, data: bytes) -> bool:
        logger.warning(
            "%s: create-if-absent by exists-check-then-write (allow_unsafe_overwrite_commit)", path
        )
        if self.exists(path):
            return False
        self.fs.pipe_file(fs_path, data)
        return True

    # -- deleting --------------------------------------------------------------------------------

    def delete(self, path: str, *, just_read: bool = False) -> bool:
        """Delete one file; False if it did not exist. Directories are refused (StorageError).
        `just_read`: the caller just read `path` as a file: no existence check (an object store's HEAD)."""
        fs_path = self._fs_path(path)
        with _storage_errors("delete", path, missing_is_error=False):
            if self.protocol == "file":
                try:
                    os.remove(fs_path)
                except FileNotFoundError:
                    return False
                return True
            self.fs.invalidate_cache(fs_path)
            if just_read:
                self.fs.rm_file(fs_path)
                return True
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

        S3 sends DeleteObjects in batches of 1000 keys, a few batches in flight at once; S3 reports
        absent keys as deleted, so there the result includes them. Elsewhere single deletes run
        `io_parallelism` at once and absent files are skipped. (In flight: on an object store each
        request waits a round trip.) Every path is attempted; if any failed, StorageError is raised
        afterwards with the failures in the message and the paths deleted in its `deleted_paths`.
        """
        outcomes = self._s3_delete_many(paths) if self.protocol == "s3" else self._delete_each(paths)
        deleted = [path for done, _failures, _count in outcomes for path in done]
        failures = [failure for _done, texts, _count in outcomes for failure in texts]
        if failures:
            failed = sum(count for _done, _texts, count in outcomes)
            sample = "; ".join(failures[:5])
            error = StorageError(f"failed to delete {failed} of {len(paths)} files: {sample}")
            error.deleted_paths = deleted  # type: ignore[attr-defined]
            raise error
        return deleted

    def _delete_each(self, paths: Sequence[str]) -> list[tuple[list[str], list[str], int]]:
        """(deleted, failure messages, files failed) per path, `io_parallelism` deletes in flight."""

        def attempt(path: str) -> tuple[list[str], list[str], int]:
            try:
                return ([path] if self.delete(path) else []), [], 0
            except StorageError as exc:
                return [], [str(exc)], 1

        return list(map_in_flight(attempt, paths, self.io_parallelism))

    # -- S3 specifics ----------------------------------------------------------------------------

    def _s3_call(self, method: str, **kwargs: Any) -> Any:
        """`s3_client.call` on this FileIO's filesystem (ClientError keeps its HTTP status)."""
        return s3_client.call(self.fs, method, **kwargs)

    def _s3_list_recursive(self, path: str) -> Iterator[FileStatus]:
        found = False
        for page in self.list_key_range(path):
            for relative, size, modified_ms in page:
                found = True
                yield FileStatus(join_path(path, relative), size, modified_ms, False)
        if not found and "/" in self._fs_path(path):
            raise MissingFileError(path)

    @property
    def lists_key_ranges(self) -> bool:
        """Whether `list_key_range` works: S3 only. GCS and ABFS list flat in key order too, but gcsfs and
        adlfs expose no start-after page call to bound; there callers list directory by directory."""
        return self.protocol == "s3"

    def list_key_range(
        self, path: str, start_after: str | None = None, stop_before: str | None = None
    ) -> Iterator[list[tuple[str, int, int]]]:
        """Objects below `path` whose key relative to `path` sorts after `start_after` (exclusive, as
        StartAfter) and before `stop_before` (None: unbounded), one list of (relative key, size, mtime
        ms) per LIST page. Why: one flat ListObjectsV2 (no delimiter, 1000 keys a page) lists a subtree
        in objects / 1000 requests, not one per directory, and ranges split it between listers.
        Keys sort by UTF-8 bytes (str order), so the bounds' shared start narrows the Prefix; markers
        are skipped. An empty range is an empty result; a failed page raises StorageError naming it.
        """
        if not self.lists_key_ranges:
            raise UnsupportedOperationError(f"list {path}: key ranges are listed on S3 only")
        fs_path = self._fs_path(path)
        bucket, key = split_bucket_key(fs_path, path, key_required=False)
        prefix = f"{key}/" if key else ""
        shared = os.path.commonprefix([start_after, stop_before]) if start_after and stop_before else ""
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix + shared, "MaxKeys": _S3_LIST_PAGE}
        if start_after is not None:
            request["StartAfter"] = prefix + start_after
        where = f"{path} (keys after {start_after!r}, before {stop_before!r})"
        while True:
            with _storage_errors("list", where):
                page = self._s3_call("list_objects_v2", **request)
            listed = [(obj["Key"][len(prefix) :], obj) for obj in page.get("Contents", [])]
            # both bounds checked here too: a store that ignored StartAfter must not list a key twice
            inside = [
                (k, obj)
                for k, obj in listed
                if (stop_before is None or k < stop_before) and (start_after is None or k > start_after)
            ]
            yield [(k, int(o["Size"]), mtime_ms(o, k, False)) for k, o in inside if o["Key"][-1] != "/"]
            if any(stop_before is not None and k >= stop_before for k, _ in listed):
                return
            if not page.get("IsTruncated"):
                return
            request["ContinuationToken"] = page["NextContinuationToken"]

    def _s3_delete_many(self, paths: Sequence[str]) -> list[tuple[list[str], list[str], int]]:
        """(deleted, failure messages, files failed) per DeleteObjects batch, a few batches in flight;
        a batch failing as a whole (after botocore's retries) fails all its files, the others run."""
        by_bucket: dict[str, list[tuple[str, str]]] = {}
        for path in paths:
            bucket, key = split_bucket_key(self._fs_path(path), path)
            by_bucket.setdefault(bucket, []).append((key, path))
        batches = [
            (bucket, items[start : start + _S3_DELETE_BATCH])
            for bucket, items in by_bucket.items()
            for start in range(0, len(items), _S3_DELETE_BATCH)
        ]

        def attempt(job: tuple[str, list[tuple[str, str]]]) -> tuple[list[str], list[str], int]:
            try:
                done, failed = self._s3_delete_batch(*job)
            except StorageError as exc:
                return [], [str(exc)], len(job[1])
            return done, failed, len(failed)

        in_flight = min(self.io_parallelism, _S3_DELETES_IN_FLIGHT, len(batches))
        outcomes = list(map_in_flight(attempt, batches, in_flight))
        self.fs.invalidate_cache()
        return outcomes

    def _s3_delete_batch(self, bucket: str, batch: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
        request = {"Objects": [{"Key": key} for key, _ in batch], "Quiet": False}
        first = batch[0][1]
        with _storage_errors("delete", f"{first} (+{len(batch) - 1} more)", missing_is_error=False):
            response = self._s3_call("delete_objects", Bucket=bucket, Delete=request)
        return s3_client.delete_outcome(response, dict(batch))
