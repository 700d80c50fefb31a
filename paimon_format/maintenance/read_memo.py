"""A per-run memo of the immutable metadata files a maintenance run reads (issue #26).

Why: expire-snapshots and expire-tags look at the same small files from several passes (the table
check, the placement estimate, the plan, the expiring side, the retained side, the final tag check),
and on an object store every read is a request that waits a round trip. Snapshot, changelog, tag,
schema, manifest-list, manifest and index-manifest files are written once under a name of their own
and never rewritten in place (Paimon creates them; a replaced tag is written through a FileIO, which
this memo sees), so within one run a second read of one of them can be answered from the first.

What is never answered from the memo:
- hints (`LATEST`, `EARLIEST`), consumers, listings, data files: they change, or are read once;
- a file that is absent: "not there" is always asked again (a commit may create it meanwhile);
- a failed read: it raises, and nothing is remembered, so a failure is never turned into "absent"
  or into an old copy.

A file is *known present* once this run read it or listed it; `file_exists` of such a file needs no
request. Every delete or write through this FileIO forgets the path first, and a fresh listing of a
directory forgets the files it no longer shows (expired by another run meanwhile); `forget` drops
everything (after deletes that ran elsewhere, e.g. on Spark executors, which hold their own empty
memo: it is never pickled).

Memory is bounded whatever the table's size: at most `MAX_BYTES` of file contents (least recently
used go first; a file larger than `MAX_FILE_BYTES` is not kept) and `MAX_KNOWN` known-present names.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

from paimon_format.errors import MissingFileError
from paimon_format.storage.file_status import FileStatus
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table

MAX_BYTES = 32 * 2**20  # file contents kept at once, per run and process
MAX_FILE_BYTES = 8 * 2**20  # a larger file is read each time (manifest.target-file-size's default)
MAX_KNOWN = 100_000  # names known present

# Written once, never rewritten in place: snapshot-N, changelog-N (the metadata file, not a data
# file's changelog-<uuid>-N.orc), schema-N, tag-<name> (also parked in tag-deletion/),
# manifest-list-*, manifest-*, index-manifest-*.
_IMMUTABLE = re.compile(r"^(?:snapshot-\d+|changelog-\d+|schema-\d+|tag-.+|manifest-.+|index-manifest-.+)$")


def _split(path: str) -> tuple[str, str]:
    directory, _, name = path.rstrip("/").rpartition("/")
    return directory, name


def memoizable(path: str) -> bool:
    """Whether `path` names an immutable metadata file (by its name, as Paimon names them)."""
    return bool(_IMMUTABLE.match(_split(path)[1]))


class _MemoState:
    """What one run has remembered, shared by every ReadMemoFileIO of the run in one process."""

    def __init__(self) -> None:
        self.contents: OrderedDict[str, bytes] = OrderedDict()
        self.bytes = 0
        # directory -> name known present -> (size, modification ms) as last listed (None: read only)
        self.known: dict[str, dict[str, tuple[int, int] | None]] = {}
        self.known_count = 0
        self.loading: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.hits = 0  # reads and existence checks answered without a request

    # callers hold `lock`

    def drop(self, path: str) -> None:
        data = self.contents.pop(path, None)
        if data is not None:
            self.bytes -= len(data)
        directory, name = _split(path)
        names = self.known.get(directory)
        if names is not None and name in names:
            del names[name]
            self.known_count -= 1

    def mark_known(self, path: str, stamp: tuple[int, int] | None = None) -> None:
        """`path` is present; `stamp`: its (size, modification ms) in a listing. A listing that shows
        a known file with another stamp than the last one (a tag replaced meanwhile: Paimon's
        replace_tag rewrites the file), or a tag so far known only from a read, makes the file be
        read again. What a stamp cannot see: a rewrite of the same size within the store's mtime
        resolution (a second on S3) between two looks."""
        directory, name = _split(path)
        names = self.known.setdefault(directory, {})
        if name in names:
            previous = names[name]
            if stamp is None or previous == stamp or (previous is None and not name.startswith("tag-")):
                names[name] = stamp if stamp is not None else previous
                return
            # listed with another stamp, or a tag (replace-tag rewrites tags in place) first listed
            # after a read whose bytes may predate the rewrite: the bytes go, read again when asked
            data = self.contents.pop(path, None)
            if data is not None:
                self.bytes -= len(data)
            names[name] = stamp
            return
        if self.known_count < MAX_KNOWN:
            names[name] = stamp
            self.known_count += 1

    def is_known(self, path: str) -> bool:
        directory, name = _split(path)
        return path in self.contents or name in self.known.get(directory, ())

    def keep(self, path: str, data: bytes) -> None:
        self.mark_known(path)
        if len(data) > MAX_FILE_BYTES or path in self.contents or not self.is_known(path):
            return  # beyond MAX_KNOWN no stamp could tell a rewrite: nothing is kept unstamped
        self.contents[path] = data
        self.bytes += len(data)
        while self.bytes > MAX_BYTES:
            _old, dropped = self.contents.popitem(last=False)
            self.bytes -= len(dropped)


# Per process (a Spark executor's Python worker runs many tasks of a run): the memos of the last
# few runs by token, so that the passes of one run share their reads there too.
_PROCESS_MEMOS: OrderedDict[str, _MemoState] = OrderedDict()
_PROCESS_MEMO_RUNS = 2
_PROCESS_LOCK = threading.Lock()


def _process_memo(token: str) -> _MemoState:
    with _PROCESS_LOCK:
        state = _PROCESS_MEMOS.get(token)
        if state is None:
            state = _PROCESS_MEMOS[token] = _MemoState()
            while len(_PROCESS_MEMOS) > _PROCESS_MEMO_RUNS:
                _PROCESS_MEMOS.popitem(last=False)
        _PROCESS_MEMOS.move_to_end(token)
        return state


class ReadMemoFileIO(FileIO):
    """`inner` (a plain, faulty or timed FileIO) with the reads of immutable metadata files
    remembered for one run; every other call is `inner`'s own.

    Pickled (to a Spark executor) it carries `inner` and the run's token, never contents: the tasks
    of the run in one executor process share one memo there (`_PROCESS_MEMOS`). `forget()` takes a
    new token, so what executors remembered before it is never used after it.
    """

    def __init__(self, inner: FileIO, token: str | None = None) -> None:
        super().__init__(
            inner.protocol,
            inner.storage_options,
            inner.allow_unsafe_overwrite_commit,
            inner.configured_parallelism,
        )
        self.inner = inner
        self._token = token or uuid.uuid4().hex
        self._state = _MemoState() if token is None else _process_memo(self._token)

    @staticmethod
    def wrapping(file_io: FileIO) -> FileIO:
        """`file_io` with a fresh memo (itself when it already has one)."""
        return file_io if isinstance(file_io, ReadMemoFileIO) else ReadMemoFileIO(file_io)

    def __repr__(self) -> str:
        return f"ReadMemo({self.inner!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"inner": self.inner, "token": self._token}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["inner"], state["token"])  # type: ignore[misc]

    @property
    def hits(self) -> int:
        """Reads and existence checks this run's memo answered without a request (this process)."""
        return self._state.hits

    # -- the memo ----------------------------------------------------------------------------------

    def forget(self, path: str | None = None) -> None:
        """Forget `path` (None: everything, here and on executors); the next read or existence
        check asks the store."""
        if path is None:
            self._token = uuid.uuid4().hex
            self._state = _MemoState()
            return
        with self._state.lock:
            self._state.drop(path)

    # -- reading -----------------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The file's bytes: from this run's first read when it is an immutable metadata file.

        Concurrent reads of one path (reads in flight) wait for the first instead of sending their
        own; if that first read failed, each asks the store itself (and fails or succeeds alone).
        """
        state = self._state
        if not memoizable(path):
            return self.inner.read_bytes(path)
        while True:
            with state.lock:
                data = state.contents.get(path)
                if data is not None:
                    state.contents.move_to_end(path)
                    state.hits += 1
                    return data
                loading = state.loading.get(path)
                if loading is None:
                    loading = state.loading[path] = threading.Event()
                    break
            loading.wait()
            with state.lock:
                if path not in state.contents:
                    return self.inner.read_bytes(path)  # the first read failed or was not kept
        try:
            data = self.inner.read_bytes(path)
            with state.lock:
                state.keep(path, data)
            return data
        finally:
            with state.lock:
                state.loading.pop(path, None)
            loading.set()

    def file_exists(self, path: str) -> bool:
        """True without a request for an immutable file this run read or listed; else the store's
        answer (a file found absent is asked again next time)."""
        state = self._state
        if memoizable(path):
            with state.lock:
                if state.is_known(path):
                    state.hits += 1
                    return True
        found = self.inner.file_exists(path)
        if found and memoizable(path):
            with state.lock:
                state.mark_known(path)
        return found

    def exists(self, path: str) -> bool:
        state = self._state
        if memoizable(path):
            with state.lock:
                if state.is_known(path):
                    state.hits += 1
                    return True
        return self.inner.exists(path)

    def list_dir(self, path: str) -> list[FileStatus]:
        """A fresh listing; its immutable files become known present, and known files it no longer
        shows (deleted by another run meanwhile) or shows changed (`mark_known`) are forgotten."""
        state = self._state
        directory = path.rstrip("/")
        try:
            statuses = self.inner.list_dir(path)  # on S3 one request, an absent directory included
        except MissingFileError:
            with state.lock:  # no directory: nothing in it is present any more
                for name in list(state.known.get(directory, ())):
                    state.drop(f"{directory}/{name}")
            raise
        listed = {_split(s.path)[1] for s in statuses if not s.is_dir}
        with state.lock:
            for name in list(state.known.get(directory, ())):
                if name not in listed:
                    state.drop(f"{directory}/{name}")
            for path_in_dir in list(state.contents):
                parent, name = _split(path_in_dir)
                if parent == directory and name not in listed:
                    state.drop(path_in_dir)
            for status in statuses:
                if not status.is_dir and memoizable(status.path):
                    stamp = (status.size, status.modification_time_ms)
                    state.mark_known(status.path.rstrip("/"), stamp)
        return statuses

    def open_input(self, path: str, size: int | None = None) -> Any:
        return self.inner.open_input(path, size)

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def list_files_recursive(self, path: str) -> Iterator[FileStatus]:
        return self.inner.list_files_recursive(path)

    @property
    def lists_key_ranges(self) -> bool:
        return self.inner.lists_key_ranges

    def list_key_range(
        self, path: str, start_after: str | None = None, stop_before: str | None = None
    ) -> Iterator[list[tuple[str, int, int]]]:
        return self.inner.list_key_range(path, start_after, stop_before)

    @property
    def fs(self) -> Any:
        return self.inner.fs

    # -- writing and deleting: the path is forgotten first ---------------------------------------

    def write_bytes(self, path: str, data: bytes) -> None:
        self.forget(path)
        self.inner.write_bytes(path, data)

    def put_local_file(self, path: str, local_path: str) -> None:
        self.forget(path)
        self.inner.put_local_file(path, local_path)

    def mkdirs(self, path: str) -> None:
        self.inner.mkdirs(path)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        self.forget(path)
        return self.inner.create_if_absent(path, data)

    def delete(self, path: str, *, just_read: bool = False) -> bool:
        self.forget(path)
        return self.inner.delete(path, just_read=just_read)

    def delete_many(self, paths: Sequence[str]) -> list[str]:
        state = self._state
        with state.lock:
            for path in paths:
                state.drop(path)
        return self.inner.delete_many(paths)

    def _s3_call(self, method: str, **kwargs: Any) -> Any:
        return self.inner._s3_call(method, **kwargs)  # noqa: SLF001 - the wrapped FileIO's own client


def forget_reads(file_io: FileIO) -> None:
    """Drop a run's memo (no-op on a plain FileIO): files may have been deleted elsewhere."""
    if isinstance(file_io, ReadMemoFileIO):
        file_io.forget()


def with_read_memo(table: Table) -> Table:
    """`table` reading through a per-run memo (itself when its FileIO already has one)."""
    if isinstance(table.file_io, ReadMemoFileIO):
        return table
    return dataclasses.replace(table, file_io=ReadMemoFileIO(table.file_io))
